"""The record's files deleted or replaced while a process has them open (an operator's ``rm``,
a restore over the running record): SQLite keeps writing to the unlinked files, so every call
would be answered as recorded into nothing, and another process would meet a database without
this one's WAL. The store refuses each write then, and ``list`` (what ``/readyz`` asks), with
D213's line; the -wal and -shm are checked as the database is (where processes meet).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, meta, run
from test_commit_faults import committed_ids, failing
from test_group_commit import open_store, record

from toolhost._adapters.sqlite_artifacts import SQLiteArtifactMetadata
from toolhost._adapters.sqlite_db import CHECK_EVERY_S, DATABASE_NAME, connect
from toolhost._model import host_reasons
from toolhost._model.settings import StoreUnavailable


def _remove(*suffixes: str) -> Callable[[Path], None]:
    def remove(database: Path) -> None:
        for suffix in suffixes:
            os.remove(f"{database}{suffix}")
    return remove


def _replace(database: Path) -> None:
    # A restore: another file renamed onto the name (the open one is unlinked).
    shutil.copyfile(database, database.with_suffix(".copy"))
    os.replace(database.with_suffix(".copy"), database)


def _gone(database: Path) -> str:
    return (f"the database {database} was moved or deleted while toolhost ran: put it back, "
            "or restart toolhost to start a new one")


def _wal_gone(database: Path) -> str:
    return (f"the database's file {database}-wal was moved or deleted while toolhost ran: "
            f"restart toolhost, and any other toolhost using {database}")


MISHAPS: dict[str, tuple[Callable[[Path], None], Callable[[Path], str]]] = {
    "the record deleted": (_remove("", "-wal", "-shm"), _gone),
    "the record replaced": (_replace, _gone),
    "its -wal and -shm deleted": (_remove("-wal", "-shm"), _wal_gone),
    "its -shm deleted": (_remove("-shm"), lambda database: _wal_gone(database).replace(
        "-wal", "-shm", 1)),
}


@pytest.mark.parametrize("mishap", list(MISHAPS))
def test_a_write_and_the_readiness_read_are_refused_once_a_file_is_gone(
        tmp_path: Path, mishap: str) -> None:
    make, line = MISHAPS[mishap]
    database = tmp_path / DATABASE_NAME
    store = open_store(tmp_path)
    artifacts = SQLiteArtifactMetadata(connect(database), owns_connection=True)
    try:
        store.insert(record(id="before"))
        make(database)
        time.sleep(CHECK_EVERY_S)  # a check that passed stands for the writes after it
        for refused in (lambda: store.insert(record(id="after")),
                        lambda: store.list(limit=1),
                        lambda: artifacts.delete_expired(dt.datetime.now(dt.UTC))):
            with pytest.raises(StoreUnavailable) as caught:
                refused()
            assert str(caught.value) == line(database)
    finally:
        artifacts.close()
        store.close()


def test_a_database_replaced_since_a_failed_rollback_is_not_opened(tmp_path: Path) -> None:
    # D213 reopens the file by its name: another file there is not this record.
    store = open_store(tmp_path)
    failing(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    database = tmp_path / DATABASE_NAME
    _replace(database)
    with pytest.raises(StoreUnavailable) as caught:
        store.insert(record(id="next"))
    assert str(caught.value) == _gone(database)
    store.close()
    assert committed_ids(tmp_path) == []


def test_readyz_says_not_ready_once_the_record_is_deleted(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-math")

    async def journey() -> None:
        async with deployment.http_server() as mcp_url, httpx.AsyncClient(timeout=30) as client:
            readyz = mcp_url.removesuffix("/mcp") + "/readyz"
            assert (await client.get(readyz)).status_code == 200
            _remove("", "-wal", "-shm")(deployment.database())
            # An answer stands for a second (D328): asked again until it is renewed.
            until, status = time.monotonic() + 10, 200
            while status == 200 and time.monotonic() < until:
                status = (await client.get(readyz)).status_code
            assert status == 503

    run(journey)


def test_a_call_after_the_wal_is_deleted_is_not_answered_as_recorded(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-math")

    async def journey() -> None:
        async with deployment.session("stdio") as client:
            before = await client.call_tool("math.calculate", {"expression": "1+1"})
            assert not before.is_error
            _remove("-wal", "-shm")(deployment.database())
            await asyncio.sleep(CHECK_EVERY_S)  # the last passed check stands until then
            after = await client.call_tool("math.calculate", {"expression": "2+2"})
            assert after.is_error
            assert meta(after, "reasonCode") == host_reasons.RECORD_UNUSABLE

    run(journey)
    assert _wal_gone(deployment.database()) in deployment.stderr()
