"""One damaged artifact row (edited behind the store's back: a checksum that is not
``sha256:`` + 64 hex digits, an unknown origin, a date that is not one) is reported as damaged
and skipped; every other row still lists and gets (issue #26, item 4).

The store's listing on SQLite and on PostgreSQL (with S3, as the host pairs them), then the
operator's `toolhost artifacts list|get` as a real process over a real data directory."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)
from test_cli_artifacts import toolhost

from toolhost._adapters.pg_artifacts import open_pg_s3_artifact_store
from toolhost._adapters.sqlite_artifacts import open_artifact_store
from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._model.artifacts import ArtifactCorrupted, ArtifactOrigin, ArtifactRecord, NewArtifact
from toolhost._model.spec import Trust
from toolhost._ports import artifacts as port
from toolhost._ports.artifacts import ArtifactStore
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

#: A row edited behind the store's back: (column, the value written given the record, the
#: field reported). Each keeps the row in its place in the listing's order.
DAMAGES: list[tuple[str, Callable[[ArtifactRecord], Any], str]] = [
    ("checksum", lambda _: "md5:abc", "checksum"),
    ("origin", lambda _: "STOLEN", "origin"),
    # The same instant without its offset: naive, which a record refuses.
    ("created_at", lambda r: r.created_at.replace(tzinfo=None).isoformat(
        timespec="microseconds"), "created_at"),
    ("media_type", lambda _: "", "media_type"),
    ("trust", lambda _: "TOTAL", "trust"),
]

Damage = Callable[[str, str, Any], None]


def _three(store: ArtifactStore) -> list[ArtifactRecord]:
    """Three artifacts of one run, created a second apart in order a, b, c."""
    return [store.put_or_reuse(NewArtifact(
            run_id="run-1", conversation_id="conv-1", origin=ArtifactOrigin.EXPORT,
            name=f"{name}.txt", media_type="text/plain", trust=Trust.INTERNAL_TOOL),
        name.encode() * 3, now=T0 + i * dt.timedelta(seconds=1))
            for i, name in enumerate("abc")]


@pytest.fixture(params=["sqlite", "pg"])
def backend(request: pytest.FixtureRequest, tmp_path: Path
            ) -> Iterator[tuple[ArtifactStore, Damage]]:
    """A store and a way to write a column of a row directly in its database."""
    if request.param == "sqlite":
        store: Any = open_artifact_store(tmp_path / "data", FixedClock(T0))

        def damage(artifact_id: str, column: str, value: Any) -> None:
            with closing(sqlite3.connect(tmp_path / "data" / DATABASE_NAME)) as conn, conn:
                conn.execute(f"UPDATE artifacts SET {column} = ? WHERE id = ?",
                             (value, artifact_id))
    else:
        s3: S3Server = request.getfixturevalue("s3_server")
        bucket: str = request.getfixturevalue("s3_bucket")
        database: str = request.getfixturevalue("pg_database")
        store = open_pg_s3_artifact_store(f"s3://{bucket}/artifacts", database, {},
                                          FixedClock(T0), client=s3.store_client())

        def damage(artifact_id: str, column: str, value: Any) -> None:
            with psycopg.connect(database) as conn:
                conn.execute(f"UPDATE artifacts SET {column} = %s WHERE id = %s",
                             (value, artifact_id))
    try:
        yield store, damage
    finally:
        store.close()


@pytest.mark.parametrize(("column", "value", "field"), DAMAGES, ids=[d[0] for d in DAMAGES])
def test_a_damaged_row_is_skipped_and_reported_the_others_list_and_get(
    backend: tuple[ArtifactStore, Damage], column: str,
    value: Callable[[ArtifactRecord], Any], field: str,
) -> None:
    store, damage = backend
    a, b, c = _three(store)
    damage(b.id, column, value(b))

    # The records: the damaged row skipped, the others as they were stored.
    assert store.list_artifacts() == [a, c]
    assert store.list_artifacts(conversation_id="conv-1") == [a, c]
    assert store.list_run("run-1") == [a, c]  # what MCP resources/list and attachments read
    # The operator's page: every row in its place, the damaged one as what it is.
    rows = store.list_rows()
    assert [row.id for row in rows] == [a.id, b.id, c.id]
    assert rows[0] == a and rows[2] == c
    assert isinstance(rows[1], port.DamagedArtifact) and not isinstance(rows[1], ArtifactRecord)
    assert (rows[1].id, rows[1].field) == (b.id, field)
    # Paging goes on past a damaged row (it is a cursor like any row).
    assert store.list_artifacts(limit=1, after=a.id) == []
    assert store.list_rows(limit=1, after=b.id) == [c]
    assert store.list_artifacts(after=b.id) == [c]

    # The good ones get and read; the damaged one is one refusal, naming the field.
    assert store.get(a.id) == a and store.read(c.id) == b"ccc"
    with pytest.raises(ArtifactCorrupted) as refused:
        store.get(b.id)
    assert isinstance(refused.value, port.DamagedArtifact)
    assert (refused.value.id, refused.value.artifact_id, refused.value.field) == (b.id, b.id, field)
    assert str(refused.value) == f"artifact {b.id!r} is corrupted: its record is damaged ({field})"
    with pytest.raises(ArtifactCorrupted):
        store.read(b.id)


def test_a_damaged_size_is_reported_as_the_size(tmp_path: Path) -> None:
    # SQLite keeps whatever a column is given: text in the INTEGER size column passes its CHECK.
    store = open_artifact_store(tmp_path / "data", FixedClock(T0))
    try:
        a, b, c = _three(store)
        with closing(sqlite3.connect(tmp_path / "data" / DATABASE_NAME)) as conn, conn:
            conn.execute("UPDATE artifacts SET size = 'big' WHERE id = ?", (b.id,))
        assert store.list_artifacts() == [a, c]
        damaged = store.list_rows()[1]
        assert isinstance(damaged, port.DamagedArtifact) and damaged.field == "size"
    finally:
        store.close()


def test_a_name_that_is_not_utf8_is_reported_on_postgresql(
    s3_server: S3Server, s3_bucket: str, pg_database: str,
) -> None:
    # PostgreSQL keeps free text as bytes (it may hold U+0000): bytes that decode to nothing.
    store = open_pg_s3_artifact_store(f"s3://{s3_bucket}/artifacts", pg_database, {},
                                      FixedClock(T0), client=s3_server.store_client())
    try:
        a, b, c = _three(store)
        with psycopg.connect(pg_database) as conn:
            conn.execute("UPDATE artifacts SET name = %s WHERE id = %s", (b"\xff\xfe", b.id))
        assert store.list_artifacts() == [a, c]
        damaged = store.list_rows()[1]
        assert isinstance(damaged, port.DamagedArtifact) and damaged.field == "name"
        with pytest.raises(ArtifactCorrupted):
            store.get(b.id)
    finally:
        store.close()


# --------------------------------------------------------------------------------------------
# `toolhost artifacts list|get`, a real process
# --------------------------------------------------------------------------------------------


@pytest.fixture
def damaged_store(tmp_path: Path) -> tuple[Path, list[ArtifactRecord]]:
    """A data directory with three artifacts, the second one's checksum overwritten."""
    data = tmp_path / "data"
    store = open_artifact_store(data, FixedClock(T0))
    try:
        made = _three(store)
    finally:
        store.close()
    with closing(sqlite3.connect(data / DATABASE_NAME)) as conn, conn:
        conn.execute("UPDATE artifacts SET checksum = 'md5:abc' WHERE id = ?", (made[1].id,))
    return data, made


def _line(record: ArtifactRecord) -> str:
    return (f"{record.id}  {record.created_at.isoformat(timespec='microseconds')}  EXPORT  "
            f'{record.size}  text/plain  "{record.name}"\n')


def test_list_prints_the_good_rows_and_one_line_for_the_damaged_one(
    damaged_store: tuple[Path, list[ArtifactRecord]],
) -> None:
    data, (a, b, c) = damaged_store
    skipped = f"toolhost: artifact {b.id} is damaged (checksum): skipped\n"
    result = toolhost(data, "list")
    assert (result.returncode, result.stdout, result.stderr) == (
        0, _line(a) + _line(c), skipped)
    as_json = toolhost(data, "list", "--json")
    assert (as_json.returncode, as_json.stderr) == (0, skipped)
    assert "Traceback" not in as_json.stderr
    assert [r["id"] for r in json.loads(as_json.stdout)] == [a.id, c.id]


def test_list_pages_past_a_damaged_row(
    damaged_store: tuple[Path, list[ArtifactRecord]],
) -> None:
    data, (a, b, c) = damaged_store
    first = toolhost(data, "list", "--limit", "2")
    assert (first.returncode, first.stdout) == (0, _line(a))
    assert first.stderr == (
        f"toolhost: artifact {b.id} is damaged (checksum): skipped\n"
        f"toolhost: the first 2 are listed; more follow (toolhost artifacts list --limit 2 "
        f"--after {b.id})\n")
    rest = toolhost(data, "list", "--limit", "2", "--after", b.id)
    assert (rest.returncode, rest.stdout, rest.stderr) == (0, _line(c), "")


def test_get_of_a_good_id_writes_its_bytes(
    damaged_store: tuple[Path, list[ArtifactRecord]], tmp_path: Path,
) -> None:
    data, (a, _, c) = damaged_store
    for record, content in ((a, b"aaa"), (c, b"ccc")):
        out = tmp_path / f"{record.name}.out"
        result = toolhost(data, "get", record.id, "-o", str(out))
        assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
        assert out.read_bytes() == content
        to_stdout = toolhost(data, "get", record.id, "-o", "-")
        assert (to_stdout.returncode, to_stdout.stdout, to_stdout.stderr) == (
            0, content.decode(), "")


def test_get_of_the_damaged_id_is_one_line_and_writes_nothing(
    damaged_store: tuple[Path, list[ArtifactRecord]], tmp_path: Path,
) -> None:
    data, (_, b, _) = damaged_store
    line = (f"toolhost: artifact {b.id!r} was not written: its record is damaged "
            "(checksum)\n")
    out = tmp_path / "b.out"
    for target in (str(out), "-"):
        result = toolhost(data, "get", b.id, "-o", target)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", line)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["data"]


@contextmanager
def served_with_a_damaged_row(tmp_path: Path, count: int) -> Iterator[tuple[Any, Any, list[str]]]:
    """A host, a run and ``count`` artifacts it exported, the second one's checksum
    overwritten: what the MCP resources of that run's session see."""
    pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")
    from conftest import make_plugin, make_tool

    from toolhost.testing import host_for

    with host_for({"fx-dist": make_plugin(tools=[make_tool()])},
                  data_dir=tmp_path / "data") as host:
        run = host.start_run()
        context = host.pipeline.context_for(run, deadline=host.deadline_in(10),
                                            cancellation=run.cancellation)
        made = [context.artifacts.write(origin=ArtifactOrigin.EXPORT, name=f"f{n}.bin",
                                        media_type="application/octet-stream",
                                        content=bytes([n]), trust=Trust.INTERNAL_TOOL).id
                for n in range(count)]
        with closing(sqlite3.connect(tmp_path / "data" / DATABASE_NAME)) as conn, conn:
            conn.execute("UPDATE artifacts SET checksum = 'md5:abc' WHERE id = ?", (made[1],))
        yield host, run, made


def test_mcp_resources_list_skips_a_damaged_row(tmp_path: Path) -> None:
    with served_with_a_damaged_row(tmp_path, 3) as (host, run, made):
        from toolhost._mcp.resources import RunResources

        listed = asyncio.run(RunResources(host).list(run))
        assert [str(r.uri) for r in listed.resources] == [
            f"toolhost://artifacts/{made[0]}", f"toolhost://artifacts/{made[2]}"]


def test_mcp_resources_read_of_a_damaged_row_is_not_available(tmp_path: Path) -> None:
    # Its record cannot say whose it is, so it is answered as any file not the session's:
    # -32002 "not available" (it said the file store could not be reached, -32603).
    with served_with_a_damaged_row(tmp_path, 2) as (host, run, made):
        from mcp.shared.exceptions import MCPError

        from toolhost._mcp.resources import NOT_AVAILABLE, RESOURCE_NOT_FOUND, RunResources

        resources = RunResources(host)
        with pytest.raises(MCPError) as refused:
            asyncio.run(resources.read(run, f"toolhost://artifacts/{made[1]}"))
        assert (refused.value.error.code, refused.value.error.message) == (
            RESOURCE_NOT_FOUND, NOT_AVAILABLE)
        good = asyncio.run(resources.read(run, f"toolhost://artifacts/{made[0]}"))
        assert good.contents[0].blob == "AA=="  # base64 of b"\x00"
