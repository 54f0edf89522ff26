"""The invocation store's lookups use an index that serves their WHERE and their ORDER BY:
SQLite's own query plan for the exact statements the store runs says ``SEARCH ... USING
INDEX``, never ``SCAN`` (every row read) nor ``USE TEMP B-TREE`` (every match sorted before the
first is returned). Those two made the approval lookup of a repeated MCP call grow with the
run, and ``pending`` with the table. Checked on an empty table, and on one SQLite has
``ANALYZE``d with thousands of rows in one run, where its statistics could tempt it elsewhere."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._adapters.sqlite_invocations import _OPEN, MIGRATIONS, SQLiteInvocationStore
from toolhost._model.invocations import InvocationState
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import InvocationStoreContract

AWAITING, RUNNING, APPROVED = (InvocationState.AWAITING_APPROVAL, InvocationState.RUNNING,
                               InvocationState.APPROVED)


@pytest.fixture(params=["empty", "analyzed"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteInvocationStore]:
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    if request.param == "analyzed":
        # One long run: 3,000 finished calls, each its own arguments, and 300 open rows.
        # (With statistics saying a state has a handful of rows, SQLite may rightly sort that
        # handful rather than read them in index order; it still reads only them.)
        for i in range(3300):
            state = InvocationState.SUCCEEDED if i < 3000 else (AWAITING, RUNNING, APPROVED)[i % 3]
            store.insert(InvocationStoreContract.record(
                id=f"row-{i:05}", state=state, argument_digest=f"sha256:{i:064x}",
                created_at=DEFAULT_INSTANT + dt.timedelta(milliseconds=i)))
        store._conn.execute("ANALYZE")
    yield store
    store.close()


def plans(store: SQLiteInvocationStore, action: Callable[[], object]) -> list[list[str]]:
    """The query plan of every statement ``action`` runs on the store's connection."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        action()
    finally:
        store._conn.set_trace_callback(None)
    assert statements, "the action ran no statement"
    return [[row[3] for row in store._conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            for sql in statements]


def assert_indexed(plan: list[str], index: str) -> None:
    assert any(step.startswith("SEARCH tool_invocations USING ") and f"INDEX {index} " in step
               for step in plan), plan
    assert not any(step.startswith("SCAN") or "TEMP B-TREE" in step for step in plan), plan


def test_a_repeated_calls_lookup_reads_only_its_digests_rows_in_order(
    store: SQLiteInvocationStore,
) -> None:
    # What Pipeline.rows_for asks for a repeated MCP call: the run's rows of this tool,
    # version and digest, oldest first; with and without a LIMIT.
    for limit in (None, 1):
        (plan,) = plans(store, lambda limit=limit: store.list(
            run_id="run-1", tool_name="fx.echo", tool_version="1.0.0",
            argument_digest="sha256:00", limit=limit))
        assert_indexed(plan, "tool_invocations_digest")
        assert "(run_id=? AND argument_digest=?)" in " ".join(plan)


@pytest.mark.parametrize("state", [AWAITING, RUNNING, APPROVED])
def test_the_open_rows_are_listed_from_their_index_a_page_at_a_time(
    store: SQLiteInvocationStore, state: InvocationState,
) -> None:
    (plan,) = plans(store, lambda: store.list(state=state, limit=51))
    assert_indexed(plan, "tool_invocations_open")
    (plan,) = plans(store, lambda: store.list(state=state))  # recovery reads them all
    assert_indexed(plan, "tool_invocations_open")


def test_the_next_page_starts_at_its_key_not_at_the_first_row(
    store: SQLiteInvocationStore,
) -> None:
    store.insert(InvocationStoreContract.record(id="anchor"))
    anchor, page = plans(store, lambda: store.list(state=AWAITING, limit=51, after="anchor"))
    assert_indexed(anchor, "sqlite_autoindex_tool_invocations_1")
    assert_indexed(page, "tool_invocations_open")
    assert "(created_at,id)>(?,?)" in " ".join(page)


def test_pendings_narrow_read_pages_from_the_open_index(store: SQLiteInvocationStore) -> None:
    (plan,) = plans(store, lambda: store.pending(limit=51))
    assert_indexed(plan, "tool_invocations_open")
    store.insert(InvocationStoreContract.record(id="anchor"))
    anchor, page = plans(store, lambda: store.pending(limit=51, after="anchor"))
    assert_indexed(anchor, "sqlite_autoindex_tool_invocations_1")
    assert_indexed(page, "tool_invocations_open")
    assert "(created_at,id)>(?,?)" in " ".join(page)


def test_the_inboxs_waiting_calls_page_from_the_open_index(
        store: SQLiteInvocationStore) -> None:
    # Regression: history() on an open state left out the partial index's condition, so the
    # inbox's waiting list (every 2 s per open tab) read and sorted the whole table.
    for whose in (None, "ada"):
        (plan,) = plans(store, lambda: store.history(limit=200, state=AWAITING,
                                                     principal_id=whose))  # noqa: B023
        assert_indexed(plan, "tool_invocations_open")


def test_a_row_is_read_and_changed_by_its_id(store: SQLiteInvocationStore) -> None:
    store.insert(InvocationStoreContract.record(id="row"))
    (plan,) = plans(store, lambda: store.get("row"))
    assert_indexed(plan, "sqlite_autoindex_tool_invocations_1")
    (plan,) = plans(store, lambda: store.transition(
        "row", expected={AWAITING}, to=InvocationState.APPROVED, approver="ops"))
    assert_indexed(plan, "sqlite_autoindex_tool_invocations_1")


def test_a_database_with_the_old_indexes_gets_the_new_ones_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, MIGRATIONS[:3])
    conn.execute(
        "INSERT INTO tool_invocations (id, run_id, principal_id, scopes, tool_name, "
        "tool_version, arguments, argument_digest, state, artifact_refs, created_at) VALUES "
        "('old', 'run-1', 'p', '[]', 'fx.echo', '1.0.0', '{}', 'sha256:00', "
        "'awaiting_approval', '[]', '2026-07-25T13:03:11.000000+00:00')")
    store = SQLiteInvocationStore(conn)
    indexes = {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_invocations'"
        " AND name NOT LIKE 'sqlite_%'")}
    assert indexes == {"tool_invocations_open", "tool_invocations_digest"}
    assert [r.id for r in store.list(state=AWAITING)] == ["old"]
    assert [r.id for r in store.list(run_id="run-1", argument_digest="sha256:00")] == ["old"]
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store.close()


def test_the_partial_index_covers_exactly_the_states_a_row_leaves_again() -> None:
    # A final row never needs the open index; every state a row can leave must be in it,
    # or pending and recovery would fall back to reading the whole table.
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn, MIGRATIONS)
    (sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'tool_invocations_open'").fetchone()
    left_out = {s for s in InvocationState if f"'{s.value}'" in sql}  # state NOT IN (...)
    assert "NOT IN" in sql and left_out == {s for s in InvocationState if s.final}
    assert sql.endswith(f"WHERE {_OPEN}")  # the text the store's queries repeat
    conn.close()
