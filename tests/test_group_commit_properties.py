"""An adversarial review of the pipeline's group commit (toolhost._pipeline.group_commit).

Each test pins one property the group commit must keep: durability (an outcome returned only
once its row is committed, nothing lost, twice or left ``running``), failure isolation (the
store's transaction state after a failed batch, on SQLite and on a real PostgreSQL server),
cancellation at the new await, several loops on several threads sharing one store, and
recovery interleaved with queued writes. A test whose docstring starts "DEFECT:" fails on the
tree it was written against and says what is wrong; the others pin behaviour that holds.
Ordering is by events and the flush itself, never by sleeps; a "pass" is one turn of the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Closes, make_plugin, make_spec
from pg_server import pg_database, pg_server
from test_group_commit import (
    Bodies,
    Spy,
    open_store,
    pipeline_host,
    record,
    rows,
    with_one_held,
)

from toolhost import Idempotency, OutcomeStatus, SideEffect, Tool
from toolhost._adapters.pg_invocations import PostgresInvocationStore
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._composition import Host
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationState
from toolhost._model.settings import Settings
from toolhost._pipeline.group_commit import GroupCommit
from toolhost._pipeline.recovery import RecoveryAction
from toolhost.testing import host_for

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

RUNNING, SUCCEEDED, FAILED = (InvocationState.RUNNING, InvocationState.SUCCEEDED,
                              InvocationState.FAILED)


@pytest.fixture
def bodies() -> Bodies:
    return Bodies()


@pytest.fixture
def host(bodies: Bodies) -> Iterator[Host]:
    h = pipeline_host(bodies)
    yield h
    h.close()


def passes(loop: asyncio.AbstractEventLoop, count: int) -> None:
    """Turn ``loop`` ``count`` times (each turn runs what was ready at its start)."""
    for _ in range(count):
        loop.call_soon(loop.stop)
        loop.run_forever()


def on_next_flush(commits: GroupCommit, before: Callable[[], object]) -> None:
    """Run ``before()`` when the next flush starts, its writes queued and none made yet."""
    real_flush = commits._flush

    def flush(batch: Any) -> None:
        commits._flush = real_flush  # type: ignore[method-assign]
        try:
            before()
        finally:  # a hook that raises must not leave the batch unflushed
            real_flush(batch)

    commits._flush = flush  # type: ignore[method-assign]


# ------------------------------------------------------------------ the store after a failure


def test_after_a_failed_batch_the_connection_is_out_of_its_transaction_and_rows_are_durable(
    tmp_path: Path, closes: Closes,
) -> None:
    """A batch that failed (a refused insert, then a failed COMMIT) leaves the SQLite
    connection outside any transaction: the replayed rows are visible from another
    connection, and the next batch opens a transaction of its own."""
    store = closes(open_store(tmp_path))
    store.insert(record(id="taken"))
    spy = Spy(store)
    commits = GroupCommit(lambda: store)

    async def batch(*writes: Callable[[], Any]) -> list[Any]:
        for _ in writes:
            commits.enter()
        try:
            return await asyncio.gather(*(commits.write(w) for w in writes),
                                        return_exceptions=True)
        finally:
            for _ in writes:
                commits.leave()

    first = asyncio.run(batch(lambda: store.insert(record(id="a")),
                              lambda: store.insert(record(id="taken"))))
    assert first[0] is None and isinstance(first[1], ValueError)
    assert not store._conn.in_transaction
    spy.fail_commit = True
    second = asyncio.run(batch(lambda: store.insert(record(id="b")),
                               lambda: store.insert(record(id="c"))))
    assert second == [None, None]
    assert not store._conn.in_transaction
    third = asyncio.run(batch(lambda: store.insert(record(id="d")),
                              lambda: store.insert(record(id="e"))))
    assert third == [None, None]
    assert spy.transactions == 3
    other = connect(tmp_path / DATABASE_NAME)
    try:  # committed, not merely visible on the connection that wrote them
        assert sorted(r[0] for r in other.execute("SELECT id FROM tool_invocations")) == [
            "a", "b", "c", "d", "e", "taken"]
    finally:
        other.close()


def test_an_interrupt_during_the_replay_leaves_no_caller_waiting_for_ever(
    tmp_path: Path, closes: Closes,
) -> None:
    """DEFECT: a BaseException (KeyboardInterrupt, SystemExit) raised by a write during the
    replay alone escapes ``_one_by_one``: the writes queued after it are never made nor
    settled, and their callers wait for ever, even when cancelled (``write`` loops until
    ``written``), so ``asyncio.run``'s shutdown hangs. The batch path settles everyone."""
    store = closes(open_store(tmp_path))
    store.insert(record(id="taken"))
    commits = GroupCommit(lambda: store)

    def interrupted() -> None:
        raise KeyboardInterrupt  # a SIGINT landing in this write

    writes: list[Callable[[], Any]] = [
        lambda: store.insert(record(id="taken")),  # fails the batch: the replay follows
        interrupted,
        lambda: store.insert(record(id="after")),
    ]
    loop = asyncio.new_event_loop()
    try:
        for _ in writes:
            commits.enter()
        tasks = [loop.create_task(commits.write(w)) for w in writes]
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        for task in tasks:  # as asyncio.run does on its way out
            task.cancel()
        passes(loop, 10)
        assert [task.done() for task in tasks] == [True, True, True]
    finally:
        for task in tasks:
            if not task.done():  # let the test end; the loop is abandoned
                task.get_coro().close()
        loop.close()


# ------------------------------------------------------------------ cancellation at the await


def test_a_call_cancelled_twice_while_its_outcome_is_queued_takes_back_every_cancel(
    host: Host, bodies: Bodies,
) -> None:
    """DEFECT: two cancel requests reaching a call while its outcome is queued (a timeout and
    its TaskGroup, say) are absorbed by ``write``, but ``Pipeline._write`` takes back only
    one (``uncancel`` once): the call returns its Outcome with ``cancelling() == 1``, so a
    TaskGroup later in that task re-raises CancelledError instead of its errors."""
    commits = host.pipeline._commits

    async def calls() -> Any:
        call = asyncio.ensure_future(host.invoke("fx.read", {"x": "v"}))

        def cancel_twice() -> None:
            call.cancel()
            call.cancel()

        on_next_flush(commits, cancel_twice)
        outcome = await call
        return outcome, call.cancelling()

    outcome, cancelling = asyncio.run(with_one_held(host, bodies, calls))
    (row,) = rows(host, "fx.read")
    assert (outcome.status, outcome.invocation_id, row.state) == (
        OutcomeStatus.SUCCEEDED, row.id, SUCCEEDED)
    assert cancelling == 0


def test_a_writer_cancelled_again_while_its_cancelled_row_is_settled_still_ends_it(
    host: Host, bodies: Bodies,
) -> None:
    """A writer cancelled while its running row is queued, and cancelled again while the
    row's RUN_CANCELLED end is queued in turn: the body never runs, the row ends failed
    RUN_CANCELLED (never left running), and the caller is told CancelledError once."""
    commits = host.pipeline._commits

    async def calls() -> int:
        call = asyncio.ensure_future(host.invoke("fx.write", {"x": "w"}))
        def cancel_now_and_at_the_next_flush() -> None:
            call.cancel()
            on_next_flush(commits, call.cancel)

        on_next_flush(commits, cancel_now_and_at_the_next_flush)
        with pytest.raises(asyncio.CancelledError):
            await call
        return call.cancelling()

    cancelling = asyncio.run(with_one_held(host, bodies, calls))
    assert bodies.ran == []
    (row,) = rows(host, "fx.write")
    assert (row.state, row.reason_code) == (FAILED, host_reasons.RUN_CANCELLED)
    assert host.pipeline.invocations.list(state=RUNNING) == []
    assert cancelling == 1  # the first cancel goes on; the second was answered and taken back


def test_a_run_cancelled_while_an_outcome_is_queued_returns_the_outcome_the_row_records(
    host: Host, bodies: Bodies,
) -> None:
    """The run's own cancellation (``Run.cancellation``, how the MCP server cancels) set
    while a writer's outcome is queued: the body already ran, so the call answers as its
    committed row says, succeeded, and never leaves the row running."""
    commits = host.pipeline._commits

    async def calls() -> Any:
        run = host.start_run()
        call = asyncio.ensure_future(host.invoke("fx.write", {"x": "w"}, run=run))
        # The writer's first flush carries its running row; the second its outcome.
        on_next_flush(commits, lambda: on_next_flush(commits, run.cancellation.cancel))
        return await call

    outcome = asyncio.run(with_one_held(host, bodies, calls))
    (row,) = rows(host, "fx.write")
    assert (outcome.status, outcome.invocation_id, row.state) == (
        OutcomeStatus.SUCCEEDED, row.id, SUCCEEDED)
    assert bodies.ran == ["w"]


# ------------------------------------------------------------------ threads and recovery


def test_several_loops_on_several_threads_share_one_store_each_row_once(
    host: Host, bodies: Bodies,
) -> None:
    """Four threads, each its own loop with eight calls in flight, on one host (one SQLite
    connection): every call answered succeeded, each row committed once (seen from another
    connection), none left running, each writer's body run once."""
    threads, per_thread = 4, 8
    start = threading.Barrier(threads)
    outcomes: dict[int, list[Any]] = {}
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        async def calls() -> list[Any]:
            run = host.start_run()
            return await asyncio.gather(*(
                host.invoke("fx.write" if i % 2 else "fx.read", {"x": f"{n}-{i}"}, run=run)
                for i in range(per_thread)))

        try:
            start.wait()
            outcomes[n] = asyncio.run(calls())
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    answered = [o for n in range(threads) for o in outcomes[n]]
    assert {o.status for o in answered} == {OutcomeStatus.SUCCEEDED}
    assert sorted(o.content for o in answered) == sorted(
        f"{n}-{i}" for n in range(threads) for i in range(per_thread))
    other = connect(host.data_dir / DATABASE_NAME)
    try:
        stored = dict(other.execute("SELECT id, state FROM tool_invocations").fetchall())
    finally:
        other.close()
    assert set(stored) == {o.invocation_id for o in answered}
    assert set(stored.values()) == {"succeeded"}
    assert sorted(bodies.ran) == sorted(
        f"{n}-{i}" for n in range(threads) for i in range(per_thread) if i % 2)


def test_recover_while_outcomes_are_queued_leaves_them_and_settles_its_own_later(
    host: Host, bodies: Bodies,
) -> None:
    """``recover`` run while writers' outcomes are queued leaves their rows to them (owner
    alive); a writer whose outcome a batch could not record is INTERRUPTED and its row is
    settled by the next ``recover`` (``_settle_own``), once, while the others succeeded."""
    spy = Spy(host.pipeline.invocations)
    real_settle = spy.store.settle
    refusing = True

    def settle(invocation_id: str, **fields: Any) -> bool:
        if refusing and spy.store.get(invocation_id).arguments.get("x") == "bad":
            spy.refuse.add(invocation_id)
        return bool(real_settle(invocation_id, **fields))

    spy.store.settle = settle
    commits = host.pipeline._commits
    reports: list[Any] = []

    async def calls() -> list[Any]:
        run = host.start_run()
        writers = [asyncio.ensure_future(host.invoke("fx.write", {"x": x}, run=run))
                   for x in ("ok1", "bad", "ok2")]

        def recover_now() -> None:  # the outcomes are queued, none committed yet
            reports.append(asyncio.ensure_future(host.pipeline.recover()))

        on_next_flush(commits, lambda: on_next_flush(commits, recover_now))
        return list(await asyncio.gather(*writers))

    ok1, bad, ok2 = asyncio.run(with_one_held(host, bodies, calls))
    assert (ok1.status, ok2.status) == (OutcomeStatus.SUCCEEDED,) * 2
    assert bad.failure is not None and bad.failure.reason_code == host_reasons.INTERRUPTED
    (first_report,) = reports
    assert all(r.action is RecoveryAction.LEFT for r in first_report.result())
    by_x = {r.arguments["x"]: r for r in rows(host, "fx.write")}
    assert (by_x["ok1"].state, by_x["bad"].state, by_x["ok2"].state) == (
        SUCCEEDED, RUNNING, SUCCEEDED)
    refusing = False
    spy.refuse.clear()
    recovered = host.recover()
    assert [(r.invocation_id, r.action) for r in recovered] == [
        (by_x["bad"].id, RecoveryAction.FAILED)]
    row = host.pipeline.row(by_x["bad"].id)
    assert (row.state, row.reason_code) == (FAILED, host_reasons.INTERRUPTED)
    assert host.recover() == []
    assert sorted(bodies.ran) == ["bad", "ok1", "ok2"]


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[PostgresInvocationStore]:
    store = PostgresInvocationStore(pg_database, timeout=3)
    yield store
    store.close()


def test_postgres_a_server_error_in_a_batch_fails_only_its_write_and_the_session_recovers(
    pg_store: PostgresInvocationStore, pg_database: str,
) -> None:
    """On a real PostgreSQL server, a write that the server refuses inside the batch aborts
    the whole transaction: every other write is made again alone and committed (seen from
    another store), only the bad one fails, and the next batch works on the pool."""
    store = pg_store
    commits = GroupCommit(lambda: store)

    def server_error() -> None:
        with store._connection() as conn:
            conn.execute("SELECT 1 / 0")  # aborts the transaction it runs in

    async def batch(*writes: Callable[[], Any]) -> list[Any]:
        for _ in writes:
            commits.enter()
        try:
            return await asyncio.gather(*(commits.write(w) for w in writes),
                                        return_exceptions=True)
        finally:
            for _ in writes:
                commits.leave()

    first = asyncio.run(batch(lambda: store.insert(record(id="a")), server_error,
                              lambda: store.insert(record(id="b"))))
    assert first[0] is None and first[2] is None
    assert isinstance(first[1], Exception) and "division by zero" in str(first[1])
    second = asyncio.run(batch(lambda: store.insert(record(id="c")),
                               lambda: store.insert(record(id="d"))))
    assert second == [None, None]
    other = PostgresInvocationStore(pg_database, timeout=3)
    try:
        assert sorted(r.id for r in other.list()) == ["a", "b", "c", "d"]
    finally:
        other.close()


def test_postgres_concurrent_calls_through_the_pipeline_are_group_committed(
    pg_database: str, tmp_path: Path, bodies: Bodies,
) -> None:
    """Concurrent calls through the real pipeline on PostgreSQL share transactions, and
    every outcome's row is committed (seen from another store) as it says."""
    h = host_for({"fx-dist": pipeline_host_plugin(bodies)}, data_dir=tmp_path,
                 settings=Settings(env={"TOOLHOST_DATABASE_URL": pg_database}))
    try:
        spy = Spy(h.pipeline.invocations)
        run = h.start_run()

        async def calls() -> list[Any]:
            return await asyncio.gather(
                *(h.invoke("fx.read", {"x": f"r{i}"}, run=run) for i in range(6)),
                *(h.invoke("fx.write", {"x": f"w{i}"}, run=run) for i in range(3)))

        outcomes = asyncio.run(calls())
        assert {o.status for o in outcomes} == {OutcomeStatus.SUCCEEDED}
        assert spy.transactions == 2 and all(inside for _, _, inside in spy.writes)
        other = PostgresInvocationStore(pg_database, timeout=3)
        try:
            stored = {r.id: r.state for r in other.list()}
        finally:
            other.close()
        assert stored == {o.invocation_id: SUCCEEDED for o in outcomes}
    finally:
        h.close()


def pipeline_host_plugin(bodies: Bodies) -> Any:
    """The fixture plugin ``pipeline_host`` serves, for a host built on other settings."""
    return make_plugin(tools=[
        Tool(make_spec(name="fx.write", idempotency=Idempotency.NON_IDEMPOTENT,
                       side_effect=SideEffect.WORKSPACE_WRITE, allow_parallel=False),
             call=bodies.write),
        Tool(make_spec(name="fx.read"), call=bodies.read),
        Tool(make_spec(name="fx.hold"), call=bodies.hold),
    ])
