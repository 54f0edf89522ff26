"""`toolhost serve`'s periodic recover runs its store calls off the serving loop.

Every TOOLHOST_RECOVER_INTERVAL_S ``recover_every`` settles the rows whose process died. Its
store calls block (a PostgreSQL server that cannot be reached holds each up to its connect
timeout), so they run on a worker thread: an MCP call on the serving loop is answered while a
pass waits on the store. The pass keeps what recovery promises: rerun=False (a row is ended
``tool.internal.interrupted``, never run again), one recoverer per row (the compare-and-set
``settle``), the log lines ``mcp.serve.recovered`` and ``mcp.serve.recover_failed``, and a
shutdown that waits for the store call under way and begins no other.

The store is the host's real SQLite one, wrapped at the port (the boundary we own) so that one
call waits on a ``threading.Event`` as a call to an unreachable server would.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_tool

from toolhost._composition import Host
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.settings import Settings
from toolhost._pipeline.recovery import RecoveryAction
from toolhost.testing import host_for

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from mcp import Client

from toolhost._mcp.config import ServeConfig
from toolhost._mcp.server import _recovering, build_server, recover_every

#: How long a held store call waits for the test before giving up on its own. Only a bound, so
#: that a loop blocked by the held call (the fault under test) fails the test instead of hanging
#: it: no assertion is about time.
BOUND_S = 10.0
#: Seconds between passes: the first pass starts almost at once.
INTERVAL_S = 0.01

PLUGIN = make_plugin(tools=[make_tool()])  # fx.echo, READ_ONLY: safe to repeat


class Watched:
    """The host's invocation store, every call recorded with the thread that made it; the first
    call to ``method`` runs ``before`` first (waits on an Event, or raises)."""

    def __init__(self, store: Any, method: str, before: Callable[[], None]) -> None:
        self.store = store
        self.calls: list[tuple[str, int]] = []
        self._method = method
        self._before: Callable[[], None] | None = before
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append((name, threading.get_ident()))
                before, self._before = (
                    (self._before, None) if name == self._method else (None, self._before))
            if before is not None:
                before()
            return attribute(*args, **kwargs)

        return call

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class Held:
    """``before`` for a store call that blocks until released, as one to a server gone does."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()
        self.thread: int | None = None

    def __call__(self) -> None:
        self.thread = threading.get_ident()
        self.entered.set()
        self.release.wait(BOUND_S)
        self.returned.set()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def host(data: Path) -> Iterator[Host]:
    h = host_for({"fx": PLUGIN}, data_dir=data)
    store = h.pipeline.invocations
    yield h
    h.pipeline.invocations = store  # closed as it was opened, not through a wrapper
    h.close()


def events(out: io.StringIO, name: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, out.getvalue().splitlines()) if e["event"] == name]


def watch(host: Host, method: str, before: Callable[[], None]) -> Watched:
    watched = Watched(host.pipeline.invocations, method, before)
    host.pipeline.invocations = watched
    return watched


def dead_owner(host: Host) -> dict[str, Any]:
    """An owner as this host records one, for a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return {**host.pipeline.invocations.owner(), "pid": child.pid}


def left_running(host: Host, invocation_id: str = "row-of-a-dead-process") -> InvocationRecord:
    """A row a killed process left ``running``: fx.echo's, owned by a process now gone."""
    now = host.clock.now()
    record = InvocationRecord(
        id=invocation_id, run_id="run-1", principal_id="local", scopes=(),
        tool_name="fx.echo", tool_version="1.0.0", arguments={"x": "k"}, argument_digest=None,
        state=InvocationState.RUNNING, created_at=now, started_at=now, owner=dead_owner(host))
    host.pipeline.invocations.insert(record)
    return record


def serve_while(host: Host, serving: Coroutine[Any, Any, None]) -> None:
    """``serving`` on a loop, while ``toolhost serve``'s periodic recover runs beside it."""
    asyncio.run(_recovering(host, INTERVAL_S, serving))


async def until(done: Callable[[], bool]) -> None:
    for _ in range(int(BOUND_S / 0.01)):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


# --------------------------------------------------------------------- the loop goes on


def test_an_mcp_call_is_answered_while_the_periodic_recover_waits_on_the_store(
    host: Host,
) -> None:
    held = Held()
    watch(host, "list_rows", held)
    roster = [host.registry.resolve("fx.echo")]
    server, sessions = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))
    answered: list[Any] = []
    while_held: list[bool] = []
    loop_thread: list[int] = []

    async def serving() -> None:
        loop_thread.append(threading.get_ident())
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, BOUND_S)
        try:
            async with Client(server) as client:
                answered.append(await client.call_tool("fx.echo", {"x": "hi"}))
            # The pass has not come back from the store while the call ran.
            while_held.append(not held.returned.is_set())
        finally:
            held.release.set()

    try:
        serve_while(host, serving())
    finally:
        held.release.set()
        sessions.close()
    (result,) = answered
    assert (result.is_error, result.structured_content) == (False, {"echo": "hi"})
    assert while_held == [True]
    assert held.thread is not None and held.thread != loop_thread[0]



# --------------------------------------------------------- what a pass does, off the loop


def test_a_pass_ends_a_dead_processs_row_interrupted_without_running_it_and_logs_it(
    host: Host, logged: io.StringIO,
) -> None:
    row = left_running(host)
    watched = watch(host, "list_rows", lambda: None)
    loop_thread: list[int] = []
    calls: list[tuple[str, int]] = []

    async def serving() -> None:
        loop_thread.append(threading.get_ident())
        await until(lambda: events(logged, "mcp.serve.recovered") != [])
        calls.extend(watched.calls)  # the passes', before this test's own below

    serve_while(host, serving())
    settled = host.pipeline.invocations.get(row.id)
    # rerun=False: fx.echo is READ_ONLY, ended failed and retryable, and not run again here
    # (no row of a new run, no result).
    assert (settled.state, settled.reason_code, settled.retryable, settled.result_structured) == (
        InvocationState.FAILED, "tool.internal.interrupted", True, None)
    assert settled.failure_detail == {"owner": row.owner,
                                      "not_run_again": "READ_ONLY, not run again here (safe to "
                                                       "repeat)"}
    assert [r.id for r in host.pipeline.invocations.list()] == [row.id]
    (event, *_) = events(logged, "mcp.serve.recovered")
    assert (event["rows"], event["actions"], event["level"]) == ([row.id], ["failed"], "info")
    # Every store call of the passes was made off the serving loop's thread.
    assert "settle" in [name for name, _ in calls]
    assert loop_thread[0] not in {thread for _, thread in calls}


def test_a_row_another_recoverer_settles_first_is_left_as_it_settled_it(
    host: Host, data: Path, logged: io.StringIO,
) -> None:
    # The pass has read the row and waits on the store (checking its owner) while another
    # process's recover settles it: the pass's compare-and-set then fails, and the row stays
    # as the other settled it, ended once.
    row = left_running(host)
    held = Held()
    watch(host, "owner_state", held)
    other = host_for({"fx": PLUGIN}, data_dir=data)
    theirs: list[Any] = []

    async def serving() -> None:
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, BOUND_S)
        theirs.extend(other.pipeline.recover_interrupted())
        held.release.set()
        await until(lambda: events(logged, "mcp.serve.recovered") != [])

    try:
        serve_while(host, serving())
    finally:
        held.release.set()
        other.close()
    assert [(r.invocation_id, r.action) for r in theirs] == [(row.id, RecoveryAction.FAILED)]
    (event, *_) = events(logged, "mcp.serve.recovered")
    assert (event["rows"], event["actions"]) == ([row.id], ["settled_elsewhere"])
    settled = host.pipeline.invocations.get(row.id)
    assert (settled.state, settled.reason_code) == (InvocationState.FAILED,
                                                    "tool.internal.interrupted")


def test_a_store_that_fails_is_logged_and_the_next_pass_settles_the_row(
    host: Host, logged: io.StringIO,
) -> None:
    row = left_running(host)

    def unreachable() -> None:
        raise sqlite3.OperationalError("unable to open database file")

    watch(host, "list_rows", unreachable)

    async def serving() -> None:
        await until(lambda: events(logged, "mcp.serve.recovered") != [])

    serve_while(host, serving())
    (failed,) = events(logged, "mcp.serve.recover_failed")
    assert (failed["error"], failed["level"]) == ("OperationalError", "warning")
    (recovered, *_) = events(logged, "mcp.serve.recovered")
    assert recovered["rows"] == [row.id]
    assert host.pipeline.invocations.get(row.id).state is InvocationState.FAILED


# ------------------------------------------------------------------------------ shutdown


def test_shutdown_mid_pass_waits_for_the_store_call_under_way_and_begins_no_other(
    host: Host, logged: io.StringIO,
) -> None:
    row = left_running(host)
    held = Held()
    watched = watch(host, "list_rows", held)
    waited: list[bool] = []

    async def stopping() -> None:
        recovery = asyncio.create_task(recover_every(host, INTERVAL_S))
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, BOUND_S)
        recovery.cancel()
        for _ in range(20):  # many passes of the loop: the pass is still in the store
            await asyncio.sleep(0)
        waited.append(not recovery.done())
        held.release.set()
        with pytest.raises(asyncio.CancelledError):
            await recovery

    try:
        asyncio.run(stopping())
    finally:
        held.release.set()
    assert waited == [True]
    # The running rows were read; nothing after: no owner checked, no row settled.
    assert watched.names() == ["list_rows"]
    assert host.pipeline.invocations.get(row.id).state is InvocationState.RUNNING
    assert events(logged, "mcp.serve.recovered") == []
    assert events(logged, "mcp.serve.recover_failed") == []


def test_recover_interrupted_stopped_before_it_starts_makes_no_store_call(host: Host) -> None:
    left_running(host)
    watched = watch(host, "list_rows", lambda: None)
    stopping = threading.Event()
    stopping.set()
    assert host.pipeline.recover_interrupted(stopping) == []
    assert watched.calls == []
