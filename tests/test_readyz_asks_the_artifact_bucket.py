"""``/readyz`` asks the artifact store's bucket too, not only its metadata: a host whose S3
server is down, or hung, is "not ready" (D235: "the record and the artifact store answer").

Before: with the artifacts' metadata on PostgreSQL (or SQLite) and their content in a bucket,
the check read one metadata row and never touched the bucket, so a real ``toolhost serve
--http`` answered ``200 ready`` while every artifact write on it failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from pg_server import PgServer, pg_database, pg_server
from s3_server import S3Server, require_moto

from toolhost._adapters.artifact_store import JoinedArtifactStore
from toolhost._adapters.pg_artifacts import open_pg_s3_artifact_store
from toolhost._adapters.s3_artifacts import open_s3_artifact_store
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

BUCKET = "toolhost-ready"
#: A safety bound on one check against a server that never answers (the store's own is
#: about 2 x QUICK_TIMEOUT_S; the content client's timeouts took minutes).
HUNG_BOUND_S = 30.0


@pytest.fixture
def own_server() -> Iterator[S3Server]:
    """A moto server of the test's own, to stop, freeze and start without disturbing others."""
    require_moto()
    server = S3Server()
    server.start()
    server.create_bucket(BUCKET)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def frozen(server: S3Server) -> Iterator[None]:
    """The server stopped with SIGSTOP: it accepts connections (the kernel does) and answers
    none, as a wedged node does."""
    pid = server._process.pid if server._process is not None else None
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, own_server: S3Server,
          tmp_path: Path) -> Iterator[JoinedArtifactStore]:
    """The store as the composition opens it from the settings: the bucket's clients built
    from them, the metadata in the data directory or on PostgreSQL."""
    env = own_server.env(BUCKET)
    url = env["TOOLHOST_ARTIFACT_STORE"]
    opened: JoinedArtifactStore
    if request.param == "sqlite":
        opened = open_s3_artifact_store(url, env, tmp_path, FixedClock(T0))
    else:
        database = request.getfixturevalue("pg_database")
        opened = open_pg_s3_artifact_store(url, database, env, FixedClock(T0))
    try:
        yield opened
    finally:
        opened.close()


def test_the_store_is_not_ready_while_its_bucket_is_down_and_ready_once_back(
        store: JoinedArtifactStore, own_server: S3Server) -> None:
    assert store.ready() is True
    own_server.stop()
    assert store.ready() is False
    own_server.start()  # moto keeps nothing: an empty server
    assert store.ready() is False  # no bucket: writes would fail
    own_server.create_bucket(BUCKET)
    # The marker is gone with the old server, but the bucket answers: ready.
    assert store.ready() is True


def test_the_store_is_not_ready_within_seconds_while_its_server_hangs(
        store: JoinedArtifactStore, own_server: S3Server) -> None:
    with frozen(own_server):
        started = time.monotonic()
        answer = store.ready()
        took = time.monotonic() - started
    assert answer is False
    assert took < HUNG_BOUND_S, took
    assert store.ready() is True


def test_readyz_of_a_host_says_not_ready_while_its_bucket_is_down(
        tmp_path: Path, own_server: S3Server, pg_server: PgServer, pg_database: str) -> None:
    """The reviewer's deployment: the record and the artifacts' metadata on PostgreSQL, the
    content in a bucket, behind ``serve --http``."""
    pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not "
                                      "installed")
    from journeys.journey_support import Deployment, run

    deployment = Deployment(tmp_path, plugins="toolhost-math",
                            TOOLHOST_DATABASE_URL=pg_database, **own_server.env(BUCKET))
    down: list[int] = []
    up: list[int] = []

    async def journey() -> None:
        async with deployment.http_server() as mcp_url, httpx.AsyncClient(
                timeout=30) as client:
            readyz = mcp_url.removesuffix("/mcp") + "/readyz"
            assert (await client.get(readyz)).status_code == 200
            own_server.stop()
            try:
                # A probe every half second for 4 s: the first may be given the answer of
                # the check before the stop (it stands for a second).
                for _ in range(8):
                    down.append((await client.get(readyz)).status_code)
                    await anyio.sleep(0.5)
            finally:
                own_server.start()
                own_server.create_bucket(BUCKET)
            back = time.monotonic()
            while time.monotonic() < back + 30:
                up.append((await client.get(readyz)).status_code)
                if up[-1] == 200:
                    break
                await anyio.sleep(0.5)

    run(journey)
    assert down[-5:] == [503] * 5, down
    assert up[-1] == 200, up
