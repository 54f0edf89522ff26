"""Group commit (toolhost._pipeline.group_commit): concurrent calls' rows in one transaction.

What holds, on a real SQLite store: a call alone writes at once; calls in flight together
have their rows committed together, in queue order, each write answering as it would alone;
a batch that fails is rolled back and each write made again alone, so one bad write fails
only its own call and nothing is lost, written twice or left ``running``; and a caller
cancelled while its write is queued finds its row written and answered as the row says.
The tests order the calls with events and the flush itself, never with sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import Closes, make_plugin, make_spec

from toolhost import Idempotency, OutcomeStatus, SideEffect, Tool, ToolOutput
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._composition import Host
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._pipeline.group_commit import GroupCommit, WriteCancelled
from toolhost.testing import InvocationStoreContract, host_for

RUNNING, SUCCEEDED, FAILED = (InvocationState.RUNNING, InvocationState.SUCCEEDED,
                              InvocationState.FAILED)


class Spy:
    """Counts the store's transactions and where each write went (in one, or alone)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.transactions = 0
        self.open = False
        #: (method, invocation id, inside a transaction) per write attempted.
        self.writes: list[tuple[str, str, bool]] = []
        #: Invocation ids whose writes raise, as a lost disk would.
        self.refuse: set[str] = set()
        #: Makes the next transaction fail at its end, as a COMMIT that fails would.
        self.fail_commit = False
        real_transaction = store.transaction
        for name in ("insert", "settle", "transition"):
            setattr(store, name, self._spying(name, getattr(store, name)))

        @contextlib.contextmanager
        def transaction() -> Iterator[None]:
            self.transactions += 1
            with real_transaction():
                self.open = True
                try:
                    yield
                    if self.fail_commit:
                        self.fail_commit = False
                        raise sqlite3.OperationalError("disk I/O error")  # rolled back
                finally:
                    self.open = False

        store.transaction = transaction

    def _spying(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any, **kwargs: Any) -> Any:
            invocation_id = args[0].id if name == "insert" else args[0]
            self.writes.append((name, invocation_id, self.open))
            if invocation_id in self.refuse:
                raise sqlite3.OperationalError("disk I/O error")
            return real(*args, **kwargs)

        return write


def open_store(tmp_path: Path) -> SQLiteInvocationStore:
    return SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))


def record(**changes: Any) -> InvocationRecord:
    return InvocationStoreContract.record(**changes)


async def in_one_pass(commits: GroupCommit, *writes: Callable[[], Any]) -> list[Any]:
    """Queue ``writes`` in one pass of the loop, as concurrent calls do; each one's result
    or exception."""
    for _ in writes:
        commits.enter()  # calls in flight: their writes group
    try:
        return await asyncio.gather(*(commits.write(w) for w in writes),
                                    return_exceptions=True)
    finally:
        for _ in writes:
            commits.leave()


# ---------------------------------------------------------------------------- the queue


def test_writes_in_one_pass_are_one_transaction_in_order_each_with_its_answer(
    tmp_path: Path, closes: Closes,
) -> None:
    store = closes(open_store(tmp_path))
    spy = Spy(store)
    mine = store.owner()
    results = asyncio.run(in_one_pass(
        GroupCommit(lambda: store),
        lambda: store.insert(record(id="inv-1", state=RUNNING, owner=mine)),
        lambda: store.settle("inv-1", from_owner=mine, to=SUCCEEDED, result_structured=None, result_content="ok"),
        lambda: store.settle("inv-1", from_owner=mine, to=FAILED),  # settled just before
    ))
    assert results == [None, True, False]
    assert spy.transactions == 1
    assert [(name, inside) for name, _, inside in spy.writes] == [
        ("insert", True), ("settle", True), ("settle", True)]
    assert [(r.id, r.state, r.result_content) for r in store.list()] == [
        ("inv-1", SUCCEEDED, "ok")]


def test_a_write_alone_is_made_at_once_without_a_transaction(
        tmp_path: Path, closes: Closes) -> None:
    store = closes(open_store(tmp_path))
    spy = Spy(store)
    commits = GroupCommit(lambda: store)

    async def alone() -> None:
        commits.enter()
        try:
            await commits.write(lambda: store.insert(record()))
            assert store.count() == 1  # written before the await returned, no pass between
        finally:
            commits.leave()

    asyncio.run(alone())
    assert (spy.transactions, spy.writes) == (0, [("insert", "inv-1", False)])


def test_a_failed_batch_is_rolled_back_and_each_write_made_again_alone(
        tmp_path: Path, closes: Closes) -> None:
    store = closes(open_store(tmp_path))
    store.insert(record(id="taken"))
    spy = Spy(store)
    results = asyncio.run(in_one_pass(
        GroupCommit(lambda: store),
        lambda: store.insert(record(id="a")),
        lambda: store.insert(record(id="taken")),  # already recorded: fails, alone too
        lambda: store.insert(record(id="b")),
    ))
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError)
    assert spy.transactions == 1
    assert spy.writes == [("insert", "a", True), ("insert", "taken", True),
                          ("insert", "a", False), ("insert", "taken", False),
                          ("insert", "b", False)]
    # Nothing lost, nothing twice.
    assert sorted(r.id for r in store.list()) == ["a", "b", "taken"]


def test_a_failed_commit_is_rolled_back_and_each_write_made_again_alone(
    tmp_path: Path, closes: Closes,
) -> None:
    store = closes(open_store(tmp_path))
    spy = Spy(store)
    spy.fail_commit = True
    mine = store.owner()
    store.insert(record(id="r", state=RUNNING, owner=mine))
    results = asyncio.run(in_one_pass(
        GroupCommit(lambda: store),
        lambda: store.insert(record(id="a")),
        lambda: store.settle("r", from_owner=mine, to=SUCCEEDED),
    ))
    # Alone, after the rollback, the settle still finds its row running, and wins it once.
    assert results == [None, True]
    assert spy.transactions == 1
    assert [(r.id, r.state) for r in store.list()] == [
        ("a", InvocationState.AWAITING_APPROVAL), ("r", SUCCEEDED)]


def test_a_store_without_transactions_commits_each_write_alone(
        tmp_path: Path, closes: Closes) -> None:
    class Plain:
        """A backend written before ``transaction`` existed."""

        def __init__(self, inner: SQLiteInvocationStore) -> None:
            self.inner = inner

        def insert(self, record: InvocationRecord) -> None:
            self.inner.insert(record)

    store = closes(open_store(tmp_path))
    plain = Plain(store)
    results = asyncio.run(in_one_pass(
        GroupCommit(lambda: plain),
        lambda: plain.insert(record(id="a")), lambda: plain.insert(record(id="b"))))
    assert results == [None, None]
    assert [r.id for r in store.list()] == ["a", "b"]


def test_a_caller_cancelled_while_queued_has_its_write_made_and_is_told_after(
    tmp_path: Path, closes: Closes,
) -> None:
    store = closes(open_store(tmp_path))
    commits = GroupCommit(lambda: store)
    rows_when_told: list[int] = []

    async def told(write: Callable[[], Any]) -> Any:
        try:
            return await commits.write(write)
        except WriteCancelled as cancelled:  # a task ending cancelled would drop its payload
            rows_when_told.append(store.count())
            return cancelled

    async def main() -> tuple[Any, Any]:
        commits.enter()
        commits.enter()
        first = asyncio.ensure_future(told(lambda: store.insert(record(id="a"))))
        second = asyncio.ensure_future(commits.write(lambda: store.insert(record(id="b"))))
        real_flush = commits._flush

        def flush(batch: Any) -> None:
            # Both are queued: the first caller gives up, and even wakes before the commit.
            first.cancel()
            assert store.count() == 0
            asyncio.get_running_loop().call_soon(real_flush, batch)

        commits._flush = flush  # type: ignore[method-assign]
        return await asyncio.gather(first, second, return_exceptions=True)

    cancelled, written = asyncio.run(main())
    assert rows_when_told == [2]  # told only once its write was made
    assert isinstance(cancelled, WriteCancelled) and cancelled.value() is None
    assert written is None
    assert [r.id for r in store.list()] == ["a", "b"]


# ---------------------------------------------------------------------------- the pipeline


class Bodies:
    """The fixture tools' bodies: what ran, and a read that holds until released."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

    async def write(self, arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        self.ran.append(arguments["x"])
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

    async def read(self, arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

    async def hold(self, arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        self.holding.set()
        await self.release.wait()
        return ToolOutput(structured={"echo": "held"}, content="held")


def pipeline_host(bodies: Bodies) -> Host:
    tools = [
        Tool(make_spec(name="fx.write", idempotency=Idempotency.NON_IDEMPOTENT,
                       side_effect=SideEffect.WORKSPACE_WRITE, allow_parallel=False),
             call=bodies.write),
        Tool(make_spec(name="fx.read"), call=bodies.read),
        Tool(make_spec(name="fx.hold"), call=bodies.hold),
    ]
    return host_for({"fx-dist": make_plugin(tools=tools)})


@pytest.fixture
def bodies() -> Bodies:
    return Bodies()


@pytest.fixture
def host(bodies: Bodies) -> Iterator[Host]:
    h = pipeline_host(bodies)
    yield h
    h.close()


def rows(host: Host, tool: str) -> list[InvocationRecord]:
    return host.pipeline.invocations.list(tool_name=tool)


async def with_one_held(host: Host, bodies: Bodies,
                        calls: Callable[[], Awaitable[Any]]) -> Any:
    """``calls()`` while another call is in flight (suspended in its body), so their writes
    group whatever else the loop holds; the held call is released after."""
    run = host.start_run()
    held = asyncio.ensure_future(host.invoke("fx.hold", {}, run=run))
    await bodies.holding.wait()
    try:
        return await calls()
    finally:
        bodies.release.set()
        assert (await held).status is OutcomeStatus.SUCCEEDED


def test_concurrent_calls_rows_are_committed_in_one_transaction(host: Host,
                                                                  bodies: Bodies) -> None:
    spy = Spy(host.pipeline.invocations)
    run = host.start_run()

    async def calls() -> list[Any]:
        return await asyncio.gather(
            *(host.invoke("fx.read", {"x": f"r{i}"}, run=run) for i in range(8)),
            *(host.invoke("fx.write", {"x": f"w{i}"}, run=run) for i in range(3)))

    outcomes = asyncio.run(calls())
    assert [o.content for o in outcomes] == [*(f"r{i}" for i in range(8)),
                                             *(f"w{i}" for i in range(3))]
    assert all(o.status is OutcomeStatus.SUCCEEDED for o in outcomes)
    # The writers' running rows and the reads' rows in the first batch, the writers' outcomes
    # in the second; every write inside one.
    assert spy.transactions == 2
    assert all(inside for _, _, inside in spy.writes)
    assert len(spy.writes) == 8 + 3 * 2
    recorded = {r.id: r for r in host.pipeline.invocations.list()}
    assert len(recorded) == 11 and {o.invocation_id for o in outcomes} == set(recorded)
    assert {r.state for r in recorded.values()} == {SUCCEEDED}
    assert sorted(bodies.ran) == ["w0", "w1", "w2"]


def test_a_call_alone_writes_at_once(host: Host, bodies: Bodies) -> None:
    spy = Spy(host.pipeline.invocations)
    outcome = host.invoke_sync("fx.write", {"x": "w"})
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert spy.transactions == 0
    assert [(name, inside) for name, _, inside in spy.writes] == [
        ("insert", False), ("settle", False)]


def test_one_bad_write_fails_only_its_own_call_as_it_would_alone(host: Host,
                                                                  bodies: Bodies) -> None:
    spy = Spy(host.pipeline.invocations)
    run = host.start_run()
    real_insert, real_settle = spy.store.insert, spy.store.settle

    def insert(record: InvocationRecord) -> None:
        if record.arguments.get("x") == "bad" and record.tool_name == "fx.read":
            spy.refuse.add(record.id)  # a read's row: its only write
        real_insert(record)

    def settle(invocation_id: str, **fields: Any) -> bool:
        if spy.store.get(invocation_id).arguments.get("x") == "bad":
            spy.refuse.add(invocation_id)  # a writer's outcome, its row already running
        return bool(real_settle(invocation_id, **fields))

    spy.store.insert, spy.store.settle = insert, settle

    async def calls() -> list[Any]:
        return await asyncio.gather(
            host.invoke("fx.read", {"x": "ok"}, run=run),
            host.invoke("fx.read", {"x": "bad"}, run=run),
            host.invoke("fx.write", {"x": "ok"}, run=run),
            host.invoke("fx.write", {"x": "bad"}, run=run))

    read_ok, read_bad, write_ok, write_bad = asyncio.run(calls())
    assert (read_ok.status, write_ok.status) == (OutcomeStatus.SUCCEEDED,) * 2
    # The read whose row was refused: nothing recorded, retryable (as alone).
    assert read_bad.failure is not None and read_bad.invocation_id is None
    assert (read_bad.failure.reason_code, read_bad.failure.retryable) == (
        host_reasons.RECORD_STORE, True)
    # The writer whose outcome was refused: interrupted; its row stays running, owned by
    # this process, for recover (as alone, when the store refuses the second write too).
    assert write_bad.failure is not None
    assert write_bad.failure.reason_code == host_reasons.INTERRUPTED
    by_x = {r.arguments["x"]: r for r in rows(host, "fx.write")}
    assert (by_x["ok"].state, by_x["bad"].state) == (SUCCEEDED, RUNNING)
    assert [r.arguments["x"] for r in rows(host, "fx.read")] == ["ok"]
    assert sorted(bodies.ran) == ["bad", "ok"]
    # The batches failed and were replayed alone: every write is recorded once.
    assert spy.transactions >= 1
    assert host.pipeline.invocations.count() == 3


def test_a_writer_cancelled_while_its_running_row_is_queued_never_runs_and_ends_its_row(
    host: Host, bodies: Bodies,
) -> None:
    commits = host.pipeline._commits

    async def calls() -> None:
        call = asyncio.ensure_future(host.invoke("fx.write", {"x": "w"}))
        real_flush = commits._flush

        def flush(batch: Any) -> None:
            commits._flush = real_flush  # type: ignore[method-assign]
            call.cancel()  # queued, not yet committed
            real_flush(batch)

        commits._flush = flush  # type: ignore[method-assign]
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(with_one_held(host, bodies, calls))
    assert bodies.ran == []
    (row,) = rows(host, "fx.write")
    assert (row.state, row.reason_code) == (FAILED, host_reasons.RUN_CANCELLED)
    assert host.pipeline.invocations.list(state=RUNNING) == []


@pytest.mark.parametrize("tool", ["fx.read", "fx.write"])
def test_a_call_cancelled_while_its_outcome_is_queued_is_answered_as_its_row_says(
    host: Host, bodies: Bodies, tool: str,
) -> None:
    commits = host.pipeline._commits
    final = 1 if tool == "fx.read" else 2  # a writer's first flush holds its running row

    async def calls() -> Any:
        call = asyncio.ensure_future(host.invoke(tool, {"x": "v"}))
        real_flush = commits._flush
        flushes = 0

        def flush(batch: Any) -> None:
            nonlocal flushes
            flushes += 1
            if flushes == final:
                commits._flush = real_flush  # type: ignore[method-assign]
                call.cancel()  # its outcome is queued, not yet committed
            real_flush(batch)

        commits._flush = flush  # type: ignore[method-assign]
        outcome = await call
        return outcome, call.cancelling()

    outcome, cancelling = asyncio.run(with_one_held(host, bodies, calls))
    (row,) = rows(host, tool)
    assert (outcome.status, outcome.content, outcome.invocation_id) == (
        OutcomeStatus.SUCCEEDED, "v", row.id)
    assert row.state is SUCCEEDED
    assert cancelling == 0  # the cancellation was answered, and taken back
