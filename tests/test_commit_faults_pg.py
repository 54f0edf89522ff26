"""A COMMIT whose reply is lost, on the PostgreSQL record store (``pg_invocations``).

The server may take a COMMIT and the connection drop before its reply arrives: the client
sees the connection's error for a transaction that is committed. Replayed write by write,
such a batch re-inserted rows that exist and failed calls whose rows are durable, leaving a
live host's ``running`` rows running. The store now asks the server what became of the
transaction (by its id; a session still holding it is ended first), and a statement made
alone whose reply is lost counts as made when its row reads as the statement left it.

The fault is injected at psycopg's connection, the boundary the store talks to: the real
COMMIT (or statement) runs, or with ``sent=False`` never reaches the server, then the
connection is dropped (``pgconn.finish()``) and ``OperationalError`` raised, as libpq does
when the socket dies. Run against the real server of tests/pg_server.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import pg_database, pg_server
from test_group_commit import Bodies, record
from test_group_commit_properties import pipeline_host_plugin

from toolhost import OutcomeStatus
from toolhost._adapters.pg_invocations import PostgresInvocationStore
from toolhost._composition import Host
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationState
from toolhost._model.settings import Settings
from toolhost.testing import host_for

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

SUCCEEDED = InvocationState.SUCCEEDED
IDLE = psycopg.pq.TransactionStatus.IDLE


class LostReply:
    """Drops the connection around the ``nth`` call of psycopg's ``Connection.commit`` (or of
    ``Connection.execute`` for statements starting with ``prefix``), after the real call
    (``sent``) or instead of it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, method: str, *, nth: int = 1,
                 sent: bool = True, prefix: str = "") -> None:
        self.dropped = 0
        seen = 0
        real = getattr(psycopg.Connection, method)

        def lost(conn: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
            nonlocal seen
            if method == "execute" and not str(args[0]).startswith(prefix):
                return real(conn, *args, **kwargs)
            if method == "commit" and conn.info.transaction_status is IDLE:
                return real(conn)  # nothing to commit: psycopg leaves the server alone
            seen += 1
            if seen != nth:
                return real(conn, *args, **kwargs)
            if sent:
                real(conn, *args, **kwargs)
            conn.pgconn.finish()  # the socket is gone: libpq's state is BAD
            self.dropped += 1
            raise psycopg.OperationalError(
                "consuming input failed: server closed the connection unexpectedly")

        monkeypatch.setattr(psycopg.Connection, method, lost)


@pytest.fixture
def bodies() -> Bodies:
    return Bodies()


@pytest.fixture
def host(pg_database: str, tmp_path: Path, bodies: Bodies) -> Iterator[Host]:
    h = host_for({"fx-dist": pipeline_host_plugin(bodies)}, data_dir=tmp_path,
                 settings=Settings(env={"TOOLHOST_DATABASE_URL": pg_database}))
    assert h.pipeline.invocations.count() == 0  # opened (and migrated) before any fault
    yield h
    h.close()


def stored(pg_database: str) -> dict[str, InvocationState]:
    """Every row's state, read by another store."""
    other = PostgresInvocationStore(pg_database, timeout=3)
    try:
        return {r.id: r.state for r in other.list()}
    finally:
        other.close()


def concurrent_calls(host: Host) -> list[Any]:
    """Six reads and three writes in flight together: their rows go in two group commits
    (the writers' running rows with the reads' rows, then the writers' outcomes)."""
    run = host.start_run()

    async def calls() -> list[Any]:
        return await asyncio.gather(
            *(host.invoke("fx.read", {"x": f"r{i}"}, run=run) for i in range(6)),
            *(host.invoke("fx.write", {"x": f"w{i}"}, run=run) for i in range(3)))

    return asyncio.run(calls())


@pytest.mark.parametrize("nth", [1, 2], ids=["running-rows", "outcomes"])
def test_a_batch_committed_whose_reply_is_lost_is_answered_as_its_rows_say(
    host: Host, bodies: Bodies, pg_database: str, monkeypatch: pytest.MonkeyPatch, nth: int,
) -> None:
    """The server took the batch's COMMIT and the reply was lost: every call is answered as
    its committed row says (succeeded), no row is left running, no row written twice, and
    each writer's body ran once."""
    lost = LostReply(monkeypatch, "commit", nth=nth)
    outcomes = concurrent_calls(host)
    assert lost.dropped == 1
    assert [(o.status, o.content) for o in outcomes] == [
        (OutcomeStatus.SUCCEEDED, x) for x in (*(f"r{i}" for i in range(6)),
                                               *(f"w{i}" for i in range(3)))]
    assert stored(pg_database) == {o.invocation_id: SUCCEEDED for o in outcomes}
    assert sorted(bodies.ran) == ["w0", "w1", "w2"]


@pytest.mark.parametrize("nth", [1, 2], ids=["running-rows", "outcomes"])
def test_a_batch_whose_commit_never_reached_the_server_is_made_again(
    host: Host, bodies: Bodies, pg_database: str, monkeypatch: pytest.MonkeyPatch, nth: int,
) -> None:
    """The connection dropped before the COMMIT reached the server: the transaction rolled
    back, and each write made again alone is committed, once."""
    lost = LostReply(monkeypatch, "commit", nth=nth, sent=False)
    outcomes = concurrent_calls(host)
    assert lost.dropped == 1
    assert {o.status for o in outcomes} == {OutcomeStatus.SUCCEEDED}
    assert stored(pg_database) == {o.invocation_id: SUCCEEDED for o in outcomes}
    assert sorted(bodies.ran) == ["w0", "w1", "w2"]


@pytest.mark.parametrize("prefix", ["INSERT INTO tool_invocations", "UPDATE tool_invocations"],
                         ids=["running-row", "outcome"])
def test_a_write_alone_committed_whose_reply_is_lost_counts_as_made(
    host: Host, bodies: Bodies, pg_database: str, monkeypatch: pytest.MonkeyPatch,
    prefix: str,
) -> None:
    """A call alone (its writes are single statements, no group commit): the server
    committed its running row (or its outcome) and the reply was lost. The call is answered
    as its row says, the row is not left running, and its body ran once."""
    lost = LostReply(monkeypatch, "execute", prefix=prefix)
    outcome = asyncio.run(host.invoke("fx.write", {"x": "w"}))
    assert lost.dropped == 1
    assert (outcome.status, outcome.content) == (OutcomeStatus.SUCCEEDED, "w")
    assert stored(pg_database) == {outcome.invocation_id: SUCCEEDED}
    assert bodies.ran == ["w"]


def test_a_write_alone_that_never_reached_the_server_fails_as_before(
    host: Host, bodies: Bodies, pg_database: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The running row's INSERT never reached the server: nothing is recorded, the body does
    not run, and the call is answered RECORD_STORE, retryable."""
    lost = LostReply(monkeypatch, "execute", prefix="INSERT INTO tool_invocations", sent=False)
    outcome = asyncio.run(host.invoke("fx.write", {"x": "w"}))
    assert lost.dropped == 1
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        host_reasons.RECORD_STORE, True)
    assert stored(pg_database) == {}
    assert bodies.ran == []


# ------------------------------------------------------------------ the transaction's fate


@pytest.fixture
def store(pg_database: str) -> Iterator[PostgresInvocationStore]:
    s = PostgresInvocationStore(pg_database, timeout=3)
    yield s
    s.close()


def open_transaction(pg_database: str, invocation_id: str) -> tuple[
        psycopg.Connection[Any], str, int]:
    """A session that inserted a row and holds its transaction open: it, the transaction's
    id and the session's backend pid."""
    conn = psycopg.connect(pg_database, autocommit=True)
    cursor = conn.execute("BEGIN; SELECT pg_current_xact_id()::text")
    cursor.nextset()
    row = cursor.fetchone()
    assert row is not None
    conn.execute("INSERT INTO tool_invocations (id, run_id, principal_id, scopes, tool_name, "
                 "arguments, state, artifact_refs, created_at) VALUES (%s, 'run', 'p', '[]', "
                 "'fx.write', '{}', 'running', '[]', '2026-01-01')", (invocation_id,))
    return conn, str(row[0]), conn.info.backend_pid


def test_a_transaction_still_open_on_its_lost_session_is_ended_and_not_committed(
    store: PostgresInvocationStore, pg_database: str,
) -> None:
    """A transaction whose session the server still runs (it has not yet seen the connection
    end) is in progress: its session is ended, so it rolls back, and it did not commit."""
    conn, xid, pid = open_transaction(pg_database, "open")
    try:
        assert store._committed(xid, pid) is False
        assert stored(pg_database) == {}
        with pytest.raises(psycopg.OperationalError):  # its session was ended
            conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_committed_transaction_is_known_committed(
    store: PostgresInvocationStore, pg_database: str,
) -> None:
    conn, xid, pid = open_transaction(pg_database, "done")
    try:
        conn.execute("COMMIT")
        assert store._committed(xid, pid) is True
    finally:
        conn.close()
    assert list(stored(pg_database)) == ["done"]


def test_a_store_write_after_a_lost_reply_is_not_a_duplicate(
    store: PostgresInvocationStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An insert whose reply was lost counts as made once; inserting the same row again is
    still refused as the port says."""
    lost = LostReply(monkeypatch, "execute", prefix="INSERT INTO tool_invocations")
    store.insert(record(id="once"))
    assert lost.dropped == 1
    with pytest.raises(ValueError, match="already recorded"):
        store.insert(record(id="once"))
    assert store.count() == 1


def test_a_failed_rollback_leaves_no_session_inside_its_transaction(
    store: PostgresInvocationStore, pg_database: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch ended by a write's error whose ROLLBACK fails (not run): the error that ended
    it propagates, the session is closed rather than lent again inside the transaction, and
    the next writes, alone and batched, are committed (read by another store)."""
    real = psycopg.Connection.rollback
    failed: list[int] = []

    def rollback(conn: psycopg.Connection[Any]) -> None:
        if conn.info.transaction_status is IDLE or failed:
            return real(conn)
        failed.append(conn.info.backend_pid)
        raise psycopg.OperationalError("rollback failed")

    monkeypatch.setattr(psycopg.Connection, "rollback", rollback)
    with pytest.raises(RuntimeError, match="a write failed"), store.transaction():
        store.insert(record(id="rolled-back"))
        raise RuntimeError("a write failed")
    assert len(failed) == 1
    store.insert(record(id="alone"))
    with store.transaction():
        store.insert(record(id="batched"))
    assert sorted(stored(pg_database)) == ["alone", "batched"]
