"""A record toolhost-core 0.5.0 (the last release) made is migrated by this toolhost and its rows
read: on SQLite and on PostgreSQL, through the store and through the ``toolhost`` command.

The old databases are built from 0.5.0's own migration texts, kept word for word in
``tests/data/migrations_0_5_0.json``. Before: a later commit had added ``user_turn`` to the
shipped migrations (SQLite's 5, PostgreSQL's 2) in place, so a 0.5.0 SQLite record was refused
("does not have toolhost's schema ... move it aside") and a 0.5.0 PostgreSQL record was
migrated to the latest version without the column, every command then ending in a traceback.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import pg_database, pg_server
from test_cli import assert_no_traceback

from toolhost._adapters import pg_invocations
from toolhost._adapters.pg_invocations import PostgresInvocationStore, shown_conninfo
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._adapters.sqlite_invocations import MIGRATIONS, SQLiteInvocationStore
from toolhost._model.convert import to_row
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.settings import StoreUnavailable
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import InvocationStoreContract, run_toolhost

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

RELEASED = json.loads((Path(__file__).parent / "data" / "migrations_0_5_0.json").read_text())
#: The components of the record's database file, as 0.5.0 migrated them (in this order).
SQLITE_COMPONENTS = ("artifacts", "invocations")

#: Rows as 0.5.0 wrote them: a paused call with its run's deadline and an attachment, a
#: succeeded one with its output, a denied one.
OLD_ROWS = (
    InvocationStoreContract.record(
        id="inv-paused", run_deadline=DEFAULT_INSTANT,
        attachments=({"id": "a2", "name": "r.csv", "media_type": "text/csv", "byte_count": 3,
                      "checksum": "sha256:ee"},)),
    InvocationStoreContract.record(
        id="inv-done", state=InvocationState.SUCCEEDED, result_structured={"value": 391},
        result_content="391", output_trust="INTERNAL_TOOL", started_at=DEFAULT_INSTANT,
        finished_at=DEFAULT_INSTANT),
    InvocationStoreContract.record(
        id="inv-denied", state=InvocationState.DENIED, approver="ops", denial_reason="no",
        decided_at=DEFAULT_INSTANT),
)


def _old_columns(row: dict[str, Any], present: Iterable[str]) -> dict[str, Any]:
    """``row`` as a release whose table has only the columns ``present`` wrote it."""
    kept = set(present)
    return {name: value for name, value in row.items() if name in kept}


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]


# ---------------------------------------------------------------------- SQLite


def sqlite_0_5_0(database: Path, rows: Sequence[InvocationRecord] = OLD_ROWS) -> None:
    """A database file as toolhost-core 0.5.0 left it: its migrations, then ``rows``."""
    database.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(database)) as conn, conn:
        conn.execute(RELEASED["sqlite"]["bootstrap"])
        for component in SQLITE_COMPONENTS:
            for name, version, sql in RELEASED["sqlite"][component]:
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, version))
        present = [r[1] for r in conn.execute("PRAGMA table_info(tool_invocations)")]
        for record in rows:
            row = _old_columns(to_row(record), present)
            conn.execute(f"INSERT INTO tool_invocations ({', '.join(row)}) "
                         f"VALUES ({', '.join('?' * len(row))})", list(row.values()))


def test_a_0_5_0_sqlite_record_is_migrated_and_its_rows_read(tmp_path: Path) -> None:
    database = tmp_path / DATABASE_NAME
    sqlite_0_5_0(database)
    store = SQLiteInvocationStore(connect(database))
    try:
        assert [store.get(r.id) for r in OLD_ROWS] == list(OLD_ROWS)
        # The column the release lacked now keeps the user's words.
        words = InvocationStoreContract.record(id="inv-new", user_turn="keep it short")
        store.insert(words)
        assert store.get("inv-new") == words
    finally:
        store.close()


def test_a_record_made_with_the_edited_migration_5_keeps_its_user_turn(tmp_path: Path) -> None:
    # Databases made after 0.5.0 and before migration 10 got user_turn from migration 5.
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, [m for m in MIGRATIONS if m.version <= 9])
    conn.execute("ALTER TABLE tool_invocations ADD COLUMN user_turn TEXT")
    conn.close()
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    try:
        words = InvocationStoreContract.record(user_turn="keep it short")
        store.insert(words)
        assert store.get(words.id) == words
    finally:
        store.close()
    with closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as conn:
        assert conn.execute("SELECT max(version) FROM schema_migrations "
                            "WHERE component = 'invocations'").fetchone() == (len(MIGRATIONS),)


def test_the_commands_list_a_0_5_0_sqlite_records_paused_call(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sqlite_0_5_0(data / DATABASE_NAME)
    result = run_toolhost("pending", "--json", data_dir=data, plugins="")
    assert_no_traceback(result)
    assert (result.returncode, result.stderr) == (0, "")
    assert [call["id"] for call in json.loads(result.stdout)] == ["inv-paused"]


# ---------------------------------------------------------------------- PostgreSQL


def postgresql_0_5_0(url: str, rows: Sequence[InvocationRecord] = OLD_ROWS) -> None:
    """A database as toolhost-core 0.5.0 left it: its migrations, then ``rows``."""
    with psycopg.connect(url) as conn:
        conn.execute(RELEASED["postgresql"]["bootstrap"])
        for component in ("artifacts", "invocations"):
            for name, version, sql in RELEASED["postgresql"][component]:
                conn.execute(sql)
                conn.execute("INSERT INTO toolhost_schema_migrations VALUES (%s, %s)",
                             (name, version))
        present = [name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'tool_invocations'").fetchall()]
        for record in rows:
            row = _old_columns(pg_invocations._stored(to_row(record)), present)
            conn.execute(f"INSERT INTO tool_invocations ({', '.join(row)}) "
                         f"VALUES ({', '.join(['%s'] * len(row))})", list(row.values()))


def test_a_0_5_0_postgresql_record_is_migrated_and_its_rows_read(pg_database: str) -> None:
    postgresql_0_5_0(pg_database)
    store = PostgresInvocationStore(pg_database)
    try:
        assert [store.get(r.id) for r in OLD_ROWS] == list(OLD_ROWS)
        words = InvocationStoreContract.record(id="inv-new", user_turn="keep it short")
        store.insert(words)
        assert store.get("inv-new") == words
    finally:
        store.close()


def test_a_0_5_0_postgresql_record_already_migrated_without_user_turn_is_repaired(
        pg_database: str, tmp_path: Path) -> None:
    # What the toolhost with the edited migration 2 did to it: migrations 3 to 6 applied and
    # recorded, and no user_turn.
    postgresql_0_5_0(pg_database)
    with psycopg.connect(pg_database) as conn:
        for name, version, step in pg_invocations.MIGRATIONS:
            if 3 <= version <= 6:
                if callable(step):
                    step(conn)
                else:
                    conn.execute(step)
                conn.execute("INSERT INTO toolhost_schema_migrations VALUES (%s, %s)",
                             (name, version))
    result = run_toolhost("pending", "--json", data_dir=tmp_path / "data",
                          plugins="", env={"TOOLHOST_DATABASE_URL": pg_database})
    assert_no_traceback(result)
    assert (result.returncode, result.stderr) == (0, "")
    assert [call["id"] for call in json.loads(result.stdout)] == ["inv-paused"]


def test_a_postgresql_record_lacking_a_column_is_refused_at_start_in_one_line(
        pg_database: str) -> None:
    PostgresInvocationStore(pg_database).close()
    with psycopg.connect(pg_database) as conn:
        conn.execute("ALTER TABLE tool_invocations DROP COLUMN user_turn")
    with pytest.raises(StoreUnavailable) as refused:
        PostgresInvocationStore(pg_database).close()
    assert str(refused.value) == (
        f"the database {shown_conninfo(pg_database)} does not have the schema this toolhost migrated it to "
        "(table tool_invocations lacks column user_turn): restore it from a backup, or point "
        "TOOLHOST_DATABASE_URL at another database")
