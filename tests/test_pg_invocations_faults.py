"""Review of the PostgreSQL invocation record (issue #17): each test states a defect found.

Every test here failed against the adapter as reviewed; each docstring names the cause. They
use the real server of tests/pg_server.py and the pipeline of tests/test_pg_invocations.py.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import PgServer, pg_database, pg_server
from test_pg_invocations import HOOK, lease_backend, pg_host, session_ends

from toolhost import OutcomeStatus
from toolhost._adapters.pg_invocations import PostgresInvocationStore
from toolhost._adapters.sqlite_db import connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._model.invocations import InvocationRecord, InvocationState, OwnerState
from toolhost._model.settings import StoreUnavailable
from toolhost._pipeline.recovery import Recovered, RecoveryAction
from toolhost.testing import InvocationStoreContract

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

AWAITING, APPROVED, RUNNING, SUCCEEDED = (
    InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED, InvocationState.RUNNING,
    InvocationState.SUCCEEDED)


def record(**changes: Any) -> InvocationRecord:
    return InvocationStoreContract.record(**changes)


@pytest.fixture
def stores(pg_database: str) -> Iterator[Callable[[], PostgresInvocationStore]]:
    opened: list[PostgresInvocationStore] = []

    def open_store() -> PostgresInvocationStore:
        store = PostgresInvocationStore(pg_database, timeout=3)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def hook() -> Iterator[list[Callable[[Mapping[str, Any]], None]]]:
    yield HOOK
    HOOK.clear()


def waiting_on_locks(url: str, n: int) -> None:
    """Wait until ``n`` sessions wait on a lock (the race is set up), not a fixed sleep."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(3000):
            row = conn.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE wait_event_type = 'Lock'").fetchone()
            if row is not None and row[0] >= n:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError(f"{n} sessions never waited on the row lock")


# ------------------------------------------------------------- owners: a live host judged dead


def test_a_live_store_whose_lease_session_was_cut_is_never_gone(
    stores: Callable[[], PostgresInvocationStore], pg_database: str,
) -> None:
    """HIGH. The lease is only re-checked after a *pooled* connection fails, so when the lease
    session alone ends (pg_terminate_backend, a firewall's idle cut, a failover the pool has
    already absorbed) the store goes on naming the dead session as the owner of every new
    row, and every other host judges that live process GONE (its calls settled mid-run)."""
    a, b = stores(), stores()
    # The owner names no backend since the fix (it names the process's lease): the session
    # to cut is the one holding that lease.
    dead = lease_backend(pg_database, a.owner())
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (dead,))
    session_ends(pg_database, dead)
    a.insert(record(id="new-call", state=RUNNING, owner=a.owner()))  # a call starting now
    assert b.owner_state(a.get("new-call").owner) is not OwnerState.GONE


def test_a_live_store_is_never_gone_after_a_server_restart(
    pg_server: PgServer, stores: Callable[[], PostgresInvocationStore],
) -> None:
    """HIGH. The owner is the session, and a restart (or failover) ends every session: each
    host still running is GONE to every other (the port: "a live process is never reported
    GONE"), and stays so even once it has a new lease, as nothing ties the new name to the
    old one."""
    a, b = stores(), stores()
    before = a.owner()
    pg_server.stop()
    pg_server.start()
    b.count()  # b serves again
    # A call a starts now, after the restart, is named by a session that no longer exists:
    # the pool absorbed the restart, so the lease was never re-checked.
    assert b.owner_state(a.owner()) is not OwnerState.GONE
    assert b.owner_state(before) is not OwnerState.GONE  # the same live process


def test_a_call_running_across_a_server_restart_is_left_by_recovery(
    pg_server: PgServer, pg_database: str, tmp_path: Path, hook: list[Any],
) -> None:
    """HIGH, end to end. Host A's call is running when the server restarts; host B's recovery
    (``serve`` runs it every ``recover_every`` seconds) finds A's session gone and settles the
    row while the call still runs: A's finished call then ends INTERRUPTED, its result lost
    (with ``toolhost recover`` an IDEMPOTENT call would run twice at once)."""
    a = pg_host(pg_database, tmp_path / "a")
    b = pg_host(pg_database, tmp_path / "b")
    looked_at: list[Recovered] = []

    def restart_then_recover_elsewhere(arguments: Mapping[str, Any]) -> None:
        pg_server.stop()
        pg_server.start()
        looked_at.extend(b.recover(rerun=False))

    hook.append(restart_then_recover_elsewhere)
    try:
        outcome = a.invoke_sync("pg.hook", {"key": "k"})
        assert [r.action for r in looked_at] == [RecoveryAction.LEFT]
        assert outcome.status is OutcomeStatus.SUCCEEDED, outcome.failure
        (row,) = b.pipeline.invocations.list()
        assert row.state is SUCCEEDED
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------- text PostgreSQL cannot store


@pytest.mark.parametrize("column", ["principal_id", "conversation_id", "denial_reason",
                                    "result_content", "approver"])
def test_text_with_a_nul_round_trips_as_on_sqlite(
    stores: Callable[[], PostgresInvocationStore], tmp_path: Path, column: str,
) -> None:
    """MEDIUM. PostgreSQL TEXT cannot hold U+0000; SQLite stores it. The JSON columns escape
    it (\\u0000), the plain text columns do not, so the insert raises psycopg.DataError."""
    sqlite = SQLiteInvocationStore(connect(tmp_path / "t.db"))
    pg = stores()
    try:
        row = record(**{column: "a\x00b"})
        sqlite.insert(row)
        assert sqlite.get(row.id) == row  # the reference backend holds it
        pg.insert(row)
        assert pg.get(row.id) == row
    finally:
        sqlite.close()


def test_a_tools_content_with_a_nul_is_recorded(
    pg_database: str, tmp_path: Path,
) -> None:
    """MEDIUM, end to end. A tool that ran and returned content holding U+0000 (a binary-ish
    file read, a scraped page): the final write raises DataError, so a call that succeeded
    ends INTERRUPTED and its result is lost; on SQLite it succeeds."""
    host = pg_host(pg_database, tmp_path / "data")
    try:
        outcome = host.invoke_sync("pg.hook", {"key": "before\x00after"})
        assert outcome.status is OutcomeStatus.SUCCEEDED, outcome.failure
        (row,) = host.pipeline.invocations.list()
        assert (row.state, row.result_content) == (SUCCEEDED, "before\x00after")
    finally:
        host.close()


# ------------------------------------------------------------- server-side assumptions


def test_a_locked_row_does_not_block_a_store_call_forever(
    stores: Callable[[], PostgresInvocationStore], pg_database: str,
) -> None:
    """MEDIUM. No statement_timeout or lock_timeout on the pool's sessions: a row locked by
    another session (an operator's open transaction, a stuck host) blocks ``transition`` (and
    the event loop that called it) for as long as the lock is held. The bound below is 30 s,
    six times the pool's own 5 s timeout; the call should fail long before it."""
    store = stores()
    store.insert(record(id="locked"))
    holder = psycopg.connect(pg_database)
    ended = threading.Event()
    try:
        holder.execute("SELECT id FROM tool_invocations WHERE id = 'locked' FOR UPDATE")

        def approve() -> None:
            # A clear failure is the fix; only "never returns" is the defect.
            with contextlib.suppress(psycopg.Error):
                store.transition("locked", expected={AWAITING}, to=APPROVED, approver="ops")
            ended.set()

        worker = threading.Thread(target=approve, daemon=True)
        worker.start()
        waiting_on_locks(pg_database, 1)
        assert ended.wait(30), "transition still blocked after 30 s"
    finally:
        holder.rollback()
        holder.close()
        ended.wait(30)


def test_racing_approvals_lose_cleanly_under_a_repeatable_read_default(
    pg_server: PgServer, pg_database: str,
) -> None:
    """MEDIUM-LOW. The compare-and-set assumes READ COMMITTED (the module says so) but never
    asks for it: a database whose ``default_transaction_isolation`` is REPEATABLE READ or
    SERIALIZABLE (a DBA's setting) makes the losing approval raise SerializationFailure
    instead of returning False."""
    name = pg_database.rsplit("/", 1)[1]
    pg_server.execute(f"ALTER DATABASE {name} SET default_transaction_isolation = "
                      "'repeatable read'")
    hosts = (PostgresInvocationStore(pg_database, timeout=3),
             PostgresInvocationStore(pg_database, timeout=3))
    holder = psycopg.connect(pg_database)
    results: dict[int, object] = {}
    try:
        hosts[0].insert(record(id="contested"))
        holder.execute("SELECT id FROM tool_invocations WHERE id = 'contested' FOR UPDATE")

        def approve(i: int) -> None:
            try:
                results[i] = hosts[i].transition("contested", expected={AWAITING},
                                                 to=APPROVED, approver=f"ops-{i}")
            except psycopg.Error as exc:
                results[i] = type(exc).__name__

        workers = [threading.Thread(target=approve, args=(i,)) for i in (0, 1)]
        for worker in workers:
            worker.start()
        waiting_on_locks(pg_database, 2)  # both approvals queue behind the lock
        holder.commit()
        for worker in workers:
            worker.join()
        assert sorted(results.values(), key=str) == [False, True]
    finally:
        holder.close()
        for host in hosts:
            host.close()


def test_a_role_with_only_row_rights_opens_a_migrated_database(
    pg_server: PgServer, pg_database: str,
) -> None:
    """MEDIUM-LOW. The migration bootstrap (``CREATE TABLE IF NOT EXISTS``) needs CREATE on
    the schema even when every table exists, so a least-privilege application role (SELECT,
    INSERT, UPDATE granted; PostgreSQL 15 gives PUBLIC no CREATE on ``public``) cannot start a
    host, though the notes say CREATE is needed "the first time" only."""
    PostgresInvocationStore(pg_database).close()  # migrated by the owner
    name = pg_database.rsplit("/", 1)[1]
    role = f"app_{name}"
    pg_server.execute(f"CREATE ROLE {role} LOGIN")
    try:
        pg_server.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public "
                          f"TO {role}", name)
        PostgresInvocationStore(pg_database.replace("postgres@", f"{role}@", 1)).close()
    finally:
        pg_server.execute(f"DROP OWNED BY {role}", name)
        pg_server.execute(f"DROP ROLE {role}")


def test_a_database_with_a_non_iso_datestyle_is_usable(
    pg_server: PgServer, pg_database: str,
) -> None:
    """LOW. The lease reads ``backend_start`` as a timestamptz, which psycopg parses only in
    an ISO DateStyle: a database set to ``SQL, DMY`` makes the store's start raise
    NotImplementedError (a traceback, not StoreUnavailable); ``owner_state`` would too."""
    name = pg_database.rsplit("/", 1)[1]
    pg_server.execute(f"ALTER DATABASE {name} SET DateStyle = 'SQL, DMY'")
    store = PostgresInvocationStore(pg_database)
    store.close()


def test_a_url_that_cannot_be_split_is_refused_in_one_line() -> None:
    """LOW. ``shown_conninfo`` runs urlsplit before anything is checked; a URL it rejects (an
    unclosed IPv6 bracket) raises ValueError out of the constructor: a traceback from
    ``toolhost``, not the one-line StoreUnavailable."""
    with pytest.raises(StoreUnavailable) as refused:
        PostgresInvocationStore("postgresql://ops:s3cret@[::1/toolhost")
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("password", ["s3#cret", "s3?cret"])
def test_a_password_holding_a_url_delimiter_is_never_shown(password: str) -> None:
    """HIGH (a secret in messages). libpq ends a URL's userinfo only at '@' or '/', so it
    takes ``ops:s3#cret@db`` as user and password; ``shown_conninfo`` splits with urllib,
    which ends the netloc at '#' or '?', finds no '@' in it, and shows the URL with its
    password in every "cannot reach the database" line."""
    with socket.socket() as s:  # a port nothing listens on: the start fails, naming the database
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://ops:{password}@127.0.0.1:{port}/toolhost"
    assert psycopg.conninfo.conninfo_to_dict(url)["password"] == password  # libpq's reading
    with pytest.raises(StoreUnavailable) as refused:
        PostgresInvocationStore(url, connect_timeout=2)
    assert "cret" not in str(refused.value)


@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII"])
def test_a_database_not_in_utf8_is_refused_at_start_or_round_trips(
    pg_server: PgServer, pg_database: str, encoding: str,
) -> None:
    """MEDIUM. Nothing checks the server encoding or sets client_encoding: a LATIN1 database
    starts, then every call whose arguments leave Latin-1 fails as "record store unavailable"
    (UnicodeEncodeError, retryable, forever); on SQL_ASCII psycopg reads text as bytes and
    every read raises TypeError. Either refusal at start or a faithful round trip is fine."""
    name = f"{pg_database.rsplit('/', 1)[1]}_{encoding.lower()}"
    pg_server.execute(f"CREATE DATABASE {name} ENCODING '{encoding}' LC_COLLATE 'C' "
                      "LC_CTYPE 'C' TEMPLATE template0")
    try:
        try:
            store = PostgresInvocationStore(pg_server.url(name))
        except StoreUnavailable:
            return  # refused in one line: the fix's first form
        try:
            row = record(arguments={"x": "\u00e9\u202e\U0001f600"})
            store.insert(row)
            assert store.get(row.id) == row
        finally:
            store.close()
    finally:
        pg_server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
