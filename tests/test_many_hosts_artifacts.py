"""Three host processes on one PostgreSQL database AND one bucket behave as one (issue #17).

Gated calls of a tool that streams an artifact (most within one part, a few long enough to be
multipart uploads) are paused in the shared record and approved on hosts picked at random,
some on two hosts at once. One host is killed in the middle of a call, in the middle of its
stream, with a multipart upload open. Then: every call ran at most once, the killed host's
row was settled by another, every succeeded call's artifact is readable and verified from
every host, the killed call published nothing, and after a purge the bucket holds exactly
the content the rows reference: no staged object, no multipart upload.

Each host is a real process (``DRIVER``) reading commands on stdin and answering one JSON
line each, as in test_many_hosts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from pg_server import pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)
from test_many_hosts import GATED as MANY_HOSTS_GATED
from test_many_hosts import Driver, approve_at_random, kill_and_settle, start_blocking_call

from toolhost import Idempotency, Risk, SideEffect, Tool, ToolOutput
from toolhost._adapters.pg_artifacts import open_pg_s3_artifact_store
from toolhost._adapters.s3_artifacts import PART_SIZE
from toolhost._model.artifacts import ArtifactOrigin
from toolhost._model.invocations import InvocationState
from toolhost._model.settings import Settings
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import STAGING_STALE_AFTER
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT, host_for

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

HERE = Path(__file__).resolve().parent
PREFIX = "artifacts"
KEY = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"],
       "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}, "id": {"type": "string"}},
       "required": ["echo", "id"], "additionalProperties": False}
CALLS = 60
TWICE = 12  # of them approved by two hosts at once
LONG = 4  # of them streamed as multipart uploads
SHORT_SIZE = 4096
LONG_SIZE = 2 * PART_SIZE + 4096  # three parts
CHUNK = 1024 * 1024


def content_of(key: str) -> bytes:
    """What the call for ``key`` streams: distinct per key, so every artifact is its own."""
    size = LONG_SIZE if key.startswith(("long", "block")) else SHORT_SIZE
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _stream(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    """One execution: a line in $MH_DIR/<key>, then the key's content streamed as an artifact.
    A key starting ``block`` stops once a part has gone to the bucket, and waits to be killed."""
    key = arguments["key"]
    directory = Path(os.environ["MH_DIR"])
    with open(directory / key, "a") as f:
        f.write("ran\n")
    content = content_of(key)
    with context.artifacts.stream(origin=ArtifactOrigin.EXPORT, name=f"{key}.bin",
                                  media_type="application/octet-stream",
                                  trust=Trust.INTERNAL_TOOL, max_bytes=len(content)) as stream:
        for start in range(0, len(content), CHUNK):
            stream.write(content[start:start + CHUNK])
            if key.startswith("block") and start + CHUNK > PART_SIZE:
                (directory / f"{key}.running").touch()  # a part is in the bucket
                threading.Event().wait()
        ref = stream.commit()
    return ToolOutput(structured={"echo": key, "id": ref.id}, content=ref.id)


PLUGIN = make_plugin(domains=["mh"], tools=[
    Tool(make_spec(name="mh.stream", input_schema=KEY, output_schema=OUT,
                   side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                   idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False, timeout_s=120),
         call=_stream),
])
#: Every mh.stream call waits for approval (a WORKSPACE_WRITE/LOW tool, as mh.write is).
GATED = MANY_HOSTS_GATED
#: An hour and a bit after the calls: what a stream left open then is abandoned.
LATER = DEFAULT_INSTANT + STAGING_STALE_AFTER + dt.timedelta(minutes=1)

DRIVER = """
import asyncio, datetime, hashlib, json, sys
sys.path.insert(0, {tests!r})
from test_many_hosts_artifacts import GATED, PLUGIN
from toolhost._model.settings import Settings
from toolhost.testing import host_for
host = host_for({{"mh-dist": PLUGIN}}, settings=Settings.from_environ(), policy=GATED)
host.pipeline
print(json.dumps({{"ready": host.pipeline.invocations.owner()}}), flush=True)
for line in sys.stdin:
    command, _, argument = line.strip().partition(" ")
    if command == "approve":
        resumed = asyncio.run(host.pipeline.resume(argument, "ops"))
        answer = {{"id": argument, "acted": resumed.acted,
                  "status": resumed.outcome.status.value,
                  "artifact": (resumed.outcome.structured or {{}}).get("id")}}
    elif command == "read":
        data = host.pipeline.artifacts.read(argument)
        answer = {{"sha256": hashlib.sha256(data).hexdigest()}}
    elif command == "purge":
        report = host.pipeline.artifacts.purge(datetime.datetime.fromisoformat(argument))
        answer = {{"staged_uploads": report.staged_uploads, "content_files": report.content_files}}
    else:
        answer = {{"recovered": [[r.invocation_id, r.action.value] for r in host.recover()]}}
    print(json.dumps(answer), flush=True)
"""


@pytest.fixture
def shared(pg_database: str, s3_server: S3Server, s3_bucket: str,
           tmp_path: Path) -> dict[str, str]:
    """The settings every host gets: one database, one bucket prefix."""
    return {"TOOLHOST_DATABASE_URL": pg_database, **s3_server.env(s3_bucket, PREFIX)}


@pytest.fixture
def drivers(shared: dict[str, str], tmp_path: Path) -> Iterator[list[Driver]]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(HERE)))
    (tmp_path / "ran").mkdir()
    started: list[Driver] = []
    try:
        for i in range(3):
            started.append(Driver(script, {
                **os.environ, **shared, "TOOLHOST_DATA_DIR": str(tmp_path / f"host-{i}"),
                "MH_DIR": str(tmp_path / "ran")}))
        yield started
    finally:
        for driver in started:
            driver.close()


def bucket_keys(server: S3Server, bucket: str) -> set[str]:
    listed = server.client().list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/")
    return {o["Key"] for o in listed.get("Contents", [])}


def open_uploads(server: S3Server, bucket: str) -> list[str]:
    listed = server.client().list_multipart_uploads(Bucket=bucket)
    return [u["Key"] for u in listed.get("Uploads", [])]


def test_three_hosts_on_one_bucket_lose_and_half_publish_no_artifact(
    shared: dict[str, str], s3_server: S3Server, s3_bucket: str, tmp_path: Path,
    drivers: list[Driver], monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = tmp_path / "ran"
    monkeypatch.setenv("MH_DIR", str(ran))
    pauser = host_for({"mh-dist": PLUGIN}, data_dir=tmp_path / "pauser", policy=GATED,
                      settings=Settings(env=shared))
    try:
        keys = ["block-0", *(f"long{i}" for i in range(1, LONG + 1)),
                *(f"k{i}" for i in range(LONG + 1, CALLS))]
        ids: dict[str, str] = {}
        for key in keys:
            outcome = pauser.invoke_sync("mh.stream", {"key": key})
            assert outcome.status.value == "awaiting_approval"
            assert outcome.invocation_id is not None
            ids[key] = outcome.invocation_id
        assert list(ran.iterdir()) == []  # nothing runs before its approval

        # Host 0 takes the blocking call, and is killed mid-stream: a part is in the bucket.
        victim, alive = drivers[0], drivers[1:]
        start_blocking_call(victim, ids["block-0"], ran)
        assert len(open_uploads(s3_server, s3_bucket)) == 1
        kill_and_settle(victim, alive, shared["TOOLHOST_DATABASE_URL"], ids["block-0"])

        # The rest, approved on hosts picked at random; some by two hosts at once.
        rest = keys[1:]
        answers = approve_at_random(alive, {key: ids[key] for key in rest}, TWICE)

        acted = [a for a in answers if a["acted"]]
        assert sorted(a["id"] for a in acted) == sorted(ids[key] for key in rest)
        assert {a["status"] for a in acted} == {"succeeded"}
        for key in keys:  # at most once, everywhere: the killed call included
            assert (ran / key).read_text() == "ran\n", key

        rows = {r.id: r for r in pauser.pipeline.invocations.list()}
        assert rows[ids["block-0"]].state is InvocationState.FAILED
        assert rows[ids["block-0"]].reason_code == "tool.internal.interrupted"
        assert all(rows[ids[key]].state is InvocationState.SUCCEEDED for key in rest)

        # Every succeeded call's artifact, verified from every host (and one more store).
        artifact_of = {a["key"]: a["artifact"] for a in acted}
        verifier = open_pg_s3_artifact_store(
            shared["TOOLHOST_ARTIFACT_STORE"], shared["TOOLHOST_DATABASE_URL"], shared,
            FixedClock(DEFAULT_INSTANT))
        try:
            for key in rest:
                expected = hashlib.sha256(content_of(key)).hexdigest()
                for driver in alive:
                    assert driver.ask(f"read {artifact_of[key]}") == {"sha256": expected}, key
                assert verifier.read(artifact_of[key]) == content_of(key)
            records = verifier.list_artifacts(limit=1000)
            # One artifact per succeeded call; the killed stream published nothing.
            assert sorted(r.name for r in records) == sorted(f"{key}.bin" for key in rest)

            # The killed stream's upload is judged by its last part (D362), which the server
            # dates by its own clock: a purge at the hosts' LATER leaves it, and takes nothing
            # any record references.
            assert len(open_uploads(s3_server, s3_bucket)) == 1
            report = alive[1].ask(f"purge {LATER.isoformat()}")
            assert report == {"staged_uploads": 0, "content_files": 0}
            referenced = {f"{PREFIX}/sha256/{r.checksum.removeprefix('sha256:')}"
                          for r in records}
            assert bucket_keys(s3_server, s3_bucket) == referenced | {
                f"{PREFIX}/toolhost-store.json"}
            # An hour after its last part (by the server's clock), staging's sweep takes it.
            [killed] = s3_server.client().list_multipart_uploads(Bucket=s3_bucket)["Uploads"]
            parts = s3_server.client().list_parts(
                Bucket=s3_bucket, Key=killed["Key"], UploadId=killed["UploadId"]).get("Parts", [])
            last = max((p["LastModified"] for p in parts), default=killed["Initiated"])
            swept, _ = verifier.content.sweep_staging(
                last + STAGING_STALE_AFTER + dt.timedelta(minutes=1))
            assert swept == 1
            assert open_uploads(s3_server, s3_bucket) == []
        finally:
            verifier.close()
    finally:
        pauser.close()
