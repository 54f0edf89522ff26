"""A tool body that raises a BaseException which is not an Exception.

``sys.exit`` from a CLI library a plugin wraps (argparse's ``error()``, click's standalone
mode), ``KeyboardInterrupt``, a library's own BaseException used to unwind, a CancelledError
nobody sent: each is the body's failure, ``tool.internal.unexpected``, its row finished, and
the host carries on. Before, each escaped ``invoke``: its row stayed ``running`` under the
live process (``recover`` answered "alive"), and ``toolhost serve`` died with every session.

The one exception left to go on is a KeyboardInterrupt on the main thread, where the loop
runs and where Python delivers the operator's Ctrl-C: the row is finished first, then it goes
on. On a worker thread (a sync body) no signal is ever delivered, so there it is the body's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from installed import install_fake_plugin
from test_mcp_server import (
    INITIALIZED,
    Served,
    assert_no_traceback,
    finish,
    initialized,
    read_frames,
    write,
)

from toolhost import Idempotency, Risk, SideEffect, Tool, ToolExecutionContext, ToolOutput
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationState
from toolhost.testing import Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}


class PluginAbort(BaseException):
    """A library's own way to unwind (gevent's GreenletExit, trio's Cancelled, ...)."""


#: What a body raises, by name: none is an Exception.
RAISED: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "PluginAbort": lambda: PluginAbort("unwinding"),
    "GeneratorExit": GeneratorExit,
    "CancelledError": asyncio.CancelledError,
}


def harness(body: Any) -> Harness:
    """fx.boom (a writing call: its row is ``running`` before the body runs) and fx.ok."""
    # A long timeout: on a loaded machine a body's first step held past make_spec's 2 s is
    # late, and its failure is then the deadline's (D541), not the one these tests check.
    boom = make_spec(name="fx.boom", input_schema=SCHEMA, output_schema=OUT,
                     side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                     idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False,
                     timeout_s=120)
    ok = make_spec(name="fx.ok", input_schema=SCHEMA, output_schema=OUT)
    return Harness.over({"fx-dist": make_plugin(tools=[
        Tool(boom, call=body),
        Tool(ok, call=lambda arguments, context: ToolOutput(structured={"echo": "ok"},
                                                           content="ok")),
    ])})


def assert_failed_unexpectedly(h: Harness, raised: str) -> None:
    """The last fx.boom call ended tool.internal.unexpected, naming what the body raised, on
    its finished row; and the host still runs the next call."""
    (row,) = [r for r in h.host.pipeline.invocations.list() if r.tool_name == "fx.boom"]
    assert (row.state, row.reason_code) == (InvocationState.FAILED,
                                            host_reasons.INTERNAL_UNEXPECTED)
    assert (row.failure_detail or {})["exception"] == raised
    assert h.invoke("fx.ok").status.value == "succeeded"


@pytest.mark.parametrize("raised", sorted(RAISED))
def test_a_sync_body_raising_a_base_exception_fails_unexpectedly(raised: str) -> None:
    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        raise RAISED[raised]()

    with harness(body) as h:
        outcome = h.invoke("fx.boom")
        assert outcome.failure is not None
        assert outcome.failure.reason_code == host_reasons.INTERNAL_UNEXPECTED
        assert not outcome.failure.retryable
        assert_failed_unexpectedly(h, raised)


ASYNC_RAISED = sorted(set(RAISED) - {"KeyboardInterrupt"})


@pytest.mark.parametrize("suspends", [False, True], ids=["at-once", "after-suspending"])
@pytest.mark.parametrize("raised", ASYNC_RAISED)
def test_an_async_body_raising_a_base_exception_fails_unexpectedly(
        raised: str, suspends: bool) -> None:
    # Inline (its first step, in the pipeline's own frame) or driven after it suspended; a
    # CancelledError that nobody sent (the call was not cancelled) is the body's own too.
    async def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        if suspends:
            await asyncio.sleep(0)
        raise RAISED[raised]()

    with harness(body) as h:
        outcome = h.invoke("fx.boom")
        assert outcome.failure is not None
        assert outcome.failure.reason_code == host_reasons.INTERNAL_UNEXPECTED
        assert_failed_unexpectedly(h, raised)


@pytest.mark.parametrize("raised", ["SystemExit", "PluginAbort"])
def test_a_coroutine_a_sync_callable_returns_raising_one_fails_unexpectedly(
        raised: str) -> None:
    # Awaited in a task of its own (asyncio.wait_for), whose SystemExit asyncio re-raises out
    # of the event loop itself.
    async def later() -> ToolOutput:
        raise RAISED[raised]()

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> Any:
        return later()

    with harness(body) as h:
        assert h.invoke("fx.boom").status.value == "failed"
        assert_failed_unexpectedly(h, raised)


def test_a_keyboard_interrupt_on_the_main_thread_goes_on_once_the_row_is_finished() -> None:
    # The loop runs on the main thread, where Python raises the operator's Ctrl-C: it may be
    # that, so it is not swallowed; but the row is finished before it goes on.
    assert threading.current_thread() is threading.main_thread()

    async def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        raise KeyboardInterrupt

    with harness(body) as h:
        with pytest.raises(KeyboardInterrupt):
            h.invoke("fx.boom")
        assert_failed_unexpectedly(h, "KeyboardInterrupt")


def test_a_keyboard_interrupt_off_the_main_thread_is_the_bodys() -> None:
    # A loop on another thread never receives a signal: the interrupt is the body's own.
    async def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        raise KeyboardInterrupt

    answers: list[Any] = []
    with harness(body) as h:
        thread = threading.Thread(target=lambda: answers.append(h.invoke("fx.boom")))
        thread.start()
        thread.join(60)
        (outcome,) = answers
        assert outcome.failure.reason_code == host_reasons.INTERNAL_UNEXPECTED
        assert_failed_unexpectedly(h, "KeyboardInterrupt")


def test_a_call_the_run_cancels_still_ends_cancelled() -> None:
    # The pipeline's own cancellation is not the body's failure: a body that raises
    # CancelledError once its call is cancelled ends run_cancelled, as before.
    started = threading.Event()

    async def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        started.set()
        await asyncio.Event().wait()  # until the run is cancelled
        raise AssertionError("not reached")

    with harness(body) as h:
        run = h.start_run()
        threading.Timer(0.0, lambda: started.wait(30) and run.cancellation.cancel()).start()
        outcome = h.call("fx.boom", {}, run=run)
        assert outcome.failure is not None
        assert outcome.failure.reason_code == host_reasons.RUN_CANCELLED


# ---------------------------------------------------------------------------- serve

PLUGIN = '''
import asyncio
from toolhost import (Domain, Idempotency, Kind, Risk, SideEffect, Source, TargetKind, Tool,
                      ToolOutput, ToolSpec, Trust, hookimpl)

IN = {"type": "object", "properties": {"how": {"type": "string", "maxLength": 16}},
      "required": ["how"], "additionalProperties": False}
OUT = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"],
       "additionalProperties": False}


class PluginAbort(BaseException):
    pass


def raised(how):
    return {"exit": SystemExit(0), "kbd": KeyboardInterrupt(), "custom": PluginAbort("unwind"),
            "exit-async": SystemExit(2), "custom-async": PluginAbort("unwind")}[how]


def boom(arguments, context):
    raise raised(arguments["how"])


async def boom_async(arguments, context):
    await asyncio.sleep(0)
    raise raised(arguments["how"])


def spec(name):
    return ToolSpec(name=name, version="1.0.0", description="Raises a BaseException.",
                    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY,
                    source=Source.BUILTIN, target_kind=TargetKind.IN_PROCESS, server_id=None,
                    side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                    idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
                    required_scopes=(), timeout_s=10, maximum_output_bytes=4096,
                    allow_parallel=False, deprecated=False)


@hookimpl
def toolhost_domains():
    return [Domain("fxb")]


@hookimpl
def toolhost_tools(settings):
    return [Tool(spec("fxb.boom"), call=boom), Tool(spec("fxb.boom_async"), call=boom_async)]
'''


def test_serve_answers_each_such_call_and_carries_on(tmp_path: Path) -> None:
    # Before: the first call's answer was "Connection closed" (SystemExit) or end of file,
    # and the server exited with its row `running`.
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-boom", "fake_boom", PLUGIN)
    served = Served(tmp_path, plugins="fake-boom", site=site)
    try:
        process = initialized(served)
        calls = [("fxb.boom", "exit"), ("fxb.boom", "kbd"), ("fxb.boom", "custom"),
                 ("fxb.boom_async", "exit-async"), ("fxb.boom_async", "custom-async")]
        for number, (name, how) in enumerate(calls, start=2):
            write(process, {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                            "params": {"name": name, "arguments": {"how": how}}})
            (answer,) = read_frames(process, 1)
            assert answer["id"] == number, answer
            meta = answer["result"]["_meta"]
            assert meta["toolhost/reasonCode"] == host_reasons.INTERNAL_UNEXPECTED, answer
        write(process, INITIALIZED)  # still reading: a notification, no answer
        code, _, err = finish(process)
    finally:
        served.stop_leftovers()
    assert code == 0
    assert_no_traceback(err)
    rows = served.rows()
    assert [(r["state"], r["reason_code"]) for r in rows] == [
        ("failed", host_reasons.INTERNAL_UNEXPECTED)] * len(calls)


def test_a_coroutine_a_sync_callable_returns_raising_cancelled_error_fails_unexpectedly(
) -> None:
    # Nobody cancelled the call or the task: the coroutine's own CancelledError escaped
    # invoke and left the row running (a review of D391).
    async def cancelled() -> ToolOutput:
        await asyncio.sleep(0)
        raise asyncio.CancelledError

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> Any:
        return cancelled()

    with harness(body) as h:
        outcome = h.invoke("fx.boom")
        assert outcome.failure is not None
        assert outcome.failure.reason_code == host_reasons.INTERNAL_UNEXPECTED
        assert_failed_unexpectedly(h, "CancelledError")


#: A file name that is not UTF-8, as os.fsdecode reads it: a lone surrogate.
NAME_NOT_UTF8 = b"caf\xe9.txt".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize("tool", ["fx.boom", "fx.read"])
def test_a_failure_whose_text_has_no_utf8_form_is_stored_escaped(tool: str) -> None:
    # An exception's text holding a lone surrogate (a file name os.fsdecode read) failed the
    # row's write: a reading tool's failure read as a record-store outage, with no row.
    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        raise OSError("cannot open " + NAME_NOT_UTF8)

    read = make_spec(name="fx.read", input_schema=SCHEMA, output_schema=OUT)
    with Harness.over({"fx-dist": make_plugin(tools=[
            Tool(read, call=body), Tool(make_spec(
                name="fx.boom", input_schema=SCHEMA, output_schema=OUT,
                side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False),
                call=body)])}) as h:
        outcome = h.invoke(tool)
        assert outcome.failure is not None
        assert outcome.failure.reason_code == host_reasons.INTERNAL_UNEXPECTED
        (row,) = [r for r in h.host.pipeline.invocations.list() if r.tool_name == tool]
        assert row.state is InvocationState.FAILED
        assert (row.failure_detail or {})["error"] == "cannot open caf\\udce9.txt"


def test_closing_an_abandoned_awaited_coroutine_is_silent() -> None:
    # GeneratorExit is how a coroutine is closed (a pending task at shutdown), not a failure:
    # turned into BodyAborted, close() raised and Python printed "Exception ignored in".
    from toolhost._pipeline.execution import _awaited

    class Pending:
        def __await__(self) -> Any:
            yield "suspended"  # what a future yields to its task while it waits

    async def waits() -> None:
        await Pending()

    outer = _awaited(waits())
    assert outer.send(None) == "suspended"
    outer.close()
