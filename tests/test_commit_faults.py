"""A ROLLBACK that fails on the SQLite record store (``SQLiteInvocationStore.transaction``).

A failed COMMIT (or a write that raised) is rolled back; if that ROLLBACK fails too, the one
connection every thread writes through would stay inside a transaction that is never
committed, and every later write would join it: answered as written, and lost. The store
closes such a connection and opens a new one on the same file at its next use, and the
exception that ended the transaction is the one raised. The failure is injected at the
boundary the store owns, its connection: ``FailingConnection`` refuses the statements it is
told to, without running them, as an I/O error would, and passes everything else through.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_group_commit import in_one_pass, open_store, record

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._model.invocations import InvocationState
from toolhost._pipeline.group_commit import GroupCommit

RUNNING, SUCCEEDED = InvocationState.RUNNING, InvocationState.SUCCEEDED


class FailingConnection:
    """A store's connection whose ROLLBACK fails without running (the real connection stays
    inside its transaction), and whose next COMMIT fails too when ``fail_commit`` is set."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.fail_commit = False
        self.rollbacks = 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "ROLLBACK":
            self.rollbacks += 1
            raise sqlite3.OperationalError("disk I/O error")
        if sql == "COMMIT" and self.fail_commit:
            self.fail_commit = False
            raise sqlite3.OperationalError("disk I/O error")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def failing(store: SQLiteInvocationStore) -> FailingConnection:
    wrapper = FailingConnection(store._conn)
    store._conn = wrapper  # type: ignore[assignment]
    return wrapper


def committed_ids(tmp_path: Path) -> list[str]:
    """The ids committed to the database file, read on a connection of its own."""
    other = connect(tmp_path / DATABASE_NAME)
    try:
        return sorted(r[0] for r in other.execute("SELECT id FROM tool_invocations"))
    finally:
        other.close()


def test_after_a_failed_rollback_the_next_write_is_committed(tmp_path: Path) -> None:
    """A transaction ended by a write's error, whose ROLLBACK fails: that error propagates
    (with a note on the ROLLBACK), nothing of the transaction is committed, and the next
    write is committed, seen from another connection and from a new store on the file."""
    store = open_store(tmp_path)
    wrapper = failing(store)
    with pytest.raises(RuntimeError, match="a write failed") as raised, store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    assert wrapper.rollbacks == 1
    store.insert(record(id="next"))
    assert store.get("next").id == "next"
    assert committed_ids(tmp_path) == ["next"]
    assert any("ROLLBACK failed" in note for note in raised.value.__notes__)
    store.close()
    again = open_store(tmp_path)
    try:
        assert [r.id for r in again.list()] == ["next"]
    finally:
        again.close()


def test_a_batch_whose_commit_and_rollback_fail_is_replayed_durably(tmp_path: Path) -> None:
    """A group commit whose COMMIT fails and whose ROLLBACK fails: the batch's writes are
    made again alone, each caller answered as its row is, and every row is committed once
    (another connection sees it, and a new store on the file), none left running."""
    store = open_store(tmp_path)
    wrapper = failing(store)
    wrapper.fail_commit = True
    mine = store.owner()
    results = asyncio.run(in_one_pass(
        GroupCommit(lambda: store),
        lambda: store.insert(record(id="a", state=RUNNING, owner=mine)),
        lambda: store.insert(record(id="b", state=RUNNING, owner=mine)),
        lambda: store.settle("a", from_owner=mine, to=SUCCEEDED, result_structured=None, result_content="ok"),
    ))
    assert results == [None, None, True]
    assert wrapper.rollbacks == 1
    assert committed_ids(tmp_path) == ["a", "b"]
    store.close()
    again = open_store(tmp_path)
    try:
        assert [(r.id, r.state) for r in again.list()] == [("a", SUCCEEDED), ("b", RUNNING)]
    finally:
        again.close()


def test_the_next_transaction_after_a_failed_rollback_commits(tmp_path: Path) -> None:
    """The transaction after the failed one opens on the new connection and commits."""
    store = open_store(tmp_path)
    failing(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    with store.transaction():
        store.insert(record(id="c"))
        store.insert(record(id="d"))
    assert committed_ids(tmp_path) == ["c", "d"]
    store.close()


def test_an_in_memory_store_fails_loudly_after_a_failed_rollback() -> None:
    """An in-memory database goes with its connection: a new one would be empty, so every
    later use raises, saying why, rather than write into a transaction never committed."""
    store = SQLiteInvocationStore(connect(":memory:"))
    failing(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    with pytest.raises(sqlite3.OperationalError, match="in-memory database was closed"):
        store.insert(record(id="next"))
    store.close()
