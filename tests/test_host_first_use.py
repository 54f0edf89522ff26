"""A host's first use from several threads at once (each with its own loop, as invoke_sync's
callers are) makes its data directory, its pipeline and each tool's callable once.

Before, each thread that found the pipeline unmade composed one of its own (another store,
and for a host without a data directory another temporary directory): calls answered
succeeded while their rows went to a database the host no longer used. Each test lets a
second thread try to enter the making while the first is inside it; the first waits a bounded
time for that second entrant, so with the making serialized the test ends with one entrant.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import Tool, ToolExecutionContext, ToolOutput
from toolhost._composition import Host
from toolhost._model.invocations import InvocationState
from toolhost.testing import host_for

THREADS = 4
#: How long the first entrant waits for a second one: enough for a thread that is not held
#: back to arrive, and the test's only wait.
SECOND_ENTRANT_S = 0.5


async def _read(arguments: Any, context: ToolExecutionContext) -> ToolOutput:
    return ToolOutput(structured={"echo": arguments["x"]}, content=str(arguments["x"]))


@pytest.fixture
def host() -> Iterator[Host]:
    h = host_for({"fx-dist": make_plugin(tools=[Tool(make_spec(name="fx.read"), call=_read)])})
    yield h
    h.close()


def _entrants(making: Callable[..., Any]) -> tuple[Callable[..., Any], list[int]]:
    """``making`` wrapped to count who enters it, the first waiting for a second."""
    entered: list[int] = []
    second = threading.Event()

    def counted(*args: Any, **kwargs: Any) -> Any:
        entered.append(threading.get_ident())
        if len(entered) == 1:
            second.wait(SECOND_ENTRANT_S)
        else:
            second.set()
        return making(*args, **kwargs)

    return counted, entered


def _at_once(action: Callable[[], Any]) -> list[Any]:
    start = threading.Barrier(THREADS)
    results: list[Any] = [None] * THREADS

    def worker(n: int) -> None:
        start.wait()
        results[n] = action()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results


def test_the_pipeline_is_composed_once(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    counted, entered = _entrants(Host._compose_pipeline)
    monkeypatch.setattr(Host, "_compose_pipeline", counted)
    pipelines = _at_once(lambda: host.pipeline)
    assert len(entered) == 1
    assert all(p is pipelines[0] for p in pipelines)


def test_the_temporary_data_directory_is_made_once(
    host: Host, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tempfile

    counted, entered = _entrants(tempfile.mkdtemp)
    monkeypatch.setattr(tempfile, "mkdtemp", counted)
    directories = _at_once(lambda: host.data_dir)
    assert len(entered) == 1
    assert len(set(directories)) == 1


def test_concurrent_first_calls_on_several_loops_all_land_in_the_host_s_record(
    host: Host,
) -> None:
    outcomes = _at_once(lambda: asyncio.run(host.invoke("fx.read", {"x": "1"},
                                                        run=host.start_run())))
    recorded = {r.id for r in host.pipeline.invocations.list(tool_name="fx.read")}
    assert {o.invocation_id for o in outcomes} == recorded
    assert {r.state for r in host.pipeline.invocations.list(tool_name="fx.read")} == {
        InvocationState.SUCCEEDED}
