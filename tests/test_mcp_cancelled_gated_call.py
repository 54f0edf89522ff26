"""A gated call its client cancels in its first pass over MCP: before anyone is asked, while
the person decides, right after their approval. The call cancelled before the approval is
left waiting (the run pauses, the session still finds its row); one cancelled once approved
is never replayed (D371): the same call again is asked again. The server runs in this process
(``mcp.Client(server)``, as in ``test_mcp_in_call``), driven by the SDK's own client in either
protocol era; a window is held by holding the call's first pass through the pipeline (until
the request's cancellation reaches it), the person's answer, or the tool body."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402
from test_mcp_in_call import APPROVE, DECLINE, SEEN, host, person, serve  # noqa: E402,F401
from test_mcp_late_answers import (  # noqa: E402
    APPROVAL,
    RAN,
    RELEASE,
    STARTED,
    _id,
    _status,
    append_host,  # noqa: F401 - the fixture, used by name
)
from test_mcp_words_journeys import WORDS, recording  # noqa: E402

from toolhost._composition import Host  # noqa: E402
from toolhost._model import host_reasons as core_messages  # noqa: E402

MODES = ["legacy", "2026-07-28"]


def hold(monkeypatch: pytest.MonkeyPatch, made: Host, step: str,
         tool: str | None = None) -> Callable[[], bool]:
    """The call's ``step`` (``invoke``: its first pass through the pipeline, for ``tool``;
    ``approve``: the approved call, before it starts) waits until its request is cancelled,
    then goes on: what it records, it records with the request gone. Returns whether the
    call has reached it."""
    reached: list[str] = []
    through = getattr(made, step)

    async def held(first: str, *rest: Any, **options: Any) -> Any:
        if tool is None or first == tool:
            reached.append(first)
            while not options["run"].cancellation.cancelled:
                await asyncio.sleep(0.01)
        return await through(first, *rest, **options)

    monkeypatch.setattr(made, step, held)
    return lambda: bool(reached)


def call(client: Any, mode: str, tool: str, arguments: dict[str, Any]) -> Any:
    """The call as each era's client first makes it (a 2026 question comes back as is)."""
    if mode == "legacy":
        return client.call_tool(tool, arguments)
    return client.session.call_tool(tool, arguments, allow_input_required=True)


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def cancelled(request: Any, ready: Callable[[], bool], recorded: Callable[[], bool]) -> (
        None):
    """Cancel the client's request (the client sends ``notifications/cancelled``) once the
    call is ``ready``, and wait until what it leaves is ``recorded`` and its handler has
    done its bookkeeping."""
    task = asyncio.ensure_future(request)
    await until(ready, "the call never reached the window")
    task.cancel()
    await until(recorded, "nothing was recorded")
    await asyncio.sleep(0.2)  # the handler's bookkeeping, once the pipeline returned


# ------------------------------------------------------------------ before anyone is asked


@pytest.mark.parametrize("mode", MODES)
def test_a_call_cancelled_before_anyone_is_asked_is_left_waiting_and_the_run_pauses(
        host: Host, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # Regression: held for the question, the row was recorded and never asked, yet the run
    # kept its workspace (cancelled while the person decides, it paused).
    server, sessions = serve(host)
    reached = hold(monkeypatch, host, "invoke", "fx.gated")

    def rows() -> list[Any]:
        return list(host.pipeline.invocations.list(tool_name="fx.gated"))

    async def journey() -> None:
        async with mcp.Client(server, mode=mode, elicitation_callback=person(APPROVE)) as c:
            await c.call_tool("fx.write", {"path": "before.txt"})
            await cancelled(call(c, mode, "fx.gated", {"path": "g.txt"}), reached,
                            lambda: bool(rows()))
            (waiting,) = rows()
            assert waiting.state.value == "awaiting_approval"
            after = await c.call_tool("fx.write", {"path": "after.txt"})
            assert after.content[0].text == "", "the call was left waiting: the run pauses"
            # The same call again is the same pending call, asked again: it runs once.
            again = await c.call_tool("fx.gated", {"path": "g.txt"})
            assert (_id(again), _status(again)) == (waiting.id, "succeeded")

    asyncio.run(journey())
    assert [listing for name, _, listing in SEEN if name == "touch"] == ["", "", "after.txt"]
    (session,) = sessions._sessions.values()
    assert session.held == set()


@pytest.mark.parametrize("mode", MODES)
def test_a_words_call_cancelled_before_its_approval_is_asked_finds_its_row_unworded(
        host: Host, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # Regression (D437): the row recorded with the person's words was not remembered under
    # the model's call, so the same call asked the person for their words again.
    server, _ = serve(host)
    reached = hold(monkeypatch, host, "invoke", "fx.remember")
    answers, forms = recording(WORDS, APPROVE)
    model = {"text": "the model's words"}

    def rows() -> list[Any]:
        return list(host.pipeline.invocations.list(tool_name="fx.remember"))

    async def journey() -> None:
        async with mcp.Client(server, mode=mode, elicitation_callback=answers) as c:
            # The person gives their words; the call (on 2026, the retry with them) is
            # cancelled before its approval is asked.
            await cancelled(c.call_tool("fx.remember", model), reached, lambda: bool(rows()))
            (waiting,) = rows()
            again = await c.call_tool("fx.remember", model)
            assert (_id(again), _status(again)) == (waiting.id, "succeeded")

    asyncio.run(journey())
    assert forms == ["text", "approve"]
    assert SEEN == [("remember", "my own words", "my own words")]


# ------------------------------------------------------------------ once approved


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("window", ["approved", "running"])
def test_a_call_cancelled_once_approved_is_asked_again_never_replayed(
        append_host: Host, mode: str, window: str,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    # "approved": cancelled as the person's approval arrives, before the body starts;
    # "running": while the body runs. Either way the row records the cancellation, and the
    # same call again is a new call, asked again (D371).
    server, _ = serve(append_host)
    forms: list[str] = []
    reached = (hold(monkeypatch, append_host, "approve") if window == "approved"
               else STARTED.is_set)

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        forms.append(params.message)
        return APPROVE if len(forms) == 1 else DECLINE

    def rows() -> list[Any]:
        return list(append_host.pipeline.invocations.list(tool_name="fxl.append"))

    def ended() -> bool:
        return any(r.state.value == "failed" for r in rows())

    async def journey() -> None:
        async with mcp.Client(server, mode=mode, elicitation_callback=answer) as c:
            arguments = {"path": "count.txt"}
            if mode == "legacy":
                approving = c.call_tool("fxl.append", arguments)
            else:
                asked = await call(c, mode, "fxl.append", arguments)
                forms.append("asked in the result")
                approving = c.session.call_tool(
                    "fxl.append", arguments, allow_input_required=True,
                    request_state=asked.request_state, input_responses={APPROVAL: APPROVE})
            await cancelled(approving, reached, ended)
            again = await c.call_tool("fxl.append", arguments)
            (first, second) = rows()
            assert (_id(again), _status(again)) == (second.id, "denied")
            assert (first.state.value, first.reason_code) == ("failed",
                                                              core_messages.RUN_CANCELLED)

    try:
        asyncio.run(journey())
    finally:
        RELEASE.set()
    assert len(forms) == 2
    ran = list(RAN)
    assert ran == (["count.txt"] if window == "running" else [])  # never run again
