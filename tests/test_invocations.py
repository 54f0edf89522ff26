"""The SQLite InvocationStore runs the port's contract suite, plus migration behaviour."""

from __future__ import annotations

from pathlib import Path

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate, table_names
from toolhost._adapters.sqlite_invocations import MIGRATIONS, SQLiteInvocationStore
from toolhost._model.invocations import InvocationState
from toolhost.testing import InvocationStoreContract


class TestSQLiteInvocationStore(InvocationStoreContract):
    def make_store(self, tmp_path: Path) -> SQLiteInvocationStore:
        return SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))


def test_wal_mode_and_versioned_migrations(tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    SQLiteInvocationStore(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT component, version FROM schema_migrations").fetchall() == [
        ("invocations", 1), ("invocations", 2)
    ]
    migrate(conn, MIGRATIONS)  # idempotent
    assert "tool_invocations" in table_names(conn)


def test_rows_survive_a_new_connection(tmp_path: Path) -> None:
    first = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    first.insert(InvocationStoreContract.record())
    second = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    assert second.get("inv-1").state is InvocationState.AWAITING_APPROVAL


def test_two_connections_race_and_exactly_one_wins(tmp_path: Path) -> None:
    a = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    b = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    a.insert(InvocationStoreContract.record())
    expected = {InvocationState.AWAITING_APPROVAL}
    wins = [s.transition("inv-1", expected=expected, to=InvocationState.APPROVED, approver=n)
            for s, n in ((a, "a"), (b, "b"))]
    assert wins == [True, False]
