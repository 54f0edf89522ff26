"""The InvocationStore on a real PostgreSQL server (tests/pg_server.py starts one).

- The port's contract suite, unchanged.
- Several hosts at once: two stores (two pools, two sessions) racing the same approval and
  the same settle; exactly one wins each. Migrations run once when hosts start together.
- Owners are leases (a session advisory lock per process): ALIVE to another store while
  held, GONE once it stays released; a lease cut alone is taken again under the same name.
- Faults: a server that is down at the start stops ``toolhost`` in one line naming the URL
  without its password; a server lost in the middle of a call ends the call with a static
  failure and no row stuck ``running`` for good; a server back again serves the next call
  without a new host.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import make_plugin, make_spec
from pg_server import PgServer, pg_database, pg_server

from toolhost import Idempotency, OutcomeStatus, Risk, SideEffect, Tool, ToolOutput
from toolhost._adapters import pg_invocations
from toolhost._adapters.pg_invocations import PostgresInvocationStore, shown_conninfo
from toolhost._composition import Host
from toolhost._model.invocations import InvocationRecord, InvocationState, OwnerState
from toolhost._model.settings import Settings, StoreUnavailable
from toolhost._pipeline.recovery import RecoveryAction
from toolhost._ports.invocations import InvocationStore
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import InvocationStoreContract, host_for

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

AWAITING, APPROVED, RUNNING, FAILED = (InvocationState.AWAITING_APPROVAL,
                                       InvocationState.APPROVED, InvocationState.RUNNING,
                                       InvocationState.FAILED)


@pytest.fixture
def stores(pg_database: str) -> Iterator[Callable[[], PostgresInvocationStore]]:
    """Opens stores on the test's database (one per host), closing them after the test."""
    opened: list[PostgresInvocationStore] = []

    def open_store() -> PostgresInvocationStore:
        store = PostgresInvocationStore(pg_database, timeout=3)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


class TestPostgresInvocationStore(InvocationStoreContract):
    @pytest.fixture(autouse=True)
    def _database(self, stores: Callable[[], PostgresInvocationStore],
                  pg_database: str) -> None:
        self._stores = stores
        self._url = pg_database

    def make_store(self, tmp_path: Path) -> InvocationStore:
        return self._stores()

    def damage_state(self, tmp_path: Path, store: object, invocation_id: str) -> None:
        with psycopg.connect(self._url) as conn:
            conn.execute("UPDATE tool_invocations SET state = 'bogus' WHERE id = %s",
                         (invocation_id,))


def record(**changes: Any) -> InvocationRecord:
    return InvocationStoreContract.record(**changes)


# ---------------------------------------------------------------------- several hosts


def race(n: int, action: Callable[[int], bool]) -> list[bool]:
    """Run ``action(i)`` for i in range(n) on n threads released together."""
    barrier = threading.Barrier(n)
    results: list[bool] = [False] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = action(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_hosts_racing_one_approval_one_wins(
    stores: Callable[[], PostgresInvocationStore],
) -> None:
    hosts = stores(), stores()
    for i in range(20):
        hosts[0].insert(record(id=f"inv-{i}"))

    def approve(i: int, host: int) -> bool:
        return hosts[host].transition(f"inv-{i}", expected={AWAITING}, to=APPROVED,
                                      approver=f"ops-{host}")

    def take(i: int, host: int) -> bool:
        return hosts[host].transition(f"inv-{i}", expected={APPROVED}, to=RUNNING,
                                      owner=hosts[host].owner())

    for i in range(20):
        won = race(2, functools.partial(approve, i))
        assert sorted(won) == [False, True]
        row = hosts[1].get(f"inv-{i}")
        assert (row.state, row.approver) == (APPROVED, f"ops-{won.index(True)}")
        # approved → running is the lock the pipeline takes: one taker.
        won = race(2, functools.partial(take, i))
        assert sorted(won) == [False, True]
        assert hosts[0].get(f"inv-{i}").owner == hosts[won.index(True)].owner()


def test_two_hosts_racing_one_settle_one_wins(
    stores: Callable[[], PostgresInvocationStore],
) -> None:
    hosts = stores(), stores()
    gone = {"host": "h", "pid": 7, "backend_pid": 1, "backend_start": "2026-01-01T00:00:00"}
    for i in range(20):
        hosts[0].insert(record(id=f"inv-{i}", state=RUNNING, owner=gone))

    def settle(i: int, host: int) -> bool:
        return hosts[host].settle(f"inv-{i}", from_owner=gone, to=RUNNING,
                                  owner=hosts[host].owner())

    for i in range(20):
        won = race(2, functools.partial(settle, i))
        assert sorted(won) == [False, True]
        assert hosts[0].get(f"inv-{i}").owner == hosts[won.index(True)].owner()


def test_hosts_starting_together_migrate_once(pg_database: str) -> None:
    opened: list[PostgresInvocationStore] = []
    lock = threading.Lock()

    def start(_: int) -> bool:
        store = PostgresInvocationStore(pg_database)
        with lock:
            opened.append(store)
        return True

    assert race(4, start) == [True] * 4
    try:
        with psycopg.connect(pg_database) as conn:
            assert conn.execute("SELECT component, version FROM toolhost_schema_migrations"
                                ).fetchall() == [("invocations", v) for v in range(1, 8)]
    finally:
        for store in opened:
            store.close()


def test_a_schema_newer_than_this_toolhost_is_refused(pg_database: str) -> None:
    PostgresInvocationStore(pg_database).close()
    with psycopg.connect(pg_database) as conn:
        conn.execute("INSERT INTO toolhost_schema_migrations VALUES ('invocations', 9)")
    with pytest.raises(StoreUnavailable, match=r"written by a newer toolhost \(invocations "
                       r"schema version 9; this one knows 7\): upgrade toolhost-core"):
        PostgresInvocationStore(pg_database)


# ---------------------------------------------------------------------- owners


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A released lease judged without the grace that follows a server start: the session's
    server may have started (or restarted, in an earlier test) seconds ago. The grace itself
    is tested by the restart tests, which keep it."""
    monkeypatch.setattr(pg_invocations, "_GRACE", 0.0)


def lease_backend(url: str, owner: Mapping[str, Any]) -> int:
    """The server process of the session holding ``owner``'s lease."""
    key = owner["lease"]
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                           "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1",
                           (key >> 32, key & 0xFFFFFFFF)).fetchone()
    assert row is not None, f"nobody holds the lease of {owner}"
    return int(row[0])


def past_grace(url: str) -> None:
    """Wait out the grace after the server's start (for hosts in other processes)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_sleep(greatest(0, %s - extract(epoch FROM "
                     "now() - pg_postmaster_start_time())))", (pg_invocations._GRACE,))


def test_a_host_is_alive_to_another_while_its_lease_is_held(
    stores: Callable[[], PostgresInvocationStore], pg_database: str, no_grace: None,
) -> None:
    a, b = stores(), stores()
    owner = a.owner()
    assert set(owner) == {"host", "pid", "lease"}
    assert owner["pid"] == os.getpid() and owner != b.owner()
    assert a.owner() == owner  # one name for the process's life
    assert b.owner_state(owner) is OwnerState.ALIVE
    backend = lease_backend(pg_database, owner)
    a.close()
    session_ends(pg_database, backend)
    assert b.owner_state(owner) is OwnerState.GONE
    # Another lease (or a key nobody holds) is not this one.
    assert b.owner_state({**owner, "lease": owner["lease"] ^ 1}) is OwnerState.GONE
    # An owner that is no lease (a row another backend wrote) cannot be checked here.
    assert b.owner_state({"host": "h", "pid": 7, "start": 12}) is OwnerState.UNKNOWN


def test_a_lease_cut_alone_is_taken_again_under_the_same_name(
    stores: Callable[[], PostgresInvocationStore], pg_database: str, no_grace: None,
) -> None:
    """An operator's pg_terminate_backend, or a firewall's idle cut, ends the lease session
    while the process lives: it takes its lock again at once, so it is never GONE."""
    a, b = stores(), stores()
    owner = a.owner()
    for _ in range(3):
        backend = lease_backend(pg_database, owner)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
        session_ends(pg_database, backend)
        assert b.owner_state(owner) is OwnerState.ALIVE  # at once, or once confirmed
        assert lease_backend(pg_database, owner) != backend
        assert a.owner() == owner


def test_a_lease_released_within_the_grace_after_a_restart_is_unknown(
    pg_server: PgServer, stores: Callable[[], PostgresInvocationStore], pg_database: str,
) -> None:
    """Right after the server starts every live host is taking its lock again: one that has
    not yet is UNKNOWN (its rows are left), never GONE."""
    a = stores()
    owner = a.owner()
    pg_server.stop()
    pg_server.start()
    a._lease.close()  # a host that has not taken its lock again (yet)
    b = stores()
    assert b.owner_state(owner) is OwnerState.UNKNOWN


def test_the_lease_session_never_idles_out_and_is_probed(
    stores: Callable[[], PostgresInvocationStore],
) -> None:
    """A server set to end idle sessions must not end the one that says this host is alive;
    a dead machine's session ends on the server's keepalive probes (TCP), in about a minute."""
    conn = stores()._lease._conn
    assert conn is not None
    shown = {name: conn.execute(f"SHOW {name}").fetchone() for name in (
        "idle_session_timeout", "tcp_keepalives_idle", "tcp_keepalives_interval",
        "tcp_keepalives_count")}
    assert shown == {"idle_session_timeout": ("0",), "tcp_keepalives_idle": ("30",),
                     "tcp_keepalives_interval": ("10",), "tcp_keepalives_count": ("3",)}


def test_a_killed_hosts_running_row_is_settled_by_another(
    pg_database: str, stores: Callable[[], PostgresInvocationStore], tmp_path: Path,
    no_grace: None,
) -> None:
    """A host process killed mid-call: its session ends with it, and another host settles
    the row it left ``running`` (recovery, through the real pipeline)."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(HERE)))
    env = {**os.environ, "TOOLHOST_DATABASE_URL": pg_database, "PG_BLOCK": "1",
           "TOOLHOST_DATA_DIR": str(tmp_path / "child")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "blocking\n"
        host = pg_host(pg_database, tmp_path / "data")
        try:
            (row,) = host.pipeline.invocations.list()
            assert row.state is RUNNING and row.owner is not None
            assert row.owner["pid"] == proc.pid
            backend = lease_backend(pg_database, row.owner)
            (left,) = host.recover()
            assert left.action is RecoveryAction.LEFT  # its session is alive
            proc.kill()
            proc.wait()
            session_ends(pg_database, backend)
            (settled,) = host.recover()
            assert settled.action is RecoveryAction.FAILED
            row = host.pipeline.invocations.get(row.id)
            assert (row.state, row.reason_code) == (FAILED, "tool.internal.interrupted")
        finally:
            host.close()
    finally:
        proc.kill()
        proc.communicate()


def session_ends(url: str, backend_pid: int) -> None:
    """Wait until the server has seen a killed client's socket close and ended its session
    (a few milliseconds: the kernel closes the socket, the backend reads end-of-file)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(3000):
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                            (backend_pid,)).fetchone() is None:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError(f"session {backend_pid} outlived its client by 30 s")


# ---------------------------------------------------------------------- faults

HERE = Path(__file__).resolve().parent
#: Called by ``pg.hook`` in the middle of its call.
HOOK: list[Callable[[Mapping[str, Any]], None]] = []
KEY = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"],
       "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}


def _hook(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    if os.environ.get("PG_BLOCK"):
        print("blocking", flush=True)
        threading.Event().wait()
    for hook in HOOK:
        hook(arguments)
    return ToolOutput(structured={"echo": arguments["key"]}, content=arguments["key"])


PLUGIN = make_plugin(domains=["pg"], tools=[
    Tool(make_spec(name="pg.hook", input_schema=KEY, output_schema=OUT,
                   side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                   idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False, timeout_s=60),
         call=_hook),
])

CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_pg_invocations import PLUGIN
from toolhost._model.settings import Settings
from toolhost.testing import host_for
host = host_for({{"pg-dist": PLUGIN}}, settings=Settings.from_environ())
host.invoke_sync("pg.hook", {{"key": "k"}})
"""


def pg_host(url: str, data_dir: Path) -> Host:
    return host_for({"pg-dist": PLUGIN}, data_dir=data_dir,
                    settings=Settings(env={"TOOLHOST_DATABASE_URL": url}))


@pytest.fixture
def hook() -> Iterator[list[Callable[[Mapping[str, Any]], None]]]:
    yield HOOK
    HOOK.clear()


def test_the_password_is_never_shown() -> None:
    assert shown_conninfo("postgresql://ops:s3cret@db:5432/th?sslmode=require&password=x") == (
        "postgresql://ops@db:5432/th?sslmode=require")
    assert "s3cret" not in shown_conninfo("host=db user=ops password=s3cret dbname=th")
    assert sorted(shown_conninfo("host=db user=ops password=s3cret dbname=th").split()) == [
        "dbname=th", "host=db", "user=ops"]
    # Read as libpq reads it: several hosts, IPv6, an escaped user, a socket directory.
    assert shown_conninfo("postgresql://ops:pw@h1:1,[::1]:2/th?password=x") == (
        "postgresql://ops@h1:1,[::1]:2/th")
    assert shown_conninfo("postgres://o%40x:p%23w@db/th") == "postgresql://o%40x@db/th"
    assert shown_conninfo("postgresql:///th?host=/run/pg") == (
        "postgresql:///th?host=%2Frun%2Fpg")


def test_a_parameter_named_like_a_credential_is_never_shown() -> None:
    # sslpassword, the client key's passphrase, which ``toolhost
    # config`` masks, was shown in full.
    assert shown_conninfo("postgresql://ops@db/th?sslmode=require&sslpassword=KEYPW9") == (
        "postgresql://ops@db/th?sslmode=require")
    assert sorted(shown_conninfo("host=db user=ops sslpassword='KEY PW' dbname=th").split()) == [
        "dbname=th", "host=db", "user=ops"]


def test_a_database_that_refuses_the_connection_is_named_without_the_key_passphrase(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "-m", "toolhost._cli.main", "pending"], capture_output=True,
        text=True, timeout=60,
        env={**os.environ, "TOOLHOST_CONFIG": "", "TOOLHOST_PLUGINS": "",
             "TOOLHOST_DATA_DIR": str(tmp_path / "data"),
             "TOOLHOST_DATABASE_URL":
                 f"postgresql://ops@127.0.0.1:{port}/th?sslmode=prefer&sslpassword=KEYPW9"})
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(
        f"toolhost: cannot reach the database postgresql://ops@127.0.0.1:{port}/th"
        "?sslmode=prefer (")
    assert "KEYPW9" not in result.stderr


def test_a_url_that_is_neither_form_is_refused_in_one_line() -> None:
    with pytest.raises(StoreUnavailable) as refused:
        PostgresInvocationStore("nonsense password=s3cret")
    assert str(refused.value) == (
        "TOOLHOST_DATABASE_URL is neither a postgresql:// URL nor a libpq conninfo string")


@pytest.mark.parametrize("command", [["call", "pg.hook"], ["pending"], ["recover"]])
def test_a_server_down_at_the_start_stops_toolhost_in_one_line(
    pg_server: PgServer, tmp_path: Path, command: list[str],
) -> None:
    port = pg_server.port
    url = f"postgresql://ops:s3cret@127.0.0.1:{port}/nowhere"
    pg_server.stop()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "toolhost._cli.main", *command], capture_output=True,
            text=True, timeout=60,
            env={**os.environ, "TOOLHOST_DATABASE_URL": url,
                 "TOOLHOST_DATA_DIR": str(tmp_path / "data"), "TOOLHOST_PLUGINS": ""})
    finally:
        pg_server.start()
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(
        f"toolhost: cannot reach the database postgresql://ops@127.0.0.1:{port}/nowhere (")
    assert result.stderr.endswith(
        "): start it, or point TOOLHOST_DATABASE_URL at one that runs\n")
    assert result.stderr.count("\n") == 1 and "s3cret" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[psycopg.Connection[Any]]:
    """The connections the pools ran their empty query on (before lending them), in order."""
    checked: list[psycopg.Connection[Any]] = []
    check = pg_invocations.ConnectionPool.check_connection
    monkeypatch.setattr(pg_invocations.ConnectionPool, "check_connection",
                        staticmethod(lambda conn: checked.append(conn) or check(conn)))
    return checked


def test_a_pooled_connection_is_lent_without_a_round_trip_while_the_server_is_silent(
    stores: Callable[[], PostgresInvocationStore], checks: list[psycopg.Connection[Any]],
) -> None:
    # D318: the pool ran an empty query before every lending, one round trip more a write.
    store = stores()
    for i in range(20):
        store.insert(record(id=f"inv-{i}"))
    assert store.get("inv-19").id == "inv-19"
    assert checks == []


def test_a_pooled_session_the_server_ended_is_checked_and_replaced_unused(
    stores: Callable[[], PostgresInvocationStore], pg_database: str,
    checks: list[psycopg.Connection[Any]],
) -> None:
    store = stores()
    store.insert(record(id="inv-1"))
    with psycopg.connect(pg_database, autocommit=True) as admin:
        pids = [row[0] for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'toolhost' AND "
            "datname = current_database()")]  # the pool's (the lease's is 'toolhost lease')
        assert pids
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        deadline = time.monotonic() + 10
        while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                            (pids,)).fetchone() != (0,):  # gone: their FATAL was sent
            assert time.monotonic() < deadline
            time.sleep(0.01)
    # The server's FATAL and the socket's end reached the idle connection: it is checked,
    # fails the check, and a new session makes the write.
    store.insert(record(id="inv-2"))
    assert any(conn.closed for conn in checks)
    assert [r.id for r in store.list()] == ["inv-1", "inv-2"]


class _ReplacedHost:
    """A TCP relay to the server whose ``replace()`` plays the server's host replaced behind
    the same address (a failover's moved address, a hard reboot): the open flows get no word,
    and the first packet a client sends on one is answered with a reset. New flows reach the
    server."""

    def __init__(self, port: int) -> None:
        self._target = ("127.0.0.1", port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._flows: list[tuple[socket.socket, socket.socket]] = []
        self._replaced: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._flows.append((client, server))
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()
            threading.Thread(target=self._relay, args=(server, client), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if source in self._replaced:  # a host that knows no such flow: a reset
                    source.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      struct.pack("ii", 1, 0))
                    source.close()
                    return
                sink.sendall(data)
            if source not in self._replaced and sink not in self._replaced:
                sink.close()

    def replace(self) -> None:
        for client, server in self._flows:
            self._replaced.add(client)
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)  # the old server goes; its client hears nothing

    def close(self) -> None:
        self._listener.close()


def test_a_connection_to_a_host_replaced_without_a_word_is_checked_once_it_sat_idle(
    pg_server: PgServer, pg_database: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server's FATAL tells of most ends; a host replaced behind the same address says
    # nothing, and only a round trip finds that out (the first review's reset case): the
    # store lent such a connection unchecked and the call failed.
    monkeypatch.setattr(pg_invocations, "QUIET_S", 0.2)
    relay = _ReplacedHost(pg_server.port)
    store = PostgresInvocationStore(pg_database.replace(f":{pg_server.port}/",
                                                        f":{relay.port}/"), timeout=3)
    try:
        store.insert(record(id="inv-1"))
        relay.replace()
        time.sleep(0.3)
        store.insert(record(id="inv-2"))
        assert [r.id for r in store.list()] == ["inv-1", "inv-2"]
    finally:
        store.close()
        relay.close()


def test_the_first_call_after_a_restart_is_served_however_many_sessions_it_ended(
    pg_server: PgServer, stores: Callable[[], PostgresInvocationStore],
) -> None:
    # The second review: the pool tried its dead connections one by one, pausing 1 s, then
    # 2 s, between failed checks, so with three or more idle at a restart the first call ran
    # out of its 3 s for a connection (PoolTimeout) though the server was back.
    store = stores()
    with contextlib.ExitStack() as held:
        for _ in range(5):
            held.enter_context(store._pool.connection())
    pg_server.stop()
    pg_server.start()
    store.insert(record(id="inv-after"))  # within the store's 3 s for a connection
    assert [r.id for r in store.list()] == ["inv-after"]


def test_a_server_lost_before_a_call_is_recorded_fails_it_static_and_unrun(
    pg_server: PgServer, pg_database: str, tmp_path: Path, hook: list[Any],
) -> None:
    ran: list[str] = []
    hook.append(lambda arguments: ran.append(arguments["key"]))
    host = pg_host(pg_database, tmp_path / "data")
    try:
        assert host.invoke_sync("pg.hook", {"key": "before"}).ok
        pg_server.stop()
        try:
            outcome = host.invoke_sync("pg.hook", {"key": "down"})
        finally:
            pg_server.start()
        assert outcome.status is OutcomeStatus.FAILED and outcome.failure is not None
        assert (outcome.failure.kind.value, outcome.failure.reason_code,
                outcome.failure.retryable) == ("UPSTREAM_UNAVAILABLE",
                                               "tool.upstream_unavailable.record_store", True)
        assert ran == ["before"]  # not run: nothing was recorded
        # Back again: the same host serves the next call.
        assert host.invoke_sync("pg.hook", {"key": "after"}).ok
        assert ran == ["before", "after"]
        assert [r.state for r in host.pipeline.invocations.list()] == [
            InvocationState.SUCCEEDED] * 2
    finally:
        host.close()


def test_a_server_lost_mid_call_leaves_no_row_stuck(
    pg_server: PgServer, pg_database: str, tmp_path: Path, hook: list[Any], no_grace: None,
) -> None:
    """The tool runs; the server goes before its result is written: the call ends
    INTERRUPTED (it took effect, and no row says so); the row is left ``running`` under this
    live process (never GONE while it lives), and once it is gone any host settles it."""
    hook.append(lambda arguments: pg_server.stop())
    host = pg_host(pg_database, tmp_path / "data")
    other = pg_host(pg_database, tmp_path / "other")
    try:
        try:
            outcome = host.invoke_sync("pg.hook", {"key": "k"})
        finally:
            pg_server.start()
        assert outcome.status is OutcomeStatus.FAILED and outcome.failure is not None
        assert (outcome.failure.reason_code, outcome.failure.retryable) == (
            "tool.internal.interrupted", False)
        hook.clear()
        (row,) = host.pipeline.invocations.list()
        assert row.state is RUNNING  # the server was gone: nothing could be written
        (left,) = other.recover()
        assert left.action is RecoveryAction.LEFT  # its process lives
        assert host.invoke_sync("pg.hook", {"key": "after"}).ok
        host.close()
        (settled,) = other.recover()
        assert settled.action is RecoveryAction.FAILED
        row = other.pipeline.invocations.get(row.id)
        assert (row.state, row.reason_code) == (FAILED, "tool.internal.interrupted")
    finally:
        host.close()
        other.close()


def test_a_host_writes_the_end_it_could_not_write_once_the_server_is_back(
    pg_server: PgServer, pg_database: str, tmp_path: Path, hook: list[Any],
) -> None:
    """As above, but the host lives on: its own recovery (``toolhost serve`` runs it every
    TOOLHOST_RECOVER_INTERVAL_S) writes the INTERRUPTED end once the server is back, so the
    row is not left ``running`` for the life of the process, and without a restart."""
    hook.append(lambda arguments: pg_server.stop())
    host = pg_host(pg_database, tmp_path / "data")
    try:
        try:
            outcome = host.invoke_sync("pg.hook", {"key": "k"})
        finally:
            pg_server.start()
        hook.clear()
        assert outcome.failure is not None
        (row,) = host.pipeline.invocations.list()
        assert row.state is RUNNING
        (own,) = host.recover()
        assert (own.invocation_id, own.action) == (row.id, RecoveryAction.FAILED)
        row = host.pipeline.invocations.get(row.id)
        assert (row.state, row.reason_code) == (FAILED, "tool.internal.interrupted")
    finally:
        host.close()


def test_a_host_whose_lease_is_cut_mid_call_finishes_it(
    pg_database: str, tmp_path: Path, hook: list[Any], no_grace: None,
) -> None:
    """Host A's lease session is cut while its call runs (an operator's
    pg_terminate_backend): A takes its lock again, so host B's recovery leaves the row, and
    A's result is recorded."""
    a = pg_host(pg_database, tmp_path / "a")
    b = pg_host(pg_database, tmp_path / "b")
    looked_at: list[RecoveryAction] = []

    def cut_off_then_recover(arguments: Mapping[str, Any]) -> None:
        (row,) = b.pipeline.invocations.list(state=RUNNING)
        assert row.owner is not None
        backend = lease_backend(pg_database, row.owner)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
        session_ends(pg_database, backend)
        looked_at.extend(r.action for r in b.recover())

    hook.append(cut_off_then_recover)
    try:
        outcome = a.invoke_sync("pg.hook", {"key": "k"})
        assert looked_at == [RecoveryAction.LEFT]
        assert outcome.ok, outcome.failure
        (row,) = b.pipeline.invocations.list()
        assert (row.state, row.result_content) == (InvocationState.SUCCEEDED, "k")
    finally:
        a.close()
        b.close()


def test_a_row_settled_elsewhere_mid_call_is_left_as_settled(
    pg_database: str, tmp_path: Path, hook: list[Any],
) -> None:
    """Host A cut off long enough for host B to find it gone and settle its row (a
    partition): A's call, finishing, must not write over B's settlement; it ends
    INTERRUPTED. (B's settle is made directly: a partition cannot be made here.)"""
    a = pg_host(pg_database, tmp_path / "a")
    b = pg_host(pg_database, tmp_path / "b")

    def settled_elsewhere(arguments: Mapping[str, Any]) -> None:
        (row,) = b.pipeline.invocations.list(state=RUNNING)
        assert b.pipeline.invocations.settle(
            row.id, from_owner=row.owner, to=FAILED, reason_code="tool.internal.interrupted",
            failure_kind="INTERNAL", retryable=False)

    hook.append(settled_elsewhere)
    try:
        outcome = a.invoke_sync("pg.hook", {"key": "k"})
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.internal.interrupted"
        (row,) = b.pipeline.invocations.list()
        assert (row.state, row.reason_code, row.result_content) == (
            FAILED, "tool.internal.interrupted", None)
    finally:
        a.close()
        b.close()


def test_toolhost_uses_postgres_when_the_url_is_set(
    pg_database: str, tmp_path: Path,
) -> None:
    host = pg_host(pg_database, tmp_path / "data")
    try:
        assert type(host.pipeline.invocations).__name__ == "PostgresInvocationStore"
        assert host.invoke_sync("pg.hook", {"key": "k"}).ok
    finally:
        host.close()
    assert not (tmp_path / "data" / "toolhost.db").exists()
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT tool_name, state FROM tool_invocations").fetchall() == [
            ("pg.hook", "succeeded")]


def test_records_read_back_as_sqlite_reads_them(
    stores: Callable[[], PostgresInvocationStore], tmp_path: Path,
) -> None:
    from toolhost._adapters.sqlite_db import connect
    from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore

    sqlite = SQLiteInvocationStore(connect(tmp_path / "t.db"))
    pg = stores()
    try:
        for store in (sqlite, pg):
            store.insert(record(id="b", arguments={"z": "\u202e", "a": [1.5, None]}))
            store.insert(record(id="a", policy=None, created_at=DEFAULT_INSTANT))
        assert pg.list() == sqlite.list()
        assert list(pg.pending(limit=5)) == list(sqlite.pending(limit=5))
    finally:
        sqlite.close()
