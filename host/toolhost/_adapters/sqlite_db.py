"""The SQLite database the default stores share, and its versioned migrations.

One database file (``<TOOLHOST_DATA_DIR>/toolhost.sqlite3``) holds every default store's tables,
so "one schema" is something a test can count rows over. Each store owns its tables and ships
its own ordered migrations under a component name; ``schema_migrations`` records what ran.
Migrations are versioned from the start so a later schema change is a new entry, never an edit.

A data directory or database the host cannot use (a file where the directory should be, no
write permission, a file that is not a database or is damaged, another schema, a schema from
a newer toolhost) is ``StoreUnavailable`` from ``connect`` or ``migrate``: one line naming the
path and what to do, raised when the stores are opened.

Checkpoints. In WAL mode a commit appends to ``toolhost.sqlite3-wal`` and a checkpoint copies
those pages back into the database (and, with ``synchronous=NORMAL``, is where the fsyncs
happen). SQLite's default runs it inside whichever commit takes the WAL past 1,000 pages: about
one call in 150 paid a millisecond or more for it, on the event loop. A ``Checkpointer`` runs it
on its own thread and connection instead, woken by the writes it is told of; the writing
connection keeps SQLite's autocheckpoint only as a backstop at ``WAL_BACKSTOP_PAGES``.
Durability is unchanged: commits are what they were, only who copies the WAL back moved.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final

import attrs

from toolhost._adapters.system_clock import monotonic
from toolhost._model.data_layout import DATABASE_NAME, make_private_dirs
from toolhost._model.settings import StoreUnavailable

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECK_EVERY_S",
    "DATABASE_NAME",
    "WAL_BACKSTOP_PAGES",
    "Checkpointer",
    "DatabaseFiles",
    "Migration",
    "StoreLock",
    "connect",
    "damage",
    "database_path",
    "ensure_directory",
    "migrate",
    "moved_or_deleted",
    "table_names",
    "unusable_database",
    "unusable_directory",
]


#: Commits after which the checkpointer is woken (a call's row is 2 to 4 WAL pages, so this
#: is a few hundred pages: SQLite's own 1,000-page threshold, met earlier rather than later).
CHECKPOINT_EVERY: Final = 128
#: Seconds a trickle of commits (fewer than CHECKPOINT_EVERY) waits before it is checkpointed.
CHECKPOINT_IDLE_S: Final = 0.5
#: The writing connection's own autocheckpoint, for writes the checkpointer is not told of
#: (another store's connection, another process) or a checkpointer that cannot keep up. With
#: 4 KiB pages the WAL stays under about 40 MiB beyond one transaction, unless a reader holds
#: an old snapshot open (which stops any checkpoint, SQLite's own included).
WAL_BACKSTOP_PAGES: Final = 10_000


@attrs.frozen
class Migration:
    """One forward step of one component's schema. ``version`` counts from 1 without gaps.
    ``rewrite``, if any, then changes the rows already written, in the same transaction."""

    component: str
    version: int
    sql: str
    rewrite: Callable[[sqlite3.Connection], None] | None = attrs.field(default=None, eq=False)


_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (component, version)
)
"""

_lock = threading.Lock()


_ELSEWHERE = "or set TOOLHOST_DATA_DIR to another directory"


def ensure_directory(directory: Path) -> None:
    """Create ``directory`` (and its parents) if needed, and check this process may write it.

    :raises StoreUnavailable: a file is in its place, it cannot be created, or it is not
        writable.
    """
    try:
        # Private: the record, the mail cache and every plugin's files are under it.
        make_private_dirs(directory)
    except OSError as exc:
        raise unusable_directory(exc, directory) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StoreUnavailable(
            directory, f"cannot write the data directory {directory} (permission denied): "
            f"make it writable by this user, {_ELSEWHERE}")


def _create_private(path: Path) -> None:
    """Create the database file ``path`` readable by this user only, before SQLite does
    (SQLite gives its -wal and -shm files the database's mode); an existing one is kept."""
    # It exists; or SQLite's own open says what is wrong, in its one line.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def unusable_directory(exc: OSError, directory: Path | None = None) -> StoreUnavailable:
    """The one line for the data directory (``directory``), or a directory the stores make
    under it, that could not be made."""
    target = directory if directory is not None else Path(exc.filename or ".")
    what = "the data directory" if directory is not None else "the directory"
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        blocker = next((p for p in (target, *target.parents)
                        if os.path.lexists(p) and not p.is_dir()), None)
        if blocker == target:
            return StoreUnavailable(
                target, f"{what} {target} is a file, not a directory: move the file away, "
                f"{_ELSEWHERE}")
        if blocker is not None:
            return StoreUnavailable(
                target, f"{what} {target} cannot be made: {blocker} is a file, not a "
                f"directory; move the file away, {_ELSEWHERE}")
    return StoreUnavailable(
        target, f"cannot make {what} {target} ({exc.strerror or exc}): make its parent "
        f"writable by this user, {_ELSEWHERE}")


def _primary(exc: BaseException) -> int:
    """SQLite's primary result code of ``exc`` (the low byte of an extended one); 0 for none."""
    return int(getattr(exc, "sqlite_errorcode", 0)) & 0xFF


#: SQLite's primary codes for a file that is not a database, or is damaged below its header.
_DAMAGED: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})

#: A disk with less free than this is full to SQLite: the -shm grows in 32 KiB steps, and a
#: commit appends whole pages to the -wal.
_NEARLY_FULL = 1 << 20


def _disk_full(directory: Path) -> bool:
    """Whether the filesystem of ``directory`` has (nearly) no space left for this user."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _NEARLY_FULL


def unusable_database(database: Path, exc: sqlite3.Error) -> StoreUnavailable:
    """The one line for a database SQLite refused, by its result code."""
    code = _primary(exc)
    if code == sqlite3.SQLITE_READONLY:
        return StoreUnavailable(
            database, f"cannot write the database {database} ({exc}): make it and "
            f"{database.parent} writable by this user, {_ELSEWHERE}")
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreUnavailable(
            database, f"cannot open the database {database} ({exc}): make it and "
            f"{database.parent} readable and writable by this user, {_ELSEWHERE}")
    if code in _DAMAGED:
        return StoreUnavailable(
            database, f"the database {database} is damaged or not a toolhost database ({exc}): "
            f"restore it from a backup, or move it aside and toolhost starts a new one, "
            f"{_ELSEWHERE}")
    # SQLite reports ENOSPC while it sizes the -shm or -wal as an I/O error (SQLITE_IOERR_SHMSIZE,
    # _WRITE, _TRUNCATE), not SQLITE_FULL: the free space tells the two apart.
    if code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR
                                       and _disk_full(database.parent)):
        return StoreUnavailable(
            database, f"cannot write the database {database}: the disk is full; free space, "
            f"{_ELSEWHERE}")
    if code == sqlite3.SQLITE_IOERR:
        return StoreUnavailable(
            database, f"cannot write the database {database}: the disk under it failed "
            f"({getattr(exc, 'sqlite_errorname', exc)}); check the disk, {_ELSEWHERE}")
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreUnavailable(
            database, f"the database {database} stayed locked by another process ({exc}): "
            f"stop the process holding it, {_ELSEWHERE}")
    return StoreUnavailable(database, f"cannot use the database {database} ({exc}): "
                                      f"{_ELSEWHERE}")


def damage(database: Path, exc: BaseException) -> StoreUnavailable | None:
    """``unusable_database``'s line for ``exc`` when it says the database is damaged
    (SQLITE_CORRUPT, SQLITE_NOTADB), else None. The start's check reads the schema only (D82):
    a damaged page below it is met mid-command, where a retry would meet it again."""
    if isinstance(exc, sqlite3.DatabaseError) and _primary(exc) in _DAMAGED:
        return unusable_database(database, exc)
    return None


class StoreLock:
    """The reentrant lock a store's statements run under (one connection serves every thread),
    which also raises the block's damage error as ``damage``'s ``StoreUnavailable``: every
    statement passes here, so no method needs its own translation."""

    __slots__ = ("_database", "_lock")

    def __init__(self, database: Path) -> None:
        self._database = database
        self._lock = threading.RLock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._lock.release()
        refused = None if exc is None else damage(self._database, exc)
        if refused is not None:
            raise refused from exc


def moved_or_deleted(path: Path | str) -> StoreUnavailable:
    """The one line for a database file that is no longer the one opened (D213)."""
    return StoreUnavailable(
        Path(path), f"the database {path} was moved or deleted while toolhost ran: put it "
        "back, or restart toolhost to start a new one")


_Identity = tuple[int, int] | None


#: How long a ``DatabaseFiles.check`` that passed stands for the writes after it.
CHECK_EVERY_S = 0.25


class DatabaseFiles:
    """Which files (``st_dev``, ``st_ino``) a connection opened as the database and its -wal
    and -shm. SQLite keeps writing to its open files: one deleted or replaced meanwhile (by
    an operator, a restore) leaves this process's writes in a file no other process sees, and
    another process's in a WAL this one never reads. ``check`` refuses that before a write.

    The -wal and -shm are checked too: each is where processes meet (the -shm holds the WAL's
    index and its locks), and SQLite never deletes either while a connection holds the
    database open, so a change is an operator's. A connection opened again (D213) may have
    made them anew, so ``reopened`` takes theirs again; the database's must stay the same."""

    __slots__ = ("_checked_at", "_database", "_names", "_opened")

    def __init__(self, database: Path | str) -> None:
        self._database = str(database)
        self._names = (self._database, f"{self._database}-wal", f"{self._database}-shm")
        self._opened = self._now()
        self._checked_at = -CHECK_EVERY_S  # the first check looks

    def _now(self) -> tuple[_Identity, _Identity, _Identity]:
        identities: list[_Identity] = []
        for name in self._names:
            try:
                st = os.stat(name)
            except OSError:
                identities.append(None)
            else:
                identities.append((st.st_dev, st.st_ino))
        return identities[0], identities[1], identities[2]

    def check(self, *, only_database: bool = False) -> None:
        """Three ``stat`` calls, at most once in ``CHECK_EVERY_S`` once they passed: on this
        machine's overlay filesystem they cost a third of a commit (29 against 82 us, loaded),
        too much for every write of every call, and a mishap seen a quarter second late loses
        what those writes held, as one seen just before the next write would. ``only_database``:
        one, always, before a connection is opened again (it makes a -wal and a -shm of its own).

        :raises StoreUnavailable: a file is missing, or another file has its name.
        """
        if not only_database and monotonic() - self._checked_at < CHECK_EVERY_S:
            return
        now = self._now()
        if now[0] != self._opened[0]:
            raise moved_or_deleted(self._database)
        if only_database or now == self._opened:
            if not only_database:
                self._checked_at = monotonic()
            return
        changed = next(n for n, a, b in zip(self._names, self._opened, now, strict=True)
                       if a != b)
        # Nothing to put back: the open file is unlinked. A restart checkpoints what this
        # process holds into the database as it closes.
        raise StoreUnavailable(
            Path(self._database), f"the database's file {changed} was moved or deleted while "
            f"toolhost ran: restart toolhost, and any other toolhost using {self._database}")

    def reopened(self) -> None:
        """A new connection was opened on the database ``check(only_database=True)`` passed:
        take its -wal and -shm."""
        self._opened = self._now()
        self._checked_at = -CHECK_EVERY_S


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (creating if needed) the database in WAL mode with foreign keys on.

    ``isolation_level=None`` puts transactions under explicit BEGIN/COMMIT control, which the
    stores need for their compare-and-set state transitions.

    :raises StoreUnavailable: the directory or the database cannot be used.
    """
    if str(path) != ":memory:":
        ensure_directory(Path(path).parent)
        _create_private(Path(path))
        if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
            # SQLite would open it read-only, and a WAL database even takes a write lock:
            # the first write of a call would be the first to fail.
            raise StoreUnavailable(
                Path(path), f"cannot write the database {path} (permission denied): make it "
                f"readable and writable by this user, {_ELSEWHERE}")
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                               timeout=30)
    except sqlite3.Error as exc:
        raise unusable_database(Path(path), exc) from None
    try:
        # The first statement reads the file's header: a file that is not a database, or is
        # cut short, fails here rather than in the middle of a call.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
    except sqlite3.Error as exc:
        conn.close()
        raise unusable_database(Path(path), exc) from None
    return conn


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    """Apply the migrations not yet recorded, in version order, then check the tables they
    make have the columns they should: all in one transaction, so a database that is refused
    is left exactly as it was.

    :raises StoreUnavailable: the database cannot be written, is damaged, has tables of
        another schema, or records versions newer than these migrations (a newer toolhost).
    """
    try:
        with _lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(_BOOTSTRAP)
                _refuse_newer(conn, migrations)
                for m in sorted(migrations, key=lambda m: (m.component, m.version)):
                    _apply(conn, m)
                _check_columns(conn, migrations)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
    except sqlite3.Error as exc:
        database = database_path(conn)
        if _primary(exc) == sqlite3.SQLITE_ERROR:
            # "table ... already exists", "no such column": tables that are not toolhost's.
            raise _foreign_schema(database, str(exc)) from None
        raise unusable_database(database, exc) from None


def _apply(conn: sqlite3.Connection, m: Migration) -> None:
    done = conn.execute(
        "SELECT 1 FROM schema_migrations WHERE component = ? AND version = ?",
        (m.component, m.version),
    ).fetchone()
    if done is None:
        for statement in _statements(m.sql):
            conn.execute(statement)
        if m.rewrite is not None:
            m.rewrite(conn)
        conn.execute(
            "INSERT INTO schema_migrations (component, version) VALUES (?, ?)",
            (m.component, m.version),
        )


def _refuse_newer(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    known: dict[str, int] = {}
    for m in migrations:
        known[m.component] = max(known.get(m.component, 0), m.version)
    for component, latest in sorted(known.items()):
        (recorded,) = conn.execute(
            "SELECT max(version) FROM schema_migrations WHERE component = ?", (component,)
        ).fetchone()
        if recorded is not None and recorded > latest:
            database = database_path(conn)
            raise StoreUnavailable(
                database, f"the database {database} was written by a newer toolhost "
                f"({component} schema version {recorded}; this one knows {latest}): upgrade "
                f"toolhost-core, {_ELSEWHERE}")


def _check_columns(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    """Every table the migrations make has exactly the columns they give it: a table of the
    same name made by something else is refused at the start, not in the middle of a call."""
    for table, expected in _expected_columns(tuple(migrations)).items():
        actual = _columns(conn, table)
        missing = [c for c in expected if c not in actual]
        extra = [c for c in actual if c not in expected]
        if missing or extra:
            wrong = (f"lacks column {missing[0]}" if missing else f"has column {extra[0]}")
            more = len(missing) + len(extra) - 1
            problem = f"table {table} {wrong}" + (f" (and {more} more differences)" if more
                                                    else "")
            raise _foreign_schema(database_path(conn), problem)


@functools.lru_cache(maxsize=8)
def _expected_columns(migrations: tuple[Migration, ...]) -> dict[str, list[str]]:
    """The columns of each table the migrations make, from running them on an empty database
    (rewrites too, as a new database runs them: one may add a column only where it is missing)."""
    reference = sqlite3.connect(":memory:", isolation_level=None)
    try:
        reference.execute(_BOOTSTRAP)
        for m in sorted(migrations, key=lambda m: (m.component, m.version)):
            for statement in _statements(m.sql):
                reference.execute(statement)
            if m.rewrite is not None:
                m.rewrite(reference)
        return {table: _columns(reference, table) for table in table_names(reference)}
    finally:
        reference.close()


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))]


def _foreign_schema(database: Path, problem: str) -> StoreUnavailable:
    return StoreUnavailable(
        database, f"the database {database} does not have toolhost's schema ({problem}): "
        f"move it aside and toolhost starts a new one, {_ELSEWHERE}")


def database_path(conn: sqlite3.Connection) -> Path:
    """The file ``conn``'s main database is in (``:memory:`` for none)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return Path(file or ":memory:")
    return Path(":memory:")  # pragma: no cover - every connection has a main database


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]


def table_names(conn: sqlite3.Connection) -> list[str]:
    """Every table of the schema, for tests that count rows over all of them."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


class Checkpointer:
    """Checkpoints one database's WAL on a background thread with its own connection.

    The writing store calls ``wrote()`` after each commit (a counter, no system call). The
    thread wakes at the first commit after a checkpoint, then runs a PASSIVE checkpoint once
    CHECKPOINT_EVERY commits have been made, or CHECKPOINT_IDLE_S after that first one if
    fewer were; an idle process's thread sleeps without a timer. PASSIVE never waits for
    readers or writers, so the event loop's commits go on beside it, and Python's sqlite3
    releases the GIL while it runs. In steady use the WAL holds about CHECKPOINT_EVERY
    commits' pages (a few MiB) before it is copied back and reused from its start.
    """

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._writes = 0
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="toolhost-checkpointer",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def attach(cls, conn: sqlite3.Connection) -> Checkpointer | None:
        """A checkpointer for ``conn``'s database file, with ``conn``'s autocheckpoint moved to
        the backstop; None for an in-memory database (it has no WAL)."""
        path = database_path(conn)
        if str(path) == ":memory:" or not str(path):
            return None
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_BACKSTOP_PAGES}")
        return cls(str(path))

    def wrote(self) -> None:
        """One commit was made on the database."""
        self._writes += 1  # a lost increment under a race only delays a checkpoint
        if self._writes == 1 or self._writes >= CHECKPOINT_EVERY:
            self._wake.set()

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if not self._closing and self._writes < CHECKPOINT_EVERY:
                    self._wake.wait(CHECKPOINT_IDLE_S)  # a trickle: gather it first
                    self._wake.clear()
                if self._closing:
                    return
                self._writes = 0
                # Failing, the next commit wakes it again; the backstop bounds the WAL meanwhile.
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            self._conn.close()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running) and close its connection.
        Closing the last connection to the database checkpoints what is left."""
        self._closing = True
        self._wake.set()
        self._thread.join()
