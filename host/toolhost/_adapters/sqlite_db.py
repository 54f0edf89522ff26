"""The SQLite database the default stores share, and its versioned migrations.

One database file (``<TOOLHOST_DATA_DIR>/toolhost.sqlite3``) holds every default store's tables,
so "one schema" is something a test can count rows over. Each store owns its tables and ships
its own ordered migrations under a component name; ``schema_migrations`` records what ran.
Migrations are versioned from the start so a later schema change is a new entry, never an edit.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import attrs

__all__ = ["DATABASE_NAME", "Migration", "connect", "migrate", "table_names"]

DATABASE_NAME = "toolhost.sqlite3"


@attrs.frozen
class Migration:
    """One forward step of one component's schema. ``version`` counts from 1 without gaps."""

    component: str
    version: int
    sql: str


_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (component, version)
)
"""

_lock = threading.Lock()


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (creating if needed) the database in WAL mode with foreign keys on.

    ``isolation_level=None`` puts transactions under explicit BEGIN/COMMIT control, which the
    stores need for their compare-and-set state transitions.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    """Apply the migrations not yet recorded, in version order, each in its own transaction."""
    with _lock:
        conn.execute(_BOOTSTRAP)
        for m in sorted(migrations, key=lambda m: (m.component, m.version)):
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE component = ? AND version = ?",
                    (m.component, m.version),
                ).fetchone()
                if done is None:
                    for statement in _statements(m.sql):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_migrations (component, version) VALUES (?, ?)",
                        (m.component, m.version),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]


def table_names(conn: sqlite3.Connection) -> list[str]:
    """Every table of the schema, for tests that count rows over all of them."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]
