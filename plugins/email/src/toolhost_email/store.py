"""The mail cache's SQLite file: where it lives, its schema, and the writable connection.

One file, ``mail.sqlite3`` in toolhost-email's data directory, in WAL mode so a reader (the
tools, toolhost-people) never blocks the operator's import. The schema is this package's
private business: other distributions read it only through ``toolhost_email.reader``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = [
    "CACHE_FILE",
    "MAIL_CACHE_DISTRIBUTION",
    "SCHEMA_VERSION",
    "CacheUnavailable",
    "bump_generation",
    "cache_path",
    "checkpoint",
    "immediate",
    "open_writable",
    "writing",
]

MAIL_CACHE_DISTRIBUTION: Final = "toolhost-email"
CACHE_FILE: Final = "mail.sqlite3"
SCHEMA_VERSION: Final = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    message_key TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    date_ts INTEGER,
    subject TEXT NOT NULL,
    sender TEXT NOT NULL,
    to_addrs TEXT NOT NULL,
    cc_addrs TEXT NOT NULL,
    reply_to TEXT NOT NULL,
    direction TEXT NOT NULL,
    headers TEXT NOT NULL,
    body TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    list_key TEXT,
    list_id TEXT,
    list_unsubscribe TEXT,
    list_unsubscribe_post TEXT,
    auth_results TEXT
);
CREATE INDEX IF NOT EXISTS messages_order ON messages (date_ts, message_key);
CREATE INDEX IF NOT EXISTS messages_account ON messages (account, date_ts);
CREATE INDEX IF NOT EXISTS messages_thread ON messages (thread_id, date_ts);
CREATE INDEX IF NOT EXISTS messages_list ON messages (account, list_key)
    WHERE list_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS feedback (
    feedback_id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    feedback TEXT NOT NULL,
    quote TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS account_owners (
    account TEXT PRIMARY KEY,
    owner TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback_versions (
    feedback_id TEXT NOT NULL REFERENCES feedback (feedback_id),
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    actor TEXT NOT NULL,
    PRIMARY KEY (feedback_id, version)
);
"""


class CacheUnavailable(Exception):
    """The cache file cannot be opened or is not this package's cache. One line for operators."""


def cache_path(data_dir: Path) -> Path:
    return data_dir / CACHE_FILE


def open_writable(data_dir: Path) -> sqlite3.Connection:
    """The cache in ``data_dir`` opened for writing (created on first use), schema applied.

    Autocommit mode: every writer opens its own ``BEGIN IMMEDIATE`` transaction, so one import
    of one file is one transaction and a failure leaves nothing of it behind.
    """
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(cache_path(data_dir), isolation_level=None, timeout=30.0)
    except (OSError, sqlite3.Error) as exc:
        raise CacheUnavailable(
            f"the mail cache in {data_dir} cannot be opened ({type(exc).__name__}): check that "
            "the directory exists and is writable"
        ) from exc
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Deleted mail is overwritten, not left in free pages (the build's default may differ).
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema', ?), ('generation', 0)",
                         (SCHEMA_VERSION,))
        elif row[0] == 1:
            _migrate_1_to_2(conn)
        elif row[0] != SCHEMA_VERSION:
            raise CacheUnavailable(
                f"the mail cache {cache_path(data_dir)} has schema {row[0]}, this toolhost-email "
                f"reads {SCHEMA_VERSION}: upgrade toolhost-email, or erase and re-import"
            )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise CacheUnavailable(
            f"{cache_path(data_dir)} is not a mail cache ({type(exc).__name__}): move it aside "
            "and import again"
        ) from exc
    except CacheUnavailable:
        conn.close()
        raise
    return conn


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``conn`` (``BEGIN IMMEDIATE``): committed when the block ends,
    rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


@contextmanager
def writing(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """A writable connection to the cache in one write transaction (``immediate``), closed
    when the block ends."""
    conn = open_writable(data_dir)
    try:
        with immediate(conn):
            yield conn
    finally:
        conn.close()


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 2: accounts have owners (``account_owners``, made by the schema script), and a
    feedback record its owner. A schema-1 cache had none: its feedback is everyone's ('')."""
    with immediate(conn):
        columns = [r[1] for r in conn.execute("PRAGMA table_info(feedback)")]
        if "owner" not in columns:
            conn.execute("ALTER TABLE feedback ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
        conn.execute("UPDATE meta SET value = 2 WHERE key = 'schema'")


def checkpoint(conn: sqlite3.Connection, attempts: int = 50) -> bool:
    """Copy the WAL into the database file and truncate it to nothing, so no frame of erased
    mail survives there. A reader inside a transaction holds frames back, so retry briefly;
    True when the WAL was emptied."""
    for attempt in range(attempts):
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return True
        time.sleep(min(0.01 * (attempt + 1), 0.1))
    return False


def bump_generation(conn: sqlite3.Connection) -> int:
    """Advance the generation inside the caller's transaction; the new value."""
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0])
