"""Review of the record stores' fault handling (D213, D214): the cases it missed.

PostgreSQL. A session lost in the middle of a group commit (a write's reply lost, before any
COMMIT) was only rolled back on the client's side. When the server has not seen the
connection end (a network partition: no FIN, no RST), its transaction stays open, holding every
row it wrote, until ``idle_in_transaction_session_timeout``; the replay of the batch write by
write then waited ``lock_timeout`` on each of those rows and failed calls the server would have
taken. The partition is made at the boundary the store talks to, psycopg's connection: the
socket's descriptor is pointed at a socket whose peer is closed (libpq reads end of file and
reports the connection lost), while a duplicate of the real descriptor keeps the server's end
open. A statement made alone that reached its (idle) session late, unread when the store
looked, ran after the write was reported failed: the lost session was ended only while seen
running it. A write error caught inside a batch aborted the transaction, and its COMMIT, which
the server answers with ROLLBACK, ended the block as committed. A nested ``transaction()`` (the
port says it is not nested) silently made the outer block's later writes alone, committed
whatever the outer block then did.

SQLite. After a failed ROLLBACK the store reopened its file with ``connect``, which creates a
database that is not there: a file moved or deleted meanwhile became a new, empty one without
the schema. And a store closed after a failed ROLLBACK reopened the file at its next use, a
connection nothing would close.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import pg_database, pg_server
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from test_commit_faults import committed_ids, failing
from test_commit_faults_pg import LostReply, concurrent_calls, stored
from test_group_commit import Bodies, open_store, record
from test_group_commit_properties import pipeline_host_plugin

from toolhost import OutcomeStatus
from toolhost._adapters import pg_invocations
from toolhost._adapters.pg_invocations import PostgresInvocationStore
from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._composition import Host
from toolhost._model.invocations import InvocationState
from toolhost._model.settings import Settings, StoreUnavailable
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import host_for

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

SUCCEEDED = InvocationState.SUCCEEDED
INTRANS = psycopg.pq.TransactionStatus.INTRANS


class Partition:
    """Cuts a session off from the server, the server unaware, at the ``nth`` call of psycopg's
    ``Connection.execute`` (statements starting with ``prefix``) or ``Connection.commit`` made
    inside a transaction; the call then runs, and fails as libpq fails on a dead socket."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, method: str, *, nth: int = 1,
                 prefix: str = "") -> None:
        self.kept: list[int] = []  # the real sockets, open: the server's sessions live on
        seen = 0
        real = getattr(psycopg.Connection, method)

        def cut(conn: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
            nonlocal seen
            matches = method != "execute" or str(args[0]).startswith(prefix)
            if matches and conn.info.transaction_status is INTRANS:
                seen += 1
                if seen == nth:
                    self.cut_off(conn)
            return real(conn, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, method, cut)

    def cut_off(self, conn: psycopg.Connection[Any]) -> None:
        fd = conn.pgconn.socket
        self.kept.append(os.dup(fd))
        mine, peer = socket.socketpair()
        peer.close()  # reads see end of file, writes fail: as a connection the network lost
        os.dup2(mine.fileno(), fd)
        mine.close()

    def heal(self) -> None:
        for fd in self.kept:
            os.close(fd)
        self.kept.clear()


@pytest.fixture
def partition(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Partition]]:
    made: list[Partition] = []
    yield made
    for p in made:
        p.heal()


@pytest.fixture
def store(pg_database: str) -> Iterator[PostgresInvocationStore]:
    s = PostgresInvocationStore(pg_database, timeout=3)
    yield s
    s.close()


def open_sessions(pg_database: str) -> list[str]:
    """The states of the sessions of this database's toolhost pools, other than idle."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT state FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'toolhost' AND state <> 'idle'").fetchall()
    return [r[0] for r in rows]


def test_a_batch_cut_off_mid_way_leaves_no_transaction_holding_its_rows(
    store: PostgresInvocationStore, pg_database: str, monkeypatch: pytest.MonkeyPatch,
    partition: list[Partition],
) -> None:
    """A group commit whose session is lost at its second write, the server unaware: the
    connection's error propagates, the server's transaction is ended (no session is left
    idle in a transaction), and the batch's writes made again alone are committed at once,
    not refused after waiting on the rows the lost transaction held."""
    partition.append(Partition(monkeypatch, "execute", nth=2,
                               prefix="INSERT INTO tool_invocations"))
    with pytest.raises(psycopg.OperationalError), store.transaction():
        store.insert(record(id="a"))
        store.insert(record(id="b"))
    assert open_sessions(pg_database) == []
    store.insert(record(id="a"))
    store.insert(record(id="b"))
    assert sorted(stored(pg_database)) == ["a", "b"]


def test_a_batch_whose_commit_is_cut_off_is_rolled_back_and_made_again(
    store: PostgresInvocationStore, pg_database: str, monkeypatch: pytest.MonkeyPatch,
    partition: list[Partition],
) -> None:
    """The COMMIT never reaches the server, which still runs the session: the transaction is
    ended, not committed, and the connection's error propagates; the writes made again alone
    are committed."""
    partition.append(Partition(monkeypatch, "commit"))
    with pytest.raises(psycopg.OperationalError), store.transaction():
        store.insert(record(id="a"))
    assert open_sessions(pg_database) == []
    assert stored(pg_database) == {}
    store.insert(record(id="a"))
    assert sorted(stored(pg_database)) == ["a"]


@pytest.fixture
def host(pg_database: str, tmp_path: Path) -> Iterator[Host]:
    h = host_for({"fx-dist": pipeline_host_plugin(Bodies())}, data_dir=tmp_path,
                 settings=Settings(env={"TOOLHOST_DATABASE_URL": pg_database}))
    assert h.pipeline.invocations.count() == 0  # opened (and migrated) before any fault
    yield h
    h.close()


def test_calls_whose_batch_is_cut_off_mid_way_succeed(
    host: Host, pg_database: str, monkeypatch: pytest.MonkeyPatch,
    partition: list[Partition],
) -> None:
    """Nine calls in flight, their running rows' batch cut off at its third write: every call
    is answered succeeded and recorded so, none failed on a row the lost session held."""
    partition.append(Partition(monkeypatch, "execute", nth=3,
                               prefix="INSERT INTO tool_invocations"))
    outcomes = concurrent_calls(host)
    assert partition[0].kept
    assert [o.status for o in outcomes] == [OutcomeStatus.SUCCEEDED] * 9
    assert stored(pg_database) == {o.invocation_id: SUCCEEDED for o in outcomes}


def test_a_batch_whose_write_failed_on_the_server_never_ends_as_committed(
    store: PostgresInvocationStore, pg_database: str,
) -> None:
    """A write's error caught inside the block: the server aborted the transaction, and its
    COMMIT would be answered by a ROLLBACK that psycopg returns from quietly. The block ends
    raising, not as committed, and the writes before the failed one are not in the table."""
    with pytest.raises(psycopg.errors.InFailedSqlTransaction), store.transaction():
        store.insert(record(id="a"))
        with pytest.raises(psycopg.errors.NotNullViolation):
            store.insert(record(id="b", principal_id=None))
    assert stored(pg_database) == {}
    store.insert(record(id="a"))  # its session was left clean
    assert sorted(stored(pg_database)) == ["a"]


def test_a_lost_reply_on_a_compare_and_set_another_host_won_is_no_win(
    store: PostgresInvocationStore, pg_database: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two hosts move an approved row to running; the other host won, and this one's UPDATE
    ran (changing nothing) with its reply lost. The row holds the winner's owner, so this
    host is not told it won: the connection's error propagates (it cannot tell "lost the
    race" from "never ran"), and the row stays the winner's."""
    other = PostgresInvocationStore(pg_database, timeout=3)
    try:
        store.insert(record(id="x", state=InvocationState.APPROVED))
        assert other.transition("x", expected={InvocationState.APPROVED},
                                to=InvocationState.RUNNING, owner=other.owner(),
                                started_at=DEFAULT_INSTANT)
        lost = LostReply(monkeypatch, "execute", prefix="UPDATE tool_invocations")
        with pytest.raises(psycopg.OperationalError):
            store.transition("x", expected={InvocationState.APPROVED},
                             to=InvocationState.RUNNING, owner=store.owner(),
                             started_at=DEFAULT_INSTANT)
        assert lost.dropped == 1
        monkeypatch.undo()
        assert store.get("x").owner == other.owner()
    finally:
        other.close()


def stopped_sends(monkeypatch: pytest.MonkeyPatch, partition: Partition,
                  prefix: str) -> list[int]:
    """Replaces the statements starting with ``prefix`` made alone: the server's session is
    paused (SIGSTOP) before the statement is sent, so it arrives unread, then the client
    loses the connection, the server unaware. The paused sessions' pids."""
    paused: list[int] = []
    real = psycopg.Connection.execute

    def late(conn: psycopg.Connection[Any], query: Any, params: Any = None,
             **kwargs: Any) -> Any:
        if not str(query).startswith(prefix) or conn.info.transaction_status is INTRANS:
            return real(conn, query, params, **kwargs)
        pid = conn.info.backend_pid
        os.kill(pid, signal.SIGSTOP)
        paused.append(pid)
        sent = PostgresQuery(Transformer(conn))
        sent.convert(query, params)
        conn.pgconn.send_query_params(sent.query, sent.params, sent.types, sent.formats)
        conn.pgconn.flush()
        partition.cut_off(conn)
        conn.pgconn.finish()
        raise psycopg.OperationalError("consuming input failed: connection timed out")

    monkeypatch.setattr(psycopg.Connection, "execute", late)
    return paused


def test_a_write_alone_that_reaches_its_session_late_is_not_made_after_its_answer(
    store: PostgresInvocationStore, pg_database: str, monkeypatch: pytest.MonkeyPatch,
    partition: list[Partition],
) -> None:
    """A running row's INSERT, alone, reaches its session only after the client lost the
    connection and looked (the session was slow to read it). The insert is reported failed,
    so it must never be made: the lost session is ended whatever it is doing, and once it
    runs again it leaves without running the statement that waited for it."""
    monkeypatch.setattr(pg_invocations, "_SETTLE", 0.5)  # a paused session never ends
    partition.append(Partition(monkeypatch, "commit"))  # (only its cut_off is used)
    paused = stopped_sends(monkeypatch, partition[0], "INSERT INTO tool_invocations")
    try:
        with pytest.raises(psycopg.OperationalError):
            store.insert(record(id="late"))
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
    monkeypatch.undo()
    assert paused
    with psycopg.connect(pg_database, autocommit=True) as conn:
        for _ in range(500):  # the resumed session runs the statement, or ends: wait for it
            row = conn.execute("SELECT state, left(query, 6) FROM pg_stat_activity "
                               "WHERE pid = %s", (paused[0],)).fetchone()
            if row is None or row == ("idle", "INSERT"):
                break
            time.sleep(0.01)
    assert stored(pg_database) == {}


def test_a_nested_transaction_is_refused_and_the_outer_one_rolls_back_whole(
    store: PostgresInvocationStore, pg_database: str,
) -> None:
    """``transaction()`` is not nested (the port): inside one, another raises, and the outer
    block, ended by that error, commits nothing; no write was made alone meanwhile."""
    with pytest.raises(RuntimeError, match="not nested"), store.transaction():
        store.insert(record(id="outer"))
        with store.transaction():
            store.insert(record(id="inner"))
        store.insert(record(id="after"))
    assert stored(pg_database) == {}
    with store.transaction():  # the store is usable again on this thread
        store.insert(record(id="next"))
    assert sorted(stored(pg_database)) == ["next"]


# ------------------------------------------------------------------------------ SQLite


def test_a_database_gone_since_the_failed_rollback_is_not_made_anew(tmp_path: Path) -> None:
    """The file was moved away after a failed ROLLBACK closed the connection: the next use is
    StoreUnavailable naming the database, and no new, empty database takes its place."""
    store = open_store(tmp_path)
    failing(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    database = tmp_path / DATABASE_NAME
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in os.listdir(tmp_path):
        if name.startswith(DATABASE_NAME):
            os.replace(tmp_path / name, moved / name)
    with pytest.raises(StoreUnavailable, match=str(database)):
        store.insert(record(id="next"))
    assert not database.exists()
    for name in os.listdir(moved):  # put back: the store opens it at its next use
        os.replace(moved / name, tmp_path / name)
    store.insert(record(id="next"))
    assert committed_ids(tmp_path) == ["next"]
    store.close()


def test_a_store_closed_after_a_failed_rollback_stays_closed(tmp_path: Path) -> None:
    """Closed, the store is closed: a use after it fails as on any closed store, rather than
    open the file on a connection nothing will close."""
    store = open_store(tmp_path)
    failing(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        store.insert(record(id="late"))
    assert committed_ids(tmp_path) == []
