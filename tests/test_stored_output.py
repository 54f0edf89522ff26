"""Each output stored once, a large one by reference (toolhost._adapters.stored_output).

- The layout alone: any structured result and text read back exactly (a property).
- On SQLite: a 1 MiB read, whose structured result holds the text again, grows the database
  by at most 1.1 MiB (it was 2.1); the same output read again grows it by almost nothing;
  a compare-and-set that loses, or a transaction rolled back, leaves no output behind; rows
  written before the layout are laid out by the migration and read back as they were; an
  output missing from ``tool_outputs`` is a clear error.
- On PostgreSQL: the same, row for row.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg_server import pg_database, pg_server

from toolhost._adapters.pg_invocations import PostgresInvocationStore
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._adapters.sqlite_invocations import MIGRATIONS, SQLiteInvocationStore
from toolhost._adapters.stored_output import (
    ELIDE_CHARS,
    INLINE_BYTES,
    OutputMissing,
    joined,
    laid_out,
    record_columns,
)
from toolhost._model.convert import to_row
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._testing.sqlite_size import used_bytes
from toolhost.testing import InvocationStoreContract

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

MIB = 1024 * 1024
SUCCEEDED, RUNNING = InvocationState.SUCCEEDED, InvocationState.RUNNING


def read_output(text: str) -> dict[str, Any]:
    """What workspace.read_text returns for a file holding ``text``."""
    data = text.encode()
    return dict(result_content=text, result_structured={
        "content": text, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})


def mib_of_text(seed: int) -> str:
    line = f"{seed:08d} The quick brown fox — naïve café, over the lazy dog.\n"
    return line * (MIB // len(line.encode()) + 1)  # just over 1 MiB of UTF-8, mixed


def record(invocation_id: str, **changes: Any) -> InvocationRecord:
    return InvocationStoreContract.record(**{"id": invocation_id, "state": SUCCEEDED,
                                             **changes})


# ---------------------------------------------------------------------------- the layout

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)


@settings(max_examples=200)
@given(content=st.one_of(st.none(), st.text(max_size=50),
                         st.text(min_size=ELIDE_CHARS, max_size=ELIDE_CHARS + 20),
                         st.text(min_size=INLINE_BYTES, max_size=INLINE_BYTES + 10)),
       structured=st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values,
                                                      max_size=5)),
       places=st.lists(st.lists(st.text(max_size=3), max_size=3), max_size=3))
def test_any_output_reads_back_exactly(content: str | None, structured: dict[str, Any] | None,
                                       places: list[list[str]]) -> None:
    if structured is not None and content is not None:
        # The text placed in the structured result, at the top and nested, perhaps twice.
        for place in places:
            target = structured
            for key in place:
                # A key already holding something else (None, "a." too) is passed by.
                while key in target and not isinstance(target[key], dict):
                    key += "."
                target = target.setdefault(key, {})
            target["text"] = [content]
    original = record("inv-1", result_structured=structured, result_content=content)
    columns, blobs = record_columns(original)
    bodies = dict(blobs)
    assert all(len(body) > INLINE_BYTES for body in bodies.values())
    refs = columns["output_refs"]
    if refs is None:  # stored as it comes
        assert columns == {**to_row(original), "output_refs": None}
        return
    read_structured = (None if columns["result_structured"] is None
                       else json.loads(columns["result_structured"]))
    assert joined(read_structured, columns["result_content"], refs, bodies.__getitem__) == (
        structured, content)


def test_a_short_text_is_left_in_place_and_a_long_one_once() -> None:
    short = {"result": "391"}
    columns: dict[str, Any] = {"result_structured": '{"result":"391"}', "result_content": "391"}
    assert laid_out(columns, None) == [] and columns["output_refs"] is None
    text = "x" * ELIDE_CHARS
    columns, blobs = record_columns(record("inv-1", result_structured={"a": [1, text], "b": text},
                                           result_content=text))
    assert blobs == []
    assert columns["result_structured"] == '{"a":[1,""],"b":"' + text + '"}'
    assert columns["output_refs"] == '{"content_at":["a",1]}'
    assert short == {"result": "391"}


# ---------------------------------------------------------------------------- SQLite


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteInvocationStore]:
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    yield store
    store.close()


def test_a_1_mib_read_grows_the_database_by_at_most_1_1_mib(
    sqlite_store: SQLiteInvocationStore, tmp_path: Path,
) -> None:
    # Before: the text in result_content and again, escaped, in result_structured: 2.1 MiB.
    path = tmp_path / DATABASE_NAME
    sqlite_store.insert(record("warm"))
    before = used_bytes(path)
    reads = 8
    for i in range(reads):
        text = mib_of_text(i)
        assert len(text.encode()) >= MIB - 100
        sqlite_store.insert(record(f"inv-{i}", **read_output(text)))
    grown = (used_bytes(path) - before) / reads
    assert grown <= 1.1 * MIB, grown
    assert sqlite_store.get("inv-3") == record("inv-3", **read_output(mib_of_text(3)))


def test_the_same_output_again_is_stored_once(sqlite_store: SQLiteInvocationStore,
                                              tmp_path: Path) -> None:
    path = tmp_path / DATABASE_NAME
    output = read_output(mib_of_text(0))
    sqlite_store.insert(record("inv-0", **output))
    before = used_bytes(path)
    for i in range(1, 21):
        sqlite_store.insert(record(f"inv-{i}", **output))
    # Twenty more rows of a 1 MiB read: their rows only (a few hundred bytes each).
    assert used_bytes(path) - before <= 64 * 1024
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM tool_outputs").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM tool_invocations WHERE result_content IS NULL "
                            "AND length(result_structured) < 200").fetchone() == (21,)
    finally:
        conn.close()
    assert sqlite_store.get("inv-20") == record("inv-20", **output)


def outputs_in(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM tool_outputs").fetchone()[0])
    finally:
        conn.close()


def test_a_write_that_changes_no_row_leaves_no_output(sqlite_store: SQLiteInvocationStore,
                                                      tmp_path: Path) -> None:
    output = read_output(mib_of_text(1))
    sqlite_store.insert(record("inv-1", state=InvocationState.AWAITING_APPROVAL))
    mine = sqlite_store.owner()
    assert not sqlite_store.settle("inv-1", from_owner=mine, to=SUCCEEDED, **output)
    assert not sqlite_store.transition("inv-1", expected={RUNNING}, to=SUCCEEDED, **output)
    with pytest.raises(ValueError, match="already recorded"):
        sqlite_store.insert(record("inv-1", **output))
    with pytest.raises(RuntimeError), sqlite_store.transaction():
        sqlite_store.insert(record("inv-2", **output))
        raise RuntimeError("the batch fails")
    assert outputs_in(tmp_path / DATABASE_NAME) == 0
    assert [r.id for r in sqlite_store.list()] == ["inv-1"]


def test_rows_written_before_the_layout_are_laid_out_and_read_as_they_were(
    tmp_path: Path,
) -> None:
    path = tmp_path / DATABASE_NAME
    conn = connect(path)
    migrate(conn, MIGRATIONS[:5])
    old = [record("big", **read_output(mib_of_text(0))),
           record("again", **read_output(mib_of_text(0))),
           record("small", result_structured={"v": 1}, result_content="391")]
    for written in old:
        row = to_row(written)
        for newer in ("operator_directory", "user_turn"):  # columns newer than these rows
            row.pop(newer)
        conn.execute(f"INSERT INTO tool_invocations ({', '.join(row)}) "
                     f"VALUES ({', '.join('?' * len(row))})", list(row.values()))
    conn.close()
    before = used_bytes(path)
    store = SQLiteInvocationStore(connect(path))
    try:
        assert [store.get(r.id) for r in old] == old
        conn = sqlite3.connect(path)
        laid = dict(conn.execute("SELECT id, output_refs FROM tool_invocations").fetchall())
        assert conn.execute("SELECT count(*) FROM tool_outputs").fetchone() == (1,)
        conn.close()
        assert laid["small"] is None and laid["big"] == laid["again"] is not None
        assert used_bytes(path) < before / 3  # 4 MiB of two reads: 1 MiB once
    finally:
        store.close()


def test_an_output_missing_from_its_table_is_a_clear_error(
    sqlite_store: SQLiteInvocationStore, tmp_path: Path,
) -> None:
    sqlite_store.insert(record("inv-1", **read_output(mib_of_text(0))))
    conn = sqlite3.connect(tmp_path / DATABASE_NAME)
    conn.execute("DELETE FROM tool_outputs")
    conn.commit()
    conn.close()
    with pytest.raises(OutputMissing, match=r"the recorded output sha256:[0-9a-f]{64} is "
                       "missing from the database .*toolhost.sqlite3: it was altered outside "
                       "toolhost; restore it from a backup"):
        sqlite_store.get("inv-1")


def test_show_of_a_row_whose_output_is_missing_stops_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    invocation_id = "0192a0f0-0000-7000-8000-000000000001"
    store.insert(record(invocation_id, **read_output("x" * 10_000)))
    store.close()
    conn = sqlite3.connect(tmp_path / DATABASE_NAME)
    conn.execute("DELETE FROM tool_outputs")
    conn.commit()
    conn.close()
    shown = subprocess.run(
        [sys.executable, "-m", "toolhost._cli.main", "show", invocation_id],
        capture_output=True, text=True, env={"TOOLHOST_DATA_DIR": str(tmp_path),
                                             "TOOLHOST_PLUGINS": "", "PATH": "/usr/bin:/bin"})
    assert shown.returncode == 1, shown.stderr
    assert shown.stdout == ""
    (line,) = shown.stderr.splitlines()
    assert line.startswith("toolhost: the recorded output sha256:")
    assert line.endswith(": it was altered outside toolhost; restore it from a backup")


# ---------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[PostgresInvocationStore]:
    store = PostgresInvocationStore(pg_database)
    yield store
    store.close()


def pg_count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_postgresql_stores_an_output_once_and_only_with_its_row(
    pg_store: PostgresInvocationStore, pg_database: str,
) -> None:
    output = read_output(mib_of_text(2))
    for i in range(5):
        pg_store.insert(record(f"inv-{i}", **output))
    mine = pg_store.owner()
    pg_store.insert(record("run", state=RUNNING, owner=mine))
    assert pg_store.settle("run", from_owner=mine, to=SUCCEEDED, **output)
    other = read_output(mib_of_text(3))
    assert not pg_store.settle("run", from_owner=mine, to=SUCCEEDED, **other)
    with pytest.raises(ValueError, match="already recorded"):
        pg_store.insert(record("inv-0", **other))
    with pytest.raises(RuntimeError), pg_store.transaction():
        pg_store.insert(record("lost", **other))
        raise RuntimeError("the batch fails")
    assert pg_count(pg_database, "SELECT count(*) FROM tool_outputs") == 1
    assert pg_count(pg_database, "SELECT max(octet_length(result_structured)) "
                                 "FROM tool_invocations") < 200
    assert pg_store.get("inv-4") == record("inv-4", **output)
    assert [r.result_content for r in pg_store.list()] == [output["result_content"]] * 6


def test_postgresql_lays_out_rows_written_before(pg_database: str) -> None:
    from toolhost._adapters import pg_invocations

    pg_invocations._migrate(pg_database, 5, "(test)", pg_invocations.MIGRATIONS[:2])
    old = [record("big", **read_output(mib_of_text(0))),
           record("small", result_structured={"v": 1}, result_content="391")]
    with psycopg.connect(pg_database) as conn:
        for written in old:
            row = pg_invocations._stored(to_row(written))
            for newer in ("operator_directory", "user_turn"):  # columns newer than these rows
                row.pop(newer)
            conn.execute(f"INSERT INTO tool_invocations ({', '.join(row)}) "
                         f"VALUES ({', '.join(['%s'] * len(row))})", list(row.values()))
    store = PostgresInvocationStore(pg_database)
    try:
        assert [store.get(r.id) for r in old] == old
        assert pg_count(pg_database, "SELECT count(*) FROM tool_outputs") == 1
        assert pg_count(pg_database, "SELECT count(*) FROM tool_invocations "
                                     "WHERE output_refs IS NOT NULL") == 1
    finally:
        store.close()
