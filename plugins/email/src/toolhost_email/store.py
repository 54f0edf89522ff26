"""The mail cache's SQLite file: where it lives, its schema, and its connections.

One file, ``mail.sqlite3`` in toolhost-email's data directory, in WAL mode so a reader (the
tools, toolhost-people) never blocks the operator's import. The schema is this package's
private business: other distributions read it only through ``toolhost_email.reader``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from toolhost import make_private_dirs

__all__ = [
    "BUSY_TIMEOUT_S",
    "CACHE_FILE",
    "MAIL_CACHE_DISTRIBUTION",
    "SCHEMA_VERSION",
    "CacheBusy",
    "CacheUnavailable",
    "begin",
    "bump_generation",
    "cache_path",
    "checkpoint",
    "immediate",
    "is_busy",
    "open_read_only",
    "open_writable",
    "owe_checkpoint",
    "rollback",
    "settle",
    "writing",
]

MAIL_CACHE_DISTRIBUTION: Final = "toolhost-email"
CACHE_FILE: Final = "mail.sqlite3"
SCHEMA_VERSION: Final = 2
#: How long a writer waits for another one (an import, an erase) to finish.
BUSY_TIMEOUT_S: Final = 30.0
#: SQLite's primary result codes for a lock held by another connection.
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6
#: Primary result codes saying the file is no mail cache: no SQLite database, a damaged one, or
#: one whose tables are not ours (SQLITE_ERROR: "table meta has no column named key").
_NOT_OURS: Final = frozenset({1, 11, 26})
#: ``meta``'s record that an erase's checkpoint is owed: the generation that erase committed.
_OWED: Final = "checkpoint_owed"
#: How long an open that finds a checkpoint owed waits for other connections to let it run.
_SETTLE_WAIT_S: Final = 1.0
#: How long an erase retries its checkpoint while other connections hold it back (about 4 s,
#: as the README says); past it the record finishes the job (D467).
_CHECKPOINT_WAIT_S: Final = 4.0

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


class CacheBusy(CacheUnavailable):
    """Another writer held the cache past the wait (``BUSY_TIMEOUT_S``): nothing was changed,
    and trying again once it has finished will do. One line for operators."""

    def __init__(self) -> None:
        super().__init__("the mail cache is busy (another import, erase or command is writing "
                         "it) and nothing was changed: try again when that has finished")


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" (busy or locked, past the wait)."""
    return (isinstance(exc, sqlite3.Error)
            and getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED))


def _not_ours(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _NOT_OURS


def _error_name(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or type(exc).__name__)


def cache_path(data_dir: Path) -> Path:
    return data_dir / CACHE_FILE


def open_writable(data_dir: Path, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """The cache in ``data_dir`` opened for writing (created on first use), schema applied.

    Autocommit mode: every writer opens its own ``BEGIN IMMEDIATE`` transaction, so one import
    of one file is one transaction and a failure leaves nothing of it behind. Safe to run by
    several processes at once on a cache none of them has created yet. ``timeout``: seconds
    to wait for another writer, here and at each ``begin`` on the connection.

    :raises CacheBusy: another writer held the cache past ``timeout``.
    :raises CacheUnavailable: the file cannot be opened, or is no mail cache of this schema.
    """
    path = cache_path(data_dir)
    try:
        # The import is often a fresh data directory's first command: 0700, as the host makes it.
        make_private_dirs(data_dir)
        conn = sqlite3.connect(path, isolation_level=None, timeout=timeout)
    except (OSError, sqlite3.Error) as exc:
        raise CacheUnavailable(
            f"the mail cache in {data_dir} cannot be opened ({type(exc).__name__}): check that "
            "the directory exists and is writable"
        ) from exc
    try:
        _wal(conn, timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        # Deleted mail is overwritten, not left in free pages (the build's default may differ).
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
        # Schema, first rows and migration in one write transaction: processes creating the
        # same fresh cache at once take turns, and each finds what the first one made.
        with immediate(conn):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?), "
                         "('generation', 0)", (SCHEMA_VERSION,))
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
            if version == 1:
                _migrate_1_to_2(conn)
            elif version != SCHEMA_VERSION:
                raise CacheUnavailable(
                    f"the mail cache {path} has schema {version}, this toolhost-email reads "
                    f"{SCHEMA_VERSION}: upgrade toolhost-email, or erase and re-import")
            owed = _owed(conn)
    except CacheUnavailable:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        if is_busy(exc):
            raise CacheBusy from exc
        if _not_ours(exc):
            raise CacheUnavailable(
                f"{path} is not a mail cache ({_error_name(exc)}): move it aside and import "
                "again") from exc
        raise CacheUnavailable(
            f"the mail cache {path} cannot be opened for writing ({_error_name(exc)}): check "
            "the disk and the file's permissions") from exc
    if owed is not None:
        _settle_owed(path, owed)
    return conn


def open_read_only(data_dir: Path, check_same_thread: bool = True) -> sqlite3.Connection:
    """The cache in ``data_dir`` (which exists) opened read-only, for the readers; first, a
    checkpoint an erase owed (its process was killed after the commit) is taken, so the
    erased mail leaves the files at the next use of the cache, whoever it is.

    :raises sqlite3.Error: the file cannot be opened, or is no mail cache (no ``meta``).
    :raises OSError: a directory of its path may not be searched.
    """
    path = cache_path(data_dir)
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0,
                           check_same_thread=check_same_thread)
    try:
        owed = _owed(conn)  # also the read that fails for a file that is no mail cache
    except BaseException:
        conn.close()
        raise
    if owed is not None:
        _settle_owed(path, owed)
    return conn


def _wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the cache in WAL mode. Turning a fresh file to WAL needs it alone, and SQLite
    answers "locked" at once, without waiting, when two connections reach for it together:
    so wait here, as long as for any other writer."""
    # SQLite's own wait off meanwhile, so that the pauses of ``_tries`` are the whole wait.
    conn.execute("PRAGMA busy_timeout = 0")
    for last in _tries(timeout):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or last:
                raise
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")


def _tries(wait: float) -> Iterator[bool]:
    """One item per try at a step other connections may hold up, True for the last: the
    first at once, each next after a pause (5 ms doubling to 100 ms) until the pauses add up
    to ``wait`` seconds. Counted rather than read from a clock, so a loaded machine slows
    the tries down but does not cut them short."""
    waited, pause = 0.0, 0.005
    while waited < wait:
        yield False
        time.sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.1)
    yield True


@contextmanager
def _without_busy_wait(conn: sqlite3.Connection) -> Iterator[None]:
    """SQLite's own wait (the connection's busy timeout) off for the block, then back: a
    step that would wait it out at every try waits only for the pauses of its ``_tries``."""
    (before,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(before)}")


def begin(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE`` on ``conn``, waiting for another writer as long as the connection
    was opened to (``open_writable``'s ``timeout``).

    :raises CacheBusy: the other writer did not finish in time.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise CacheBusy from exc
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already (it does itself after an I/O
    error or a full disk, and an explicit ROLLBACK then fails): the caller's error is the one
    to report, so a failing ROLLBACK (the connection is closed next) is not raised over it."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``conn`` (``BEGIN IMMEDIATE``): committed when the block ends,
    rolled back when it raises.

    :raises CacheBusy: another writer held the cache past the connection's wait.
    """
    begin(conn)
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


@contextmanager
def writing(data_dir: Path, timeout: float = BUSY_TIMEOUT_S) -> Iterator[sqlite3.Connection]:
    """A writable connection to the cache in one write transaction (``immediate``), closed
    when the block ends; ``timeout`` as for ``open_writable``."""
    conn = open_writable(data_dir, timeout)
    try:
        with immediate(conn):
            yield conn
    finally:
        conn.close()


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 2: accounts have owners (``account_owners``, made by the schema script), and a
    feedback record its owner. A schema-1 cache had none: its feedback is everyone's ('').
    Inside the caller's transaction."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(feedback)")]
    if "owner" not in columns:
        conn.execute("ALTER TABLE feedback ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
    conn.execute("UPDATE meta SET value = 2 WHERE key = 'schema'")


def checkpoint(conn: sqlite3.Connection, wait: float = _CHECKPOINT_WAIT_S) -> bool:
    """Copy the WAL into the database file and truncate it to nothing, so no frame of erased
    mail survives there; True when that is done. A reader inside a transaction (or a writer)
    holds it back: tried again for ``wait`` seconds, never waiting out the connection's own
    busy timeout (30 s for a writer) at each try."""
    with _without_busy_wait(conn):
        for _ in _tries(wait):
            # (busy, frames in the WAL, frames copied): done only when nothing held it back
            # and every frame is in the file; TRUNCATE then leaves (0, 0, 0).
            busy, log, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy and log == copied:
                return True
    return False


def owe_checkpoint(conn: sqlite3.Connection, generation: int) -> None:
    """Inside an erase's transaction (``generation``: the one it commits): its checkpoint is
    owed until ``settle`` has taken it. Committed with the erase, so a process killed between
    the commit and the checkpoint leaves the record for the next open to finish."""
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_OWED, generation))


def settle(conn: sqlite3.Connection, owed: int, wait: float = _CHECKPOINT_WAIT_S) -> bool:
    """Take the checkpoint the erase of generation ``owed`` owes (trying for ``wait``
    seconds), then drop its record (and truncate that write too); True when the checkpoint
    was taken, False when it is still owed and its record stays. A later erase's record
    stays: it may have been committed after the checkpoint, and its own is then still owed."""
    if not checkpoint(conn, wait):
        return False
    # Neither step waits: a record left by a busy writer only costs the next open one more,
    # empty, checkpoint, and the frame of this delete holds no mail.
    with _without_busy_wait(conn):
        with suppress(CacheBusy), immediate(conn):
            conn.execute("DELETE FROM meta WHERE key = ? AND value = ?", (_OWED, owed))
        checkpoint(conn, wait=0)
    return True


def _owed(conn: sqlite3.Connection) -> int | None:
    """The generation of an erase whose checkpoint is owed, if any (fetched whole: a
    statement left stepping would hold a read transaction open)."""
    rows = conn.execute("SELECT value FROM meta WHERE key = ?", (_OWED,)).fetchall()
    return int(rows[0][0]) if rows else None


def _settle_owed(path: Path, owed: int) -> None:
    """An open found an erase's checkpoint owed: ``settle`` it on a connection of its own,
    waiting at most ``_SETTLE_WAIT_S`` for others. Best effort: a file this process may not
    write, or readers that stay in the way, leave it to the next open, and what the caller
    reads is the same either way."""
    try:
        # mode=rw: a cache removed meanwhile is not made again, empty, by this connection.
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True,
                               isolation_level=None, timeout=_SETTLE_WAIT_S)
    except (sqlite3.Error, OSError):
        return
    try:
        with suppress(sqlite3.Error):
            conn.execute("PRAGMA secure_delete=ON")
            settle(conn, owed, _SETTLE_WAIT_S)
    finally:
        conn.close()


def bump_generation(conn: sqlite3.Connection) -> int:
    """Advance the generation inside the caller's transaction, and record the ``state`` it
    stands for; the new value."""
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('state', ?)",
                 (_state(conn),))
    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0])


def _state(conn: sqlite3.Connection) -> int:
    """What the cache holds: a digest (63 bits, as meta's values are integers) of its message
    keys, which name an account and a message's bytes, and of the accounts' owners. The
    generation alone does not say it: a cache made anew counts from 0 again, so a reader
    that kept what it derived at generation 3 of the old cache would take the new cache's
    generation 3 for it. Made from the content, not drawn at random: the same mail, the same
    state (and a plugin makes no random ids)."""
    digest = hashlib.sha256()
    for (key,) in conn.execute("SELECT message_key FROM messages ORDER BY message_key"):
        digest.update(f"{key}\x1e".encode())
    digest.update(b"\x1d")
    for account, owner in conn.execute(
            "SELECT account, owner FROM account_owners ORDER BY account"):
        digest.update(f"{account}\x1f{owner}\x1e".encode())
    owned = conn.execute("SELECT value FROM meta WHERE key = 'owned'").fetchone()
    digest.update(b"\x1d" + str(None if owned is None else owned[0]).encode())
    return int.from_bytes(digest.digest()[:8], "big") >> 1
