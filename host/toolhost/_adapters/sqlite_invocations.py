"""The InvocationStore on SQLite: the ``tool_invocations`` table.

One row per invocation, and the row is the only place an outcome lives. State changes are
compare-and-set (``UPDATE ... WHERE state IN (...)``), so the row's transition is the lock:
two processes approving the same invocation cannot both move it to ``running``.

Who owns a ``running`` row. Every process sharing a SQLite database in WAL mode runs on one
machine (WAL's index is shared memory; SQLite does not support it over a network filesystem),
so a process is named by what that machine's kernel says of it (``owner``)::

    {"host": "build-7", "pid": 4242, "boot": "<boot_id>", "pid_ns": "pid:[4026531836]",
     "start": 183349}

``boot`` is ``/proc/sys/kernel/random/boot_id`` (new at every boot), ``pid_ns`` the pid
namespace the pid is numbered in, ``start`` the process's start time in clock ticks since boot
(field 22 of ``/proc/<pid>/stat``). ``owner_state`` then decides, never reporting a live
process as gone:

- another boot id: the machine restarted since, so the owner is GONE;
- another pid namespace (a container sharing the data directory): its pids cannot be read
  from here, UNKNOWN, and the row is left to a ``toolhost recover`` run there;
- no process with that pid, a zombie, or one with another start time (the pid was reused):
  GONE; that process with that start time: ALIVE. A pid ``/proc`` hides (``hidepid``) but
  the kernel still knows is UNKNOWN.

Without ``/proc`` (not Linux) the owner is the host name and the pid alone: a pid that no
longer exists is GONE, any other ALIVE, so a reused pid keeps a row waiting, never the reverse.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolhost._adapters.invocation_rows import (
    COLUMNS,
    OPEN,
    SELECT_PENDING,
    STORED,
    PendingCall,
    entry,
    filter_terms,
    principal_term,
    record,
    records,
)
from toolhost._adapters.sqlite_db import (
    WAL_BACKSTOP_PAGES,
    Checkpointer,
    DatabaseFiles,
    Migration,
    StoreLock,
    connect,
    database_path,
    migrate,
)
from toolhost._adapters.stored_output import (
    ELIDE_CHARS,
    INLINE_BYTES,
    Blob,
    OutputMissing,
    record_columns,
    relay,
    set_columns,
)
from toolhost._model.convert import column_values
from toolhost._model.invocations import (
    InvocationNotFound,
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    OwnerState,
)

__all__ = [
    "MIGRATIONS",
    "SQLiteInvocationStore",
]

MIGRATIONS: Sequence[Migration] = (
    Migration(
        "invocations",
        1,
        """
        CREATE TABLE tool_invocations (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            principal_id TEXT NOT NULL,
            scopes TEXT NOT NULL,
            conversation_id TEXT,
            tool_name TEXT NOT NULL,
            tool_version TEXT,
            arguments TEXT NOT NULL,
            argument_digest TEXT,
            state TEXT NOT NULL,
            policy TEXT,
            approver TEXT,
            denial_reason TEXT,
            result_structured TEXT,
            result_content TEXT,
            output_trust TEXT,
            failure_kind TEXT,
            reason_code TEXT,
            retryable INTEGER,
            failure_detail TEXT,
            artifact_refs TEXT NOT NULL,
            created_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT,
            decided_at TEXT
        );
        CREATE INDEX tool_invocations_state ON tool_invocations (state, created_at);
        CREATE INDEX tool_invocations_run ON tool_invocations (run_id, created_at)
        """,
    ),
    # Finding a decided call again by what was approved (a repeated MCP call after approval).
    Migration(
        "invocations",
        2,
        "CREATE INDEX tool_invocations_digest ON tool_invocations (argument_digest, run_id)",
    ),
    # The process that took the row to running, so a row whose process was killed can be told
    # from one still executing (``Pipeline.recover``).
    Migration("invocations", 3, "ALTER TABLE tool_invocations ADD COLUMN owner TEXT"),
    # Indexes for the two lookups the host makes, each serving its WHERE and its ORDER BY (no
    # sort, so a LIMIT stops early): the rows not yet final by state (``pending``, recovery),
    # partial so a read's row, written final, touches no page of it; and a run's rows by
    # digest (a repeated MCP call). The old digest index led with the digest and stopped
    # short of the order, so the planner walked the whole run by the run index and sorted.
    Migration(
        "invocations",
        4,
        """
        DROP INDEX tool_invocations_state;
        DROP INDEX tool_invocations_run;
        DROP INDEX tool_invocations_digest;
        CREATE INDEX tool_invocations_open ON tool_invocations (state, created_at, id)
            WHERE state NOT IN ('denied', 'failed', 'succeeded');
        CREATE INDEX tool_invocations_digest
            ON tool_invocations (run_id, argument_digest, created_at, id)
        """,
    ),
    # The run's deadline, which bounds a call approved later (anywhere), and the files a call
    # exported or generated, which an answer replayed from the row links again.
    Migration(
        "invocations",
        5,
        """
        ALTER TABLE tool_invocations ADD COLUMN run_deadline TEXT;
        ALTER TABLE tool_invocations ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'
        """,
    ),
    # Each output stored once, a large one by reference (toolhost._adapters.stored_output):
    # the outputs, by digest, and where a row's output is.
    Migration(
        "invocations",
        6,
        """
        CREATE TABLE tool_outputs (digest TEXT PRIMARY KEY, body BLOB NOT NULL);
        ALTER TABLE tool_invocations ADD COLUMN output_refs TEXT
        """,
    ),
    # The rows already written, laid out so: a record of repeated large reads shrinks to one
    # copy of each (its freed pages are reused; VACUUM returns them to the disk).
    Migration("invocations", 7, "", rewrite=lambda conn: _relay_rows(conn)),
    # The approvals inbox's logins ended before they expire (toolhost._ports.logins, D324).
    Migration("invocations", 8, """
        CREATE TABLE ended_logins (nonce TEXT PRIMARY KEY, expires REAL NOT NULL);
        CREATE INDEX ended_logins_expires ON ended_logins (expires)
        """),
    # The operator's directory a paused call's run had, which its approval runs in after the
    # run has ended (``InvocationRecord.operator_directory``).
    Migration("invocations", 9,
              "ALTER TABLE tool_invocations ADD COLUMN operator_directory TEXT"),
    # The user's words a call of a UserWords tool runs with, wherever it is approved. A shipped
    # migration is never edited (tests/test_released_migrations_unchanged.py): databases made
    # after 0.5.0 got the column from an edit of migration 5, so it is added only where missing.
    Migration("invocations", 10, "", rewrite=lambda conn: _add_user_turn(conn)),
)

# The names tests and bench/bench_record.py read the schema by.
_COLUMNS, _OPEN, _SELECT_PENDING = COLUMNS, OPEN, SELECT_PENDING
_SELECT = f"SELECT {', '.join(STORED)} FROM tool_invocations"
_PUT_OUTPUT = "INSERT OR IGNORE INTO tool_outputs (digest, body) VALUES (?, ?)"

_INSERT = (f"INSERT INTO tool_invocations ({', '.join(STORED)}) "
           f"VALUES ({', '.join('?' * len(STORED))})")


def _relay_rows(conn: sqlite3.Connection) -> None:
    """Migration 7: lay out the output of every row written before (``stored_output``)."""
    rows = conn.execute(
        "SELECT id, result_structured, result_content FROM tool_invocations "
        "WHERE output_refs IS NULL AND (length(result_content) >= ? OR length(result_structured) > ?)",
        (ELIDE_CHARS, INLINE_BYTES // 4)).fetchall()

    def write(invocation_id: str, columns: dict[str, Any], blobs: list[Blob]) -> None:
        conn.executemany(_PUT_OUTPUT, blobs)
        conn.execute(f"UPDATE tool_invocations SET {', '.join(f'{c} = ?' for c in columns)} "
                     "WHERE id = ?", [*columns.values(), invocation_id])

    relay(rows, write)


def _add_user_turn(conn: sqlite3.Connection) -> None:
    """Migration 10: ``user_turn`` for a database that lacks it (SQLite has no ``ADD COLUMN
    IF NOT EXISTS``)."""
    if not conn.execute("SELECT 1 FROM pragma_table_info('tool_invocations') "
                        "WHERE name = 'user_turn'").fetchone():
        conn.execute("ALTER TABLE tool_invocations ADD COLUMN user_turn TEXT")


_AWAITING = InvocationState.AWAITING_APPROVAL.value


class SQLiteInvocationStore:
    """The default backend, on the shared database (``toolhost._adapters.sqlite_db``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        migrate(conn, MIGRATIONS)
        self._conn = conn
        # Where a new connection is opened after a failed ROLLBACK (None: in memory).
        path = str(database_path(conn))
        self._path = None if path in ("", ":memory:") else path
        # One connection serves every thread of this process; sqlite3 objects need the lock.
        # Reentrant: a ``transaction`` holds it while its writes take it again. A damaged page
        # met under it is the database's one line (StoreUnavailable), not a traceback.
        self._lock = StoreLock(Path(self._path or ":memory:"))
        #: The files opened, checked before each write and by ``list`` (``/readyz``).
        self._files = None if self._path is None else DatabaseFiles(self._path)
        # This connection writes a row per call: its WAL checkpoints run on another thread.
        self.checkpointer = Checkpointer.attach(conn)
        #: The connection was closed after a ROLLBACK failed; the next use opens a new one.
        self._broken = False

    def _wrote(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.wrote()

    def _live(self) -> sqlite3.Connection:
        """The connection, a new one if the last was closed after a failed ROLLBACK. Called
        with ``_lock`` held.

        :raises StoreUnavailable: the database cannot be opened again (yet: the next use
            tries again).
        :raises sqlite3.OperationalError: it was an in-memory database, gone with the old one.
        """
        if self._broken:
            if self._path is None:
                # Closing an in-memory database dropped it; a new connection would be empty.
                raise sqlite3.OperationalError(
                    "the in-memory database was closed after a ROLLBACK failed")
            if self._files is not None:
                # Gone, ``connect`` would make a new, empty database (no schema) in its place;
                # replaced, it would open a file that is not this record.
                self._files.check(only_database=True)
            conn = connect(self._path)
            try:
                if self._files is not None:
                    self._files.reopened()
                if self.checkpointer is not None:
                    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_BACKSTOP_PAGES}")
            except BaseException:
                conn.close()
                raise
            self._conn, self._broken = conn, False
        return self._conn

    def _writable(self) -> sqlite3.Connection:
        """``_live``'s connection, once the files it writes are still the ones opened (a
        write into a deleted record would be answered as recorded, and lost). Called with
        ``_lock`` held.

        :raises StoreUnavailable: one was deleted or replaced (D213's line).
        """
        conn = self._live()
        if self._files is not None:
            self._files.check()
        return conn

    def _rows(self, where: str, values: Sequence[Any]) -> list[Any]:
        return self._live().execute(f"{_SELECT}{where}", values).fetchall()

    def _entries(self, rows: Iterable[Sequence[Any]]
                 ) -> list[InvocationRecord | InvocationRecordDamaged]:
        """The records of rows of ``_SELECT``, each output completed from ``tool_outputs``; a
        damaged row's ``InvocationRecordDamaged`` in its place."""
        return [entry(row, self._output) for row in rows]

    def _output(self, digest: str) -> bytes:
        with self._lock:
            row = self._live().execute("SELECT body FROM tool_outputs WHERE digest = ?",
                                       (digest,)).fetchone()
        if row is None:
            raise OutputMissing(Path(self._path or ":memory:"), digest)
        return bytes(row[0])

    def _write(self, sql: str, values: Sequence[Any], blobs: Sequence[Blob]) -> int:
        """Rows ``sql`` changed; ``blobs`` are written with it, in one transaction, only when
        it changed one (a compare-and-set that lost leaves no output behind)."""
        with self._lock:
            # An output stored already (a file read again) is not bound and sent again.
            blobs = [blob for blob in blobs if not self._live().execute(
                "SELECT 1 FROM tool_outputs WHERE digest = ?", (blob[0],)).fetchone()]
            if blobs and not self._live().in_transaction:
                with self.transaction():
                    return self._write(sql, values, blobs)
            conn = self._live()
            if not conn.in_transaction:  # inside one, its BEGIN checked the files
                conn = self._writable()
            changed = int(conn.execute(sql, values).rowcount)
            if changed and blobs:
                conn.executemany(_PUT_OUTPUT, blobs)
            return changed

    def insert(self, record: InvocationRecord) -> None:
        columns, blobs = record_columns(record)
        try:
            self._write(_INSERT, list(columns.values()), blobs)
        except sqlite3.IntegrityError:
            raise ValueError(f"invocation {record.id} is already recorded") from None
        self._wrote()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """The port's group commit: one BEGIN IMMEDIATE (the write lock taken at once, under
        the busy timeout, rather than on upgrade) to one COMMIT. The connection's lock is held
        throughout, so no other thread's statement lands inside it."""
        with self._lock:
            conn = self._writable()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                conn.execute("COMMIT")
            except BaseException as exc:
                # A failed COMMIT (SQLITE_BUSY, a full disk) leaves the transaction open; the
                # exception that ended it is the one to raise, not a failed ROLLBACK's.
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as failed:
                        self._discard(conn)
                        exc.add_note(f"The ROLLBACK failed too ({failed}): the connection "
                                     "was closed, and the next write opens a new one.")
                raise

    def _discard(self, conn: sqlite3.Connection) -> None:
        """Close a connection left inside a transaction it could not roll back: every later
        statement on it would join that transaction, never to be committed. Closing ends it
        (SQLite rolls back, or its locks and uncommitted WAL frames go with the file
        handles); ``_live`` opens the next connection."""
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        self._broken = True

    def get(self, invocation_id: str) -> InvocationRecord:
        with self._lock:
            rows = self._rows(" WHERE id = ?", (invocation_id,))
        if not rows:
            raise InvocationNotFound(invocation_id)
        return record(rows[0], self._output)

    def transition(
        self,
        invocation_id: str,
        *,
        expected: Iterable[InvocationState],
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        unknown = set(fields) - set(_COLUMNS)
        if unknown or "id" in fields or "state" in fields:
            raise ValueError(f"cannot set {sorted(unknown | ({'id', 'state'} & set(fields)))}")
        states = [s.value for s in expected]
        columns, blobs = set_columns({"state": to, **fields})
        assignments = [f"{name} = ?" for name in columns]
        sql = (
            f"UPDATE tool_invocations SET {', '.join(assignments)} "
            f"WHERE id = ? AND state IN ({', '.join('?' * len(states))})"
        )
        changed = self._write(sql, [*columns.values(), invocation_id, *states], blobs) == 1
        if changed:
            self._wrote()
        return changed

    def settle(
        self,
        invocation_id: str,
        *,
        from_owner: Mapping[str, Any] | None,
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        unknown = set(fields) - set(_COLUMNS)
        if unknown or "id" in fields or "state" in fields:
            raise ValueError(f"cannot set {sorted(unknown | ({'id', 'state'} & set(fields)))}")
        columns, blobs = set_columns({"state": to, **fields})
        running = InvocationState.RUNNING.value
        owner = column_values(InvocationRecord, {"owner": from_owner})["owner"]
        sql = (
            f"UPDATE tool_invocations SET {', '.join(f'{name} = ?' for name in columns)} "
            "WHERE id = ? AND state = ? AND owner IS ?"
        )
        changed = self._write(
            sql, [*columns.values(), invocation_id, running, owner], blobs) == 1
        if changed:
            self._wrote()
        return changed

    def list(
        self,
        *,
        state: InvocationState | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        tool_version: str | None = None,
        argument_digest: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[InvocationRecord]:
        return records(self.list_rows(
            state=state, run_id=run_id, tool_name=tool_name, tool_version=tool_version,
            argument_digest=argument_digest, limit=limit, after=after))

    def list_rows(
        self,
        *,
        state: InvocationState | None = None,
        run_id: str | None = None,
        tool_name: str | None = None,
        tool_version: str | None = None,
        argument_digest: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Sequence[InvocationRecord | InvocationRecordDamaged]:
        """``list``'s page with an ``InvocationRecordDamaged`` in each damaged row's place
        (``list`` skips them; ``limit`` counts rows either way): what recovery and the
        operator's listings read, so one damaged row is reported, not fatal."""
        terms, values = filter_terms("?", dict, state=state, run_id=run_id,
                                     tool_name=tool_name, tool_version=tool_version,
                                     argument_digest=argument_digest)
        if self._files is not None:
            # ``/readyz`` asks ``list``: a record deleted under the server is not ready.
            self._files.check()
        return self._entries(self._page(_SELECT, terms, values, limit, after))

    def pending(self, *, limit: int, after: str | None = None,
                principal_id: str | None = None) -> Sequence[PendingCall]:
        # The listing's columns only, as stored: a row costs its fetch and a tuple.
        return list(map(PendingCall._make, self._page(
            SELECT_PENDING, [OPEN, "state = ?", *principal_term(principal_id, "?")],
            [_AWAITING, *_principal_value(principal_id)], limit, after)))

    def history(self, *, limit: int, before: str | None = None,
                principal_id: str | None = None, tool_name: str | None = None,
                state: InvocationState | None = None, reason_code: str | None = None,
                since: dt.datetime | None = None) -> Sequence[InvocationRecord]:
        terms, values = filter_terms("?", dict, principal_id=principal_id,
                                      tool_name=tool_name, state=state,
                                      reason_code=reason_code, since=since)
        rows = self._page(_SELECT, terms, values, limit, before, newest_first=True)
        return records(self._entries(rows))

    def _page(self, select: str, terms: Sequence[str], values: Sequence[Any],
              limit: int | None, after: str | None, *,
              newest_first: bool = False) -> Sequence[Any]:
        """``select``'s rows matching every term, oldest first, at most ``limit``, after the
        row ``after``."""
        with self._lock:
            if after is not None:
                # Keyset paging: strictly after that row in (created_at, id) order, so a page
                # costs what its rows cost, however deep, and rows added meanwhile shift none.
                anchor = self._live().execute(
                    "SELECT created_at, id FROM tool_invocations WHERE id = ?", (after,)
                ).fetchone()
                if anchor is None:
                    raise InvocationNotFound(after)
                terms = [*terms, f"(created_at, id) {'<' if newest_first else '>'} (?, ?)"]
                values = [*values, *anchor]
            where = f" WHERE {' AND '.join(terms)}" if terms else ""
            where += (" ORDER BY created_at DESC, id DESC" if newest_first
                      else " ORDER BY created_at, id")
            if limit is not None:
                where, values = f"{where} LIMIT ?", [*values, max(limit, 0)]
            return self._live().execute(f"{select}{where}", values).fetchall()

    def count(self) -> int:
        with self._lock:
            return int(self._live().execute("SELECT COUNT(*) FROM tool_invocations").fetchone()[0])

    def end_login(self, nonce: str, expires: float, now: float) -> None:
        with self._lock:
            conn = self._writable()
            conn.execute("DELETE FROM ended_logins WHERE expires < ?", (now,))
            conn.execute("INSERT OR REPLACE INTO ended_logins (nonce, expires) VALUES (?, ?)",
                         (nonce, expires))

    def login_ended(self, nonce: str) -> bool:
        with self._lock:
            return self._live().execute(
                "SELECT 1 FROM ended_logins WHERE nonce = ?", (nonce,)).fetchone() is not None

    def owner(self) -> Mapping[str, Any]:
        return this_process()

    def owner_state(self, owner: Mapping[str, Any] | None) -> OwnerState:
        return process_state(owner)

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
        with self._lock:
            self._conn.close()
            # Closed for good: a later use fails on the closed connection, never reopens it.
            self._broken = False


# ---------------------------------------------------------------------------- owners

_PROC = Path("/proc")
#: This process's identity, by pid (a forked child is another process).
_identity: dict[int, dict[str, Any]] = {}


def this_process() -> dict[str, Any]:
    """This process as a row's owner records it (see the module's docstring), the same for
    the process's life: kept once read whole, or once ``/proc`` proves to have none of it. A
    read that failed in passing (no file descriptors left) is not kept: with host and pid
    alone a row it named could be judged alive for good after a reboot reused the pid (D85);
    the next call reads ``/proc`` again."""
    pid = os.getpid()
    identity = _identity.get(pid)
    if identity is None:
        identity = {"host": socket.gethostname(), "pid": pid}
        try:
            identity.update(_proc_identity(pid))
        except _NO_PROC:
            pass  # not Linux, or a sandbox that hides these: host and pid, for good
        except OSError:
            return identity
        _identity[pid] = identity
    return dict(identity)


#: What reading ``/proc`` raises where it has no such field at all (not Linux, a sandbox that
#: hides it), unlike a read that fails in passing.
_NO_PROC = (FileNotFoundError, NotADirectoryError, PermissionError)


def _proc_identity(pid: int) -> dict[str, Any]:
    """``boot``, ``pid_ns`` and ``start`` from ``/proc`` ({} when they do not parse).

    :raises OSError: one could not be read.
    """
    boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    pid_ns = os.readlink(_PROC / "self/ns/pid")
    stat = _stat_fields((_PROC / str(pid) / "stat").read_text())
    if not boot or stat is None:
        return {}
    return {"boot": boot, "pid_ns": pid_ns, "start": stat[1]}


def process_state(owner: Mapping[str, Any] | None) -> OwnerState:
    """Whether the process ``owner`` names is alive (see the module's docstring)."""
    if owner is None:
        return OwnerState.GONE  # recorded before owners were: nothing can still hold it
    me = this_process()
    if dict(owner) == me:
        return OwnerState.ALIVE
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return OwnerState.UNKNOWN
    if owner.get("boot") is not None and me.get("boot") is not None:
        if owner["boot"] != me["boot"]:
            return OwnerState.GONE  # this machine has restarted since
        if owner.get("pid_ns") != me.get("pid_ns"):
            return OwnerState.UNKNOWN
        stat = _stat(pid)
        if stat is None:
            return OwnerState.GONE if _no_such_pid(pid) else OwnerState.UNKNOWN
        state, start = stat
        if start != owner.get("start") or state in ("Z", "X", "x"):
            return OwnerState.GONE  # another process under a reused pid, or a zombie
        return OwnerState.ALIVE
    if owner.get("host") != me["host"]:
        return OwnerState.UNKNOWN
    return OwnerState.GONE if _no_such_pid(pid) else OwnerState.ALIVE


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in ticks since boot) from ``/proc/<pid>/stat``; None without one."""
    try:
        return _stat_fields((_PROC / str(pid) / "stat").read_text())
    except OSError:
        return None


def _stat_fields(text: str) -> tuple[str, int] | None:
    """(state, start time) from a ``/proc/<pid>/stat`` line; None when it does not parse."""
    # The command name (field 2) may hold spaces and parentheses: count from after its last ")".
    fields = text[text.rfind(")") + 2:].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _no_such_pid(pid: int) -> bool:
    """True only when the kernel says no process has this pid (signal 0 checks, sends none)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # EPERM: it exists, another user's
    return False


def _principal_value(principal_id: str | None) -> list[Any]:
    return [] if principal_id is None else [principal_id]
