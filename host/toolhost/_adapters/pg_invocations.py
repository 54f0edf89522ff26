"""The InvocationStore on PostgreSQL: the ``tool_invocations`` table shared by many hosts.

Selected by ``TOOLHOST_DATABASE_URL`` (a ``postgresql://`` URL or a libpq conninfo string).
The row is stored as the SQLite adapter stores it, column for column (ISO 8601 text for times,
canonical JSON text, ``COLLATE "C"`` where SQL orders or compares), so both read back the same
records and ``pending`` gives the same stored text; the free-text columns a caller or a tool
fills (``_FREE_TEXT``) are UTF-8 ``bytea``, as TEXT cannot hold U+0000 and SQLite can. State
changes are single conditional UPDATEs (``WHERE state = ANY(...)``, ``WHERE owner IS NOT
DISTINCT FROM ...``): under READ COMMITTED (forced on every session) a second UPDATE of the row
waits for the first and re-checks its WHERE on the row the first left, so of two hosts
approving the same call exactly one moves it.

Who owns a ``running`` row. Hosts on other machines cannot read each other's ``/proc``; what
all of them can read is the server's lock table. Each store names itself by a random key drawn
once (``{"host": "web-2", "pid": 4242, "lease": 3017822373391043}``, the same mapping for the
process's life) and holds the session advisory lock of that key on a session of its own, the
*lease*. A keeper thread watches the lease's socket and takes the lock again, under the same
key, on a new session as soon as it is lost (a server restart, a failover, an operator's
``pg_terminate_backend``, an idle cut). ``owner_state`` reads ``pg_locks``: the lock held is
ALIVE. Not held is GONE only once it stays so: never within ``_GRACE`` of the server's start or
of this store's own lease being taken again (every live host is re-taking its lock then), and
otherwise only when it is still not held ``_CONFIRM`` seconds after it was first seen so (a
host re-takes its lock within milliseconds of losing it). A killed host's lock goes with its
session at once, a dead machine's when the server's keepalive probes give up (about a
minute), so its rows are settleable by any other host soon after.

Connections come from a ``psycopg_pool.ConnectionPool`` that checks a connection before
handing it out, so after a server restart the next call gets a fresh one: service returns
without restarting the host. Every session is bounded (``_SESSION``: a lock wait or a
statement ends in seconds with an error, never blocks the host) and probed (TCP keepalives).

A reply lost with its connection. The server may have committed a COMMIT, or a statement
made alone (autocommit), whose reply never arrived. Such a write is not reported failed on
the strength of the connection's error: a group commit's transaction is looked up by its id
(``pg_xact_status``), and a statement alone counts as made when its row reads as it left it.
Either is asked once the lost session can no longer change anything (ended with
``pg_terminate_backend`` while the server still runs it), so the answer is final.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import select
import socket
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

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
from toolhost._adapters.stored_output import (
    ELIDE_CHARS,
    INLINE_BYTES,
    Blob,
    OutputMissing,
    record_columns,
    relay,
    set_columns,
)
from toolhost._adapters.system_clock import monotonic, new_id
from toolhost._model.convert import column_values
from toolhost._model.invocations import (
    InvocationNotFound,
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    OwnerState,
)
from toolhost._model.settings import StoreUnavailable, is_secret_name

__all__ = ["MIGRATIONS", "QUIET_S", "LendingCheck", "PostgresInvocationStore",
           "checked_conninfo", "checked_pool", "connection_string", "first_line",
           "migrated_pool", "session_settings", "shown_conninfo"]

#: One step of a component's schema: SQL, or a function changing the rows already written.
Step = str | Callable[[psycopg.Connection[Any]], None]

#: (component, version, step). Each runs once, in one transaction with its record.
MIGRATIONS: Sequence[tuple[str, int, Step]] = (
    (
        "invocations",
        1,
        """
        CREATE TABLE tool_invocations (
            id TEXT COLLATE "C" PRIMARY KEY,
            run_id TEXT COLLATE "C" NOT NULL,
            principal_id BYTEA NOT NULL,
            scopes TEXT NOT NULL,
            conversation_id BYTEA,
            tool_name TEXT COLLATE "C" NOT NULL,
            tool_version TEXT COLLATE "C",
            arguments TEXT NOT NULL,
            argument_digest TEXT COLLATE "C",
            state TEXT COLLATE "C" NOT NULL,
            policy TEXT,
            approver BYTEA,
            denial_reason BYTEA,
            result_structured TEXT,
            result_content BYTEA,
            output_trust TEXT,
            failure_kind TEXT,
            reason_code TEXT,
            retryable BOOLEAN,
            failure_detail TEXT,
            artifact_refs TEXT NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            started_at TEXT,
            finished_at TEXT,
            decided_at TEXT,
            owner TEXT
        );
        -- The two lookups, each serving its WHERE and its ORDER BY (as SQLite's migration 4):
        -- the rows not yet final (pending, recovery), and a run's rows by digest.
        CREATE INDEX tool_invocations_open ON tool_invocations (state, created_at, id)
            WHERE state NOT IN ('denied', 'failed', 'succeeded');
        CREATE INDEX tool_invocations_digest
            ON tool_invocations (run_id, argument_digest, created_at, id)
        """,
    ),
    # As SQLite's migration 5: the run's deadline, and the files a call attached.
    (
        "invocations",
        2,
        """
        ALTER TABLE tool_invocations ADD COLUMN run_deadline TEXT;
        ALTER TABLE tool_invocations ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'
        """,
    ),
    # As SQLite's migrations 6 and 7: each output stored once, a large one by reference
    # (toolhost._adapters.stored_output), and the rows already written laid out so.
    (
        "invocations",
        3,
        """
        CREATE TABLE tool_outputs (digest TEXT COLLATE "C" PRIMARY KEY, body BYTEA NOT NULL);
        ALTER TABLE tool_invocations ADD COLUMN output_refs TEXT
        """,
    ),
    ("invocations", 4, lambda conn: _relay_rows(conn)),
    # The approvals inbox's logins ended before they expire (toolhost._ports.logins, D324).
    ("invocations", 5, """
        CREATE TABLE ended_logins (nonce TEXT COLLATE "C" PRIMARY KEY,
                                   expires DOUBLE PRECISION NOT NULL);
        CREATE INDEX ended_logins_expires ON ended_logins (expires)
        """),
    # As SQLite's migration 9: the operator's directory a paused call's run had.
    ("invocations", 6, "ALTER TABLE tool_invocations ADD COLUMN operator_directory TEXT"),
    # As SQLite's migration 10: the user's words. Only where missing: databases made after
    # 0.5.0 got the column from an edit of shipped migration 2, and ones made by 0.5.0 and
    # then migrated to 6 by that edit's toolhost lack it with every version recorded.
    ("invocations", 7, "ALTER TABLE tool_invocations ADD COLUMN IF NOT EXISTS user_turn BYTEA"),
)

#: The columns the record's statements name, by table: a database that lacks one is refused
#: at the start (``_check_columns``), not by every call and ``recover`` with a traceback.
_NEEDED_COLUMNS: Mapping[str, Sequence[str]] = {
    "tool_invocations": STORED, "tool_outputs": ("digest", "body"),
    "ended_logins": ("nonce", "expires")}

#: Held (per transaction) while migrating, so hosts starting together migrate one at a time:
#: "toolhost" in ASCII, as a bigint.
_MIGRATION_LOCK = int.from_bytes(b"toolhost", "big")

_BOOTSTRAP = """CREATE TABLE IF NOT EXISTS toolhost_schema_migrations (
    component TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component, version))"""

#: Text a principal, a client, an approver or a tool chose, which may hold U+0000: stored as
#: its UTF-8 bytes. Nothing orders or filters on these columns.
_FREE_TEXT = frozenset({"principal_id", "conversation_id", "approver", "denial_reason",
                        "result_content", "user_turn"})
_FREE_AT = tuple(i for i, name in enumerate(COLUMNS) if name in _FREE_TEXT)
_SELECT = f"SELECT {', '.join(STORED)} FROM tool_invocations"
_INSERT = (f"INSERT INTO tool_invocations ({', '.join(STORED)}) "
           f"VALUES ({', '.join(['%s'] * len(STORED))}) ON CONFLICT (id) DO NOTHING")
#: A row write and its outputs in one statement (so in one transaction, whose fate a lost
#: reply's check reads off the row alone): the outputs only if the row was written.
_WITH_OUTPUTS = ("WITH written AS ({write} RETURNING 1), outputs AS ("
                 "INSERT INTO tool_outputs (digest, body) SELECT digest, body "
                 "FROM unnest(%s::text[], %s::bytea[]) AS o (digest, body) "
                 "WHERE EXISTS (SELECT 1 FROM written) ON CONFLICT (digest) DO NOTHING) "
                 "SELECT count(*) FROM written")
_AWAITING = InvocationState.AWAITING_APPROVAL.value
_RUNNING = InvocationState.RUNNING.value

_UNPARSED = "(TOOLHOST_DATABASE_URL, which cannot be parsed)"


def shown_conninfo(conninfo: str) -> str:
    """The database as a message may name it: the URL or conninfo without its password, nor
    any parameter named like a credential (``sslpassword``, the client key's passphrase):
    what ``toolhost config`` masks, by the same rule (``is_secret_name``).

    Parsed as libpq parses it (a URL's userinfo ends at its last '@', so a password holding
    '#' or '?' is still the password), then written back without them.
    """
    try:
        params = conninfo_to_dict(conninfo)
    except (psycopg.Error, ValueError):
        return _UNPARSED
    params = {name: value for name, value in params.items() if not is_secret_name(name)}
    if "://" not in conninfo:
        return make_conninfo("", **params)
    return _as_url({name: str(value) for name, value in params.items()})


def _as_url(params: dict[str, str]) -> str:
    quote = urllib.parse.quote
    user = params.pop("user", "")
    dbname = params.pop("dbname", "")
    hosts = params.get("host", "").split(",")
    ports = params.get("port", "").split(",")
    netloc = ""
    if not any(h.startswith("/") for h in hosts) and len(ports) in (1, len(hosts)):
        params.pop("host", None)
        params.pop("port", None)
        ports = ports * len(hosts) if len(ports) == 1 else ports
        netloc = ",".join(
            (f"[{h}]" if ":" in h else quote(h, safe="")) + (f":{p}" if p else "")
            for h, p in zip(hosts, ports, strict=True))
    if user:
        netloc = f"{quote(user, safe='')}@{netloc}"
    query = urllib.parse.urlencode(params)
    return f"postgresql://{netloc}/{quote(dbname, safe='')}" + (f"?{query}" if query else "")


def first_line(exc: BaseException) -> str:
    """An error's first line, as a one-line message may quote it."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


#: libpq's side of every connection: keepalive probes and a bound on unacknowledged data
#: (ms), so a server that vanished is seen in about a minute, not the kernel's two hours;
#: and the primary of a multi-host URL, as every session writes. Defaults: the operator's
#: conninfo wins. ``client_encoding`` is forced: the stored text is UTF-8.
_CLIENT_DEFAULTS: dict[str, str | int] = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                    "keepalives_count": 3, "tcp_user_timeout": 60_000,
                    "target_session_attrs": "read-write"}


def connection_string(conninfo: str, connect_timeout: int) -> str:
    """``conninfo`` with the client settings every toolhost connection needs."""
    given = conninfo_to_dict(conninfo)
    added = {k: v for k, v in {"connect_timeout": connect_timeout, **_CLIENT_DEFAULTS}.items()
             if k not in given}
    return make_conninfo(conninfo, **added, client_encoding="UTF8")


#: The server's side of every session, whatever the database's or role's defaults: a lock
#: wait or a statement ends in an error within seconds (a row locked by an operator's open
#: transaction must not block a host, whose store calls run on its event loop); the
#: compare-and-set assumes READ COMMITTED; times are read in ISO.
_SESSION = {"lock_timeout": "2s", "statement_timeout": "10s",
            "default_transaction_isolation": "read committed", "DateStyle": "ISO",
            "idle_in_transaction_session_timeout": "60s"}


def session_settings(conn: psycopg.Connection[Any]) -> None:
    """Set ``_SESSION`` on a new autocommit connection, in one round trip."""
    calls = ", ".join("set_config(%s, %s, false)" for _ in _SESSION)
    conn.execute(f"SELECT {calls}", [v for item in _SESSION.items() for v in item])


#: Seconds since a pooled connection was last lent (or made) within which it is lent again
#: without the empty query, when the server said nothing on it meanwhile.
QUIET_S = 1.0


class LendingCheck:
    """A pool's ``configure`` and ``check``: the empty query (one round trip) before a
    connection is lent, only when the server spoke on it since, or it was last lent (or
    made) ``QUIET_S`` or longer ago.

    The check is what replaces a connection a server restart, an administrator, an idle cut
    or a failover ended; run at every lending it cost each write a second round trip (~330 µs
    of a ~1,260 µs call, bench_pg_record.py). A server ending a session says so first (a
    FATAL error, then the socket's end), so a connection with something to read is checked
    however recently it was used. One ended without a word (its host replaced behind the same
    address: only a reset answers the next packet) cannot be told from a live one but by a
    round trip, so a connection not lent for a second or more still gets one; under load,
    none does (D318). Timed from the lending, not the return: psycopg_pool hands every return
    to its worker thread when a ``reset`` is set."""

    def __init__(self) -> None:
        self._lent: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary())
        #: The pool checked for: its other idle connections are checked at once when one
        #: fails (``check``), by one sweep at a time on a thread of its own.
        self.pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._sweeping = threading.Lock()

    def configure(self, conn: psycopg.Connection[Any]) -> None:
        """A new connection: its session set (a round trip it answered), when."""
        session_settings(conn)
        self._lent[conn] = monotonic()

    def check(self, conn: psycopg.Connection[Any]) -> None:
        """Raise if ``conn`` needs the empty query and fails it.

        One that fails is most often one of many a restart ended together: the pool's other
        idle connections are then checked at once (``_sweep``: the dead ones replaced), since
        the pool would otherwise try them one by one with a doubling pause between failures
        (1 s, 2 s, ...) and the call waiting for a connection would run out of time after
        three."""
        now = monotonic()
        last, self._lent[conn] = self._lent.get(conn), now
        if last is None or now - last >= QUIET_S or _heard(conn):
            try:
                ConnectionPool.check_connection(conn)
            except Exception:
                self._sweep()
                raise

    def _sweep(self) -> None:
        """``ConnectionPool.check`` on a thread of its own, unless one runs: not on the
        caller's, where one hung session among the idle ones (a round trip with no time limit
        but the socket's) would hold the call, and the failed connection, as long."""
        pool = self.pool
        if pool is None or not self._sweeping.acquire(blocking=False):
            return

        def sweep() -> None:
            try:
                pool.check()
            except Exception:  # a pool closed meanwhile: nothing left to sweep
                pass
            finally:
                self._sweeping.release()

        threading.Thread(target=sweep, name=f"{pool.name}-sweep", daemon=True).start()


def _heard(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server sent something on the idle ``conn`` (or it has no socket left)."""
    try:
        poller = select.poll()  # not select(): a busy server's descriptors pass 1,024
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0)) or conn.closed
    except Exception:  # no socket, no poll: the round trip tells
        return True


def checked_pool(conninfo: str, *, name: str, application_name: str, max_size: int,
                 timeout: float) -> ConnectionPool[psycopg.Connection[Any]]:
    """An opened pool on ``conninfo``: autocommit sessions with ``_SESSION`` set, each
    checked before it is lent when it was not lent for a while or the server spoke on it
    meanwhile (``LendingCheck``). The pool retries a failed connect with a doubling delay until
    ``reconnect_timeout``, then gives up, and the next call that needs a connection tries at
    once: kept as short as ``timeout`` so a server that comes back is used within seconds,
    not after a delay doubled for as long as it was down."""
    lending = LendingCheck()
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        conninfo, min_size=1, max_size=max_size, timeout=timeout, open=False,
        reconnect_timeout=timeout,
        kwargs={"autocommit": True, "application_name": application_name},
        configure=lending.configure, check=lending.check, name=name)
    lending.pool = pool
    pool.open()
    return pool


#: The server's TCP keepalive on the lease's session: idle seconds, interval, probes.
_KEEPALIVES = (("tcp_keepalives_idle", 30), ("tcp_keepalives_interval", 10),
               ("tcp_keepalives_count", 3))
#: Seconds after the server's start, or this store's lease being taken again, during which a
#: lease not held is UNKNOWN: every live host is re-taking its lock then.
_GRACE = 30.0
#: Seconds a lease must stay not held before its owner is GONE (a host that lost its session
#: takes its lock again within milliseconds); a sighting older than ``_CONFIRM_WINDOW`` is
#: not trusted, the lease may have been held in between.
_CONFIRM = 2.0
_CONFIRM_WINDOW = 10.0
#: Seconds between the keeper's attempts to take the lease again while it cannot; and between
#: its looks at a lease whose socket stayed quiet (a safety net: an end is seen at once).
_RETRY = 0.5
_WATCH = 5.0
#: Seconds a lost session's transaction is given to end, once told to, before its fate is
#: left unknown; and between looks at it meanwhile.
_SETTLE = 5.0
_SETTLE_POLL = 0.02
#: A transaction an error aborted, which only a ROLLBACK ends.
_FAILED = psycopg.pq.TransactionStatus.INERROR

_LEASE_HELD = """SELECT EXISTS (
    SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND classid::bigint = %s AND objid::bigint = %s),
    extract(epoch FROM now() - pg_postmaster_start_time())::float8"""


class _LeaseTaken(Exception):
    """The lease's key is held by another session: this process's previous one, which the
    server has not yet seen end."""


class _Lease:
    """The session holding this process's advisory lock (see the module's docstring)."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        # 52 random bits: a JSON number every reader holds exactly, and a bigint lock key.
        self.key = int(new_id()[:13], 16)
        self.owner: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid(),
                                      "lease": self.key}
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self.renewed_at: float | None = None  # monotonic: when last taken *again*
        self._take()
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._keeper = threading.Thread(target=self._keep, name="toolhost-lease", daemon=True)
        self._keeper.start()

    def _take(self) -> None:
        """Open a session and take the lock on it. Called with ``_lock`` held (or alone)."""
        conn = psycopg.connect(self._conninfo, autocommit=True,
                               application_name="toolhost lease")
        try:
            session_settings(conn)
            # The session lasts as long as this process, and ends soon after it: never ended
            # for idling, and probed by the server, so a host whose machine died (no FIN ever
            # comes) loses its lock in about a minute.
            conn.execute("SET idle_session_timeout = 0")
            for setting, value in _KEEPALIVES:
                conn.execute(f"SET {setting} = {value}")
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if row is None or not row[0]:
                raise _LeaseTaken
        except BaseException:
            conn.close()
            raise
        if self._conn is not None:
            self._conn.close()
            self.renewed_at = monotonic()
        self._conn = conn

    def _lost(self) -> bool:
        """Whether the lease session is gone. Cheap while it is not: the server writes to an
        idle session only to end it (or with a rare notice, which the probe reads)."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return True
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
            if readable:
                conn.execute("SELECT 1")
        except (psycopg.Error, OSError, ValueError):
            return True
        return False

    def ensure(self, *, wait: bool) -> None:
        """Take the lease again if it was lost; without ``wait``, leave it to the keeper when
        the keeper is at it already."""
        if not self._lock.acquire(blocking=wait):
            return
        try:
            if not self._closed and self._lost():
                with contextlib.suppress(psycopg.Error, _LeaseTaken):
                    self._take()
        finally:
            self._lock.release()

    def _keep(self) -> None:
        while not self._closed:
            conn = self._conn
            try:
                # A broken connection's descriptor may already be another socket's.
                fd = -1 if conn is None or conn.closed or conn.broken else conn.fileno()
            except (psycopg.Error, ValueError):
                fd = -1
            watched: list[Any] = [self._wake_r] if fd < 0 else [self._wake_r, fd]
            try:
                select.select(watched, [], [], _WATCH if fd >= 0 else _RETRY)
            except (OSError, ValueError):
                time.sleep(_RETRY)
            if self._closed:
                return
            self.ensure(wait=True)
            with self._lock:
                lost = self._conn is None or self._conn.closed or self._conn.broken
            if lost:
                time.sleep(_RETRY)  # the server is away: try again shortly

    def close(self) -> None:
        with self._lock:
            self._closed = True
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        self._keeper.join(timeout=10)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
        self._wake_r.close()
        self._wake_w.close()


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End the transaction a write (or the block) raised in. A session that cannot roll back
    is closed, so the pool discards it rather than lend it inside a transaction that will
    never commit."""
    if conn.closed:
        return  # the server ended the session, and its transaction with it
    try:
        conn.rollback()
    except psycopg.Error:
        conn.close()


def _stored(columns: Mapping[str, Any]) -> dict[str, Any]:
    """Column values as written here: the free-text columns as UTF-8 bytes."""
    return {name: value.encode() if name in _FREE_TEXT and isinstance(value, str) else value
            for name, value in columns.items()}


def _decoded(row: Sequence[Any]) -> list[Any]:
    """A row of ``_SELECT`` with its free text decoded. Bytes that are not UTF-8 (written
    outside toolhost) stay bytes, which reading the row reports as that field's damage."""
    values = list(row)
    for i in _FREE_AT:
        if values[i] is not None:
            with contextlib.suppress(UnicodeDecodeError):
                values[i] = bytes(values[i]).decode()
    return values


class PostgresInvocationStore:
    """The record on a PostgreSQL database that several hosts share.

    :raises StoreUnavailable: the server cannot be reached, or its schema is newer than this
        toolhost's; the message names the database without its password.
    """

    def __init__(self, conninfo: str, *, max_size: int = 10, timeout: float = 5.0,
                 connect_timeout: int = 5) -> None:
        conninfo, shown = checked_conninfo(conninfo, connect_timeout)
        try:
            psycopg.connect(conninfo).close()
        except psycopg.Error as exc:
            raise _unreachable(shown, exc) from None
        # Migrated first: the checks of the database (its encoding) come before anything
        # holds a session in it.
        _migrate(conninfo, connect_timeout, shown, columns=_NEEDED_COLUMNS)
        try:
            self._lease = _Lease(conninfo)
        except (psycopg.Error, _LeaseTaken) as exc:
            raise _unreachable(shown, exc) from None
        self._shown = shown  # the database as a message names it
        self._absent: dict[int, float] = {}  # lease key -> when first seen not held
        # Every statement commits on its own.
        self._pool = checked_pool(conninfo, name="toolhost-invocations",
                                  application_name="toolhost", max_size=max_size,
                                  timeout=timeout)
        # The connection of the ``transaction`` this thread has open, if any.
        self._in_transaction = threading.local()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        conn: psycopg.Connection[Any] | None = getattr(self._in_transaction, "conn", None)
        if conn is not None:
            yield conn
            return
        with self._pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """The port's group commit: this thread's writes inside it go to one pooled session,
        between one BEGIN and one COMMIT (a ROLLBACK when anything raised). A write's error
        aborts the transaction on the server, so it rolls back the whole, as the port says.

        A COMMIT whose connection is lost may have been taken by the server before it was
        (its reply lost): the transaction's fate is then asked of the server by its id
        (``_committed``), and a transaction that committed ends the block as a COMMIT that
        answered would. One that did not, or whose fate the server cannot tell, raises.
        A session lost inside the block (before the COMMIT) is ended on the server too
        (``_committed``) before the block's error propagates: a server that has not seen the
        connection end would otherwise keep the transaction open, holding every row it
        wrote, and the caller's writes made again alone would wait on those rows and fail.

        :raises RuntimeError: nested in this thread's open ``transaction`` (the port's "not
            nested"): the inner block's writes would be committed apart from the outer's.
        """
        if getattr(self._in_transaction, "conn", None) is not None:
            raise RuntimeError("PostgresInvocationStore.transaction() is not nested")
        with self._pool.connection() as conn:
            # Its id, fetched with the BEGIN (one round trip): what to ask about if the
            # COMMIT's reply is lost.
            cursor = conn.execute("BEGIN; SELECT pg_current_xact_id()::text")
            cursor.nextset()
            row = cursor.fetchone()
            assert row is not None
            xid, pid = str(row[0]), conn.info.backend_pid
            self._in_transaction.conn = conn
            try:
                yield
            except BaseException as exc:
                if not conn.closed:
                    _roll_back(conn)
                    raise
                lost: BaseException = exc  # the session went with its transaction open
                sent_commit = False
            else:
                if conn.info.transaction_status is _FAILED:
                    # A write's error was caught inside the block: the server aborted the
                    # transaction, and would answer its COMMIT with a ROLLBACK psycopg does
                    # not raise for. None of it is committed, which the caller must hear.
                    _roll_back(conn)
                    raise psycopg.errors.InFailedSqlTransaction(
                        "a write in the transaction failed, so nothing in it was committed")
                try:
                    conn.commit()
                    return
                except psycopg.Error as exc:
                    if not conn.closed:
                        # The server answered: it refused the COMMIT, which ended the
                        # transaction (rolled back).
                        raise
                    lost, sent_commit = exc, True
            finally:
                self._in_transaction.conn = None
        # Outside the lost session (the pool has discarded it). Asked even when no COMMIT was
        # sent: asking ends the session, and with it the transaction, on a server that still
        # runs it; that transaction cannot have committed.
        if not self._committed(xid, pid) or not sent_commit:
            raise lost

    def _committed(self, xid: str, pid: int) -> bool:
        """Whether the transaction ``xid`` committed, its session (backend ``pid``) lost to
        this store. While the server still counts it in progress (its session has not seen
        the connection end), that session is ended (``pg_terminate_backend``, matched by the
        transaction it holds, so a pid reused by another session is never hit): a COMMIT it
        took completes, and one it never got is rolled back. False when it did not commit,
        or when the server cannot tell within ``_SETTLE`` seconds (unreachable, or a
        failover to a server that never had the transaction)."""
        deadline = monotonic() + _SETTLE
        try:
            with self._pool.connection() as conn:
                while True:
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                    status = None if row is None else row[0]
                    if status != "in progress":
                        return status == "committed"
                    if monotonic() > deadline:
                        return False
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE pid = %s AND backend_xid::text = %s",
                        (pid, str(int(xid) & 0xFFFFFFFF)))
                    time.sleep(_SETTLE_POLL)
        except psycopg.Error:
            return False

    def insert(self, record: InvocationRecord) -> None:
        columns, blobs = record_columns(record)
        row = _stored(columns)
        if self._changed(_INSERT, list(row.values()), record.id, row, blobs) != 1:
            raise ValueError(f"invocation {record.id} is already recorded")

    def _changed(self, sql: str, values: Sequence[Any], invocation_id: str,
                 made: Mapping[str, Any], blobs: Sequence[Blob] = ()) -> int:
        """How many rows ``sql`` changed: in this thread's ``transaction``, or alone; with
        ``blobs`` written in the same statement if it changed one (``_WITH_OUTPUTS``).

        Alone, a statement commits as it ends, so one whose connection is lost may have
        committed (its reply lost). It counts as made (1 row) when the row ``invocation_id``
        now holds every stored value in ``made``, looked at once the lost session can no
        longer change it (``_made``); otherwise the connection's error is raised.
        """
        if blobs:
            sql = _WITH_OUTPUTS.format(write=sql)
            values = [*values, [digest for digest, _ in blobs], [body for _, body in blobs]]
        conn = getattr(self._in_transaction, "conn", None)
        if conn is not None:
            return _count(conn.execute(sql, values), blobs)
        with self._pool.connection() as conn:
            pid = conn.info.backend_pid
            try:
                return _count(conn.execute(sql, values), blobs)
            except psycopg.Error as exc:
                if not conn.closed:
                    raise  # the server answered: the statement failed, and changed nothing
                lost = exc
        if self._made(pid, invocation_id, made):
            return 1
        raise lost

    def _made(self, pid: int, invocation_id: str, made: Mapping[str, Any]) -> bool:
        """Whether the row ``invocation_id`` holds every value of ``made``, read once the lost
        session (backend ``pid``) is gone: while the server still runs it, it is ended
        (``pg_terminate_backend``), whatever it is doing, so the statement has committed or
        never will. An idle session may yet hold the statement unread in its socket (sent
        just before the connection was lost): ended, it leaves before running it. False when
        the server cannot tell within ``_SETTLE`` seconds."""
        # Known by its pid, then by its start as first seen: a pid the server gives another
        # session afterwards is never ended here.
        ended = ("SELECT backend_start, pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE pid = %s AND backend_start = coalesce(%s, backend_start)")
        terms = " AND ".join(f"{column} IS NOT DISTINCT FROM %s" for column in made)
        deadline = monotonic() + _SETTLE
        try:
            with self._pool.connection() as conn:
                start = None
                while (session := conn.execute(ended, (pid, start)).fetchone()) is not None:
                    start = session[0]
                    if monotonic() > deadline:
                        return False
                    time.sleep(_SETTLE_POLL)
                row = conn.execute(
                    f"SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE id = %s AND {terms})",
                    [invocation_id, *made.values()]).fetchone()
        except psycopg.Error:
            return False
        return row is not None and bool(row[0])

    def get(self, invocation_id: str) -> InvocationRecord:
        with self._connection() as conn:
            row = conn.execute(f"{_SELECT} WHERE id = %s", (invocation_id,)).fetchone()
        if row is None:
            raise InvocationNotFound(invocation_id)
        return record(_decoded(row), self._output)

    def _entries(self, rows: Iterable[Sequence[Any]]
                 ) -> list[InvocationRecord | InvocationRecordDamaged]:
        """The records of rows of ``_SELECT``, each output completed from ``tool_outputs``; a
        damaged row's ``InvocationRecordDamaged`` in its place."""
        return [entry(_decoded(row), self._output) for row in rows]

    def _output(self, digest: str) -> bytes:
        with self._connection() as conn:
            row = conn.execute("SELECT body FROM tool_outputs WHERE digest = %s",
                               (digest,)).fetchone()
        if row is None:
            raise OutputMissing(Path(self._shown), digest)
        return bytes(row[0])

    def transition(
        self,
        invocation_id: str,
        *,
        expected: Iterable[InvocationState],
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        settable, blobs = _settable(fields, to)
        columns = _stored(settable)
        states = [s.value for s in expected]
        sql = (f"UPDATE tool_invocations SET {', '.join(f'{c} = %s' for c in columns)} "
               "WHERE id = %s AND state = ANY(%s)")
        return self._changed(sql, [*columns.values(), invocation_id, states], invocation_id,
                             columns, blobs) == 1

    def settle(
        self,
        invocation_id: str,
        *,
        from_owner: Mapping[str, Any] | None,
        to: InvocationState,
        **fields: Any,
    ) -> bool:
        settable, blobs = _settable(fields, to)
        columns = _stored(settable)
        owner = column_values(InvocationRecord, {"owner": from_owner})["owner"]
        sql = (f"UPDATE tool_invocations SET {', '.join(f'{c} = %s' for c in columns)} "
               "WHERE id = %s AND state = %s AND owner IS NOT DISTINCT FROM %s")
        return self._changed(sql, [*columns.values(), invocation_id, _RUNNING, owner],
                             invocation_id, {"owner": owner, **columns}, blobs) == 1

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
        """``list``'s page with an ``InvocationRecordDamaged`` in each damaged row's place,
        as the SQLite adapter's ``list_rows``."""
        terms, values = filter_terms("%s", dict, state=state, run_id=run_id,
                                     tool_name=tool_name, tool_version=tool_version,
                                     argument_digest=argument_digest)
        return self._entries(self._page(_SELECT, terms, values, limit, after))

    def pending(self, *, limit: int, after: str | None = None,
                principal_id: str | None = None) -> Sequence[PendingCall]:
        return list(map(PendingCall._make, self._page(
            SELECT_PENDING, [OPEN, "state = %s", *principal_term(principal_id, "%s")],
            [_AWAITING, *_principal_value(principal_id)], limit, after)))

    def history(self, *, limit: int, before: str | None = None,
                principal_id: str | None = None, tool_name: str | None = None,
                state: InvocationState | None = None, reason_code: str | None = None,
                since: dt.datetime | None = None) -> Sequence[InvocationRecord]:
        if before is not None and "\x00" in before:
            raise InvocationNotFound(before)  # no id holds U+0000, which TEXT cannot
        if any("\x00" in v for v in (tool_name, reason_code) if v is not None):
            return []  # nor can a tool's name or a reason code
        terms, values = filter_terms("%s", _stored, principal_id=principal_id,
                                      tool_name=tool_name, state=state,
                                      reason_code=reason_code, since=since)
        rows = self._page(_SELECT, terms, values, limit, before, newest_first=True)
        return records(self._entries(rows))

    def _page(self, select: str, terms: Sequence[str], values: Sequence[Any],
              limit: int | None, after: str | None, *,
              newest_first: bool = False) -> Sequence[Any]:
        """``select``'s rows matching every term, oldest first (created_at, then id), at most
        ``limit``, strictly after the row ``after`` (keyset paging)."""
        with self._connection() as conn:
            if after is not None:
                anchor = conn.execute("SELECT created_at, id FROM tool_invocations WHERE id = %s",
                                      (after,)).fetchone()
                if anchor is None:
                    raise InvocationNotFound(after)
                terms = [*terms, f"(created_at, id) {'<' if newest_first else '>'} (%s, %s)"]
                values = [*values, *anchor]
            where = f" WHERE {' AND '.join(terms)}" if terms else ""
            where += (" ORDER BY created_at DESC, id DESC" if newest_first
                      else " ORDER BY created_at, id")
            if limit is not None:
                where, values = f"{where} LIMIT %s", [*values, max(limit, 0)]
            return conn.execute(f"{select}{where}", values).fetchall()

    def count(self) -> int:
        with self._connection() as conn:
            row = conn.execute("SELECT count(*) FROM tool_invocations").fetchone()
        assert row is not None
        return int(row[0])

    def end_login(self, nonce: str, expires: float, now: float) -> None:
        with self._connection() as conn:
            conn.execute("DELETE FROM ended_logins WHERE expires < %s", (now,))
            conn.execute("INSERT INTO ended_logins (nonce, expires) VALUES (%s, %s) "
                         "ON CONFLICT (nonce) DO NOTHING", (nonce, expires))

    def login_ended(self, nonce: str) -> bool:
        with self._connection() as conn:
            row = conn.execute("SELECT 1 FROM ended_logins WHERE nonce = %s", (nonce,)
                               ).fetchone()
        return row is not None

    def owner(self) -> Mapping[str, Any]:
        # A row is about to name this process: its lease must be held (or being taken again).
        self._lease.ensure(wait=False)
        return dict(self._lease.owner)

    def owner_state(self, owner: Mapping[str, Any] | None) -> OwnerState:
        if owner is None:
            return OwnerState.GONE  # recorded before owners were: nothing can still hold it
        if dict(owner) == self._lease.owner:
            return OwnerState.ALIVE
        key = owner.get("lease")
        if not isinstance(key, int) or isinstance(key, bool) or not 0 <= key < 1 << 63:
            return OwnerState.UNKNOWN  # not a lease's name (a row from another backend)
        state = self._lease_state(key)
        if state is not OwnerState.GONE:
            return state
        now = monotonic()
        seen = self._absent.get(key)
        if seen is not None and _CONFIRM <= now - seen <= _CONFIRM_WINDOW:
            return OwnerState.GONE
        if seen is None or now - seen > _CONFIRM_WINDOW:
            for stale in [k for k, t in self._absent.items() if now - t > _CONFIRM_WINDOW]:
                del self._absent[stale]
            seen = self._absent[key] = now
        # Not held a moment ago: a live host may be taking it again right now. Looked at once
        # more when that has had time; a second row of the same owner is then answered at once.
        time.sleep(max(0.0, seen + _CONFIRM - now))
        return self._lease_state(key)

    def _lease_state(self, key: int) -> OwnerState:
        """ALIVE when ``key``'s lock is held, UNKNOWN within the grace after a restart (or a
        failover this store lived through), GONE (not yet confirmed) otherwise."""
        with self._connection() as conn:
            row = conn.execute(_LEASE_HELD, (key >> 32, key & 0xFFFFFFFF)).fetchone()
        assert row is not None
        held, up = bool(row[0]), float(row[1])
        if held:
            self._absent.pop(key, None)
            return OwnerState.ALIVE
        renewed = self._lease.renewed_at
        if up < _GRACE or (renewed is not None and monotonic() - renewed < _GRACE):
            return OwnerState.UNKNOWN
        return OwnerState.GONE

    def close(self) -> None:
        self._pool.close()
        self._lease.close()


def checked_conninfo(conninfo: str, connect_timeout: int, *,
                     named: str = "TOOLHOST_DATABASE_URL") -> tuple[str, str]:
    """``conninfo`` with every connection's client settings (``connection_string``), and as a
    message may show it (``shown_conninfo``). ``named``: how its refusal begins
    (``Settings.named``).

    :raises StoreUnavailable: it is not UTF-8 text, or neither a URL nor a libpq conninfo
        string.
    """
    shown = shown_conninfo(conninfo)
    try:
        conninfo_to_dict(conninfo)
    except UnicodeError:
        # Bytes that are not UTF-8 (a Latin-1 password) arrive as lone surrogates, and a URL's
        # %-escape of one decodes to none: psycopg takes UTF-8 only. Not quoted: the password.
        raise StoreUnavailable(Path(shown), f"{named} is not UTF-8 text (nor are the bytes "
                               "its %-escapes stand for): write every value in it, the "
                               "password too, as UTF-8") from None
    except psycopg.Error:
        raise StoreUnavailable(Path(shown), f"{named} is neither a postgresql:// URL nor a "
                               "libpq conninfo string") from None
    return connection_string(conninfo, connect_timeout), shown


def migrated_pool(conninfo: str, *, name: str, application_name: str,
                  migrations: Sequence[tuple[str, int, Step]], max_size: int = 10,
                  timeout: float = 5.0, connect_timeout: int = 5
                  ) -> ConnectionPool[psycopg.Connection[Any]]:
    """A component's pool on the database ``conninfo`` names, once ``migrations`` are applied:
    the invocation store's kind (``checked_pool``).

    :raises StoreUnavailable: not a URL or conninfo, or the database refuses the migrations.
    """
    conninfo, shown = checked_conninfo(conninfo, connect_timeout)
    _migrate(conninfo, connect_timeout, shown, migrations)
    return checked_pool(conninfo, name=name, application_name=application_name,
                        max_size=max_size, timeout=timeout)


def _settable(fields: Mapping[str, Any], to: InvocationState
              ) -> tuple[dict[str, Any], list[Blob]]:
    unknown = set(fields) - set(COLUMNS)
    if unknown or "id" in fields or "state" in fields:
        raise ValueError(f"cannot set {sorted(unknown | ({'id', 'state'} & set(fields)))}")
    return set_columns({"state": to, **fields})


def _count(cursor: psycopg.Cursor[Any], blobs: Sequence[Blob]) -> int:
    """Rows a write changed: its row count, or ``_WITH_OUTPUTS``'s count of them."""
    if not blobs:
        return int(cursor.rowcount)
    row = cursor.fetchone()
    return 0 if row is None else int(row[0])


def _relay_rows(conn: psycopg.Connection[Any]) -> None:
    """Migration 4: lay out the output of every row written before (``stored_output``)."""
    rows = conn.execute(
        "SELECT id, result_structured, result_content FROM tool_invocations "
        "WHERE output_refs IS NULL AND (length(result_content) >= %s "
        "OR length(result_structured) > %s)", (ELIDE_CHARS, INLINE_BYTES // 4)).fetchall()

    def write(invocation_id: str, columns: dict[str, Any], blobs: list[Blob]) -> None:
        if blobs:
            conn.cursor().executemany(
                "INSERT INTO tool_outputs (digest, body) VALUES (%s, %s) "
                "ON CONFLICT (digest) DO NOTHING", blobs)
        stored = _stored(columns)
        conn.execute(f"UPDATE tool_invocations SET {', '.join(f'{c} = %s' for c in stored)} "
                     "WHERE id = %s", [*stored.values(), invocation_id])

    # result_content is free text, stored as its UTF-8 bytes (``_FREE_TEXT``).
    relay(((i, s, None if c is None else bytes(c).decode()) for i, s, c in rows), write)


def _migrate(conninfo: str, connect_timeout: int, shown: str,
             migrations: Sequence[tuple[str, int, Step]] = MIGRATIONS,
             columns: Mapping[str, Sequence[str]] | None = None) -> None:
    """Apply the ``migrations`` not yet recorded, in one transaction under an advisory lock, so
    hosts starting at once apply each exactly once and a refused database is left as it was;
    then check each table has the ``columns`` named for it. Other components' migrations (the
    artifacts' in ``pg_artifacts``) go through here too.

    :raises StoreUnavailable: the schema is newer than these migrations, the database refuses
        them (no right to create tables, a foreign ``tool_invocations``), a table lacks one of
        ``columns``, or it cannot be reached (the session lost meanwhile: a restart, a
        failover, an administrator).
    """
    latest: dict[str, int] = {}
    for component, version, _ in migrations:
        latest[component] = max(latest.get(component, 0), version)
    conn: psycopg.Connection[Any] | None = None
    try:
        with psycopg.connect(connection_string(conninfo, connect_timeout)) as conn:
            _check_encoding(conn, shown)
            # Nothing pending: no DDL and no lock, so a role with row rights only can start.
            row = conn.execute("SELECT to_regclass('toolhost_schema_migrations')").fetchone()
            pending = True
            if row is not None and row[0] is not None:
                done = _versions(conn)
                _check_newer(done, latest, shown)
                pending = not all((c, v) in done for c, v, _ in migrations)
            conn.rollback()
            if pending:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                    conn.execute(_BOOTSTRAP)
                    done = _versions(conn)
                    _check_newer(done, latest, shown)
                    for component, version, step in sorted(migrations, key=lambda m: m[:2]):
                        if (component, version) not in done:
                            if callable(step):
                                step(conn)
                            else:  # several statements: no parameters, one simple query
                                conn.execute(step)
                            conn.execute("INSERT INTO toolhost_schema_migrations (component, "
                                         "version) VALUES (%s, %s)", (component, version))
            _check_columns(conn, columns or {}, shown)
    except psycopg.Error as exc:
        # Only a refused privilege is the role's to fix: a session that never opened or was
        # lost (a restart, a failover, pg_terminate_backend) is the server's, and retryable.
        if conn is None or conn.broken:
            raise _unreachable(shown, exc) from None
        why = ("give TOOLHOST_DATABASE_URL's role the right to create tables there, or use "
               "another database" if isinstance(exc, psycopg.errors.InsufficientPrivilege)
               else "toolhost cannot check or create its tables there: fix what it said, or "
                    "use another database")
        raise StoreUnavailable(Path(shown), f"cannot use the database {shown} "
                               f"({first_line(exc)}): {why}") from None


def _unreachable(shown: str, exc: BaseException) -> StoreUnavailable:
    """The one line for a database that did not answer (``shown``: named without its
    password): the server's to fix, not the role's."""
    return StoreUnavailable(Path(shown), f"cannot reach the database {shown} "
                            f"({first_line(exc)}): start it, or point TOOLHOST_DATABASE_URL "
                            "at one that runs")


def _versions(conn: psycopg.Connection[Any]) -> set[tuple[str, int]]:
    return {(c, v) for c, v in conn.execute(
        "SELECT component, version FROM toolhost_schema_migrations").fetchall()}


def _check_newer(done: set[tuple[str, int]], latest: Mapping[str, int], shown: str) -> None:
    for component, version in sorted(done):
        if version > latest.get(component, version):
            raise StoreUnavailable(
                Path(shown), f"the database {shown} was written by a newer toolhost "
                f"({component} schema version {version}; this one knows "
                f"{latest[component]}): upgrade toolhost-core")


def _check_columns(conn: psycopg.Connection[Any], columns: Mapping[str, Sequence[str]],
                   shown: str) -> None:
    """Each table has the columns named for it, found as the statements find the table (by
    ``search_path``). Read only: a role with row rights alone passes it."""
    for table, needed in columns.items():
        present = {name for (name,) in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attnum > 0 AND NOT attisdropped", (table,)).fetchall()}
        missing = [c for c in needed if c not in present]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise StoreUnavailable(
                Path(shown), f"the database {shown} does not have the schema this toolhost "
                f"migrated it to (table {table} lacks column {missing[0]}{more}): restore it "
                "from a backup, or point TOOLHOST_DATABASE_URL at another database")


def _check_encoding(conn: psycopg.Connection[Any], shown: str) -> None:
    """A database not in UTF-8 cannot hold every argument a model sends (LATIN1), or hands
    text back as bytes (SQL_ASCII): refused at start, not call by call."""
    row = conn.execute("SHOW server_encoding").fetchone()
    encoding = "?" if row is None else str(row[0])
    if encoding != "UTF8":
        raise StoreUnavailable(
            Path(shown), f"the database {shown} is in the {encoding} encoding: toolhost "
            "needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)")


def _principal_value(principal_id: str | None) -> list[Any]:
    # A principal is free text, stored as its UTF-8 bytes (``_FREE_TEXT``).
    return [] if principal_id is None else [principal_id.encode()]
