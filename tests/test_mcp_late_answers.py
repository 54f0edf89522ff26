"""Answers that come late or twice over MCP: a 2026-07-28 approval given after the elicitation
timeout, and the ``running`` answer's "call this tool again" when two identical calls were
approved at once. The server runs in this process (``mcp.Client(server)``, as in
``test_mcp_in_call``), driven by the SDK's own client over a real host and data directory."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec, make_tool

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402
from test_mcp_in_call import (  # noqa: E402
    APPROVE,
    DECLINE,
    PATH_IN,
    PLUGIN,
    SEEN,
    TEXT_OUT,
    host,  # noqa: F401 - the fixture, used by name
    person,
    serve,
)

from toolhost import Idempotency, Risk, SideEffect, ToolOutput  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost.testing import host_for  # noqa: E402

APPROVAL = "toolhost.approval"


def _id(result: types.CallToolResult) -> str:
    return str((result.meta or {})["toolhost/invocationId"])


def _status(result: types.CallToolResult) -> str:
    return str((result.meta or {})["toolhost/status"])


# ---------------------------------------------------------------- a 2026 answer after the timeout


async def _asked_then_expired(client: Any, path: str) -> types.InputRequiredResult:
    """The approval question for fx.gated, left unanswered past the timeout (0.3 s)."""
    asked = await client.session.call_tool("fx.gated", {"path": path}, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult)
    await asyncio.sleep(0.8)
    return asked


@pytest.mark.parametrize(("answer", "state"), [(APPROVE, "succeeded"), (DECLINE, "denied")])
def test_a_2026_answer_given_after_the_timeout_decides_the_call_once(
        host: Host, answer: types.ElicitResult, state: str) -> None:  # noqa: F811
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="0.3")

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            asked = await _asked_then_expired(client, "g.txt")
            late = await client.session.call_tool(
                "fx.gated", {"path": "g.txt"}, allow_input_required=True,
                request_state=asked.request_state, input_responses={APPROVAL: answer})
            # Before: the same question again, the person's answer dropped.
            assert isinstance(late, types.CallToolResult), late
            assert (_id(late), _status(late)) == (asked.request_state, state)
            # The answer decided its row once: the same retry again answers what it decided.
            again = await client.session.call_tool(
                "fx.gated", {"path": "g.txt"}, allow_input_required=True,
                request_state=asked.request_state, input_responses={APPROVAL: answer})
            assert isinstance(again, types.CallToolResult), again
            assert (_id(again), _status(again)) == (asked.request_state, state)
            after = await client.call_tool("fx.write", {"path": "after.txt"})
            # The run paused at the timeout (before.txt went with its workspace); an approved
            # call ran in the next one, where the session goes on.
            assert after.content[0].text == ("g.txt" if state == "succeeded" else "")

    asyncio.run(journey())
    gated = [listing for name, _, listing in SEEN if name == "touch"][1:-1]
    assert gated == ([""] if state == "succeeded" else [])


@pytest.mark.parametrize(("second", "state"), [(DECLINE, "succeeded"), (APPROVE, "succeeded")])
def test_a_2026_second_answer_to_a_decided_question_answers_what_the_first_decided(
        host: Host, second: types.ElicitResult, state: str) -> None:  # noqa: F811
    # Regression (D435's "left"): two identical calls were asked about one row; the second
    # answer, arriving once the first had decided it, made a new row and put a third form.
    server, _ = serve(host)

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            call = {"path": "g.txt"}
            first = await client.session.call_tool("fx.gated", call, allow_input_required=True)
            other = await client.session.call_tool("fx.gated", call, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert isinstance(other, types.InputRequiredResult)
            assert other.request_state == first.request_state  # one row, asked twice
            decided = await client.session.call_tool(
                "fx.gated", call, allow_input_required=True,
                request_state=first.request_state, input_responses={APPROVAL: APPROVE})
            assert (_id(decided), _status(decided)) == (first.request_state, "succeeded")
            for _ in range(2):  # the second answer, and the client sending it once more
                late = await client.session.call_tool(
                    "fx.gated", call, allow_input_required=True,
                    request_state=other.request_state, input_responses={APPROVAL: second})
                assert isinstance(late, types.CallToolResult), late
                assert (_id(late), _status(late)) == (first.request_state, state)
                assert late.structured_content == decided.structured_content

    asyncio.run(journey())
    assert [name for name, _, _ in SEEN] == ["touch"]  # ran once
    (row,) = host.pipeline.invocations.list(tool_name="fx.gated")  # nothing written twice
    assert (row.state.value, row.denial_reason) == ("succeeded", None)


def test_a_late_answer_for_a_call_the_operator_decided_meanwhile_answers_what_stands(
        host: Host) -> None:  # noqa: F811
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="0.3")

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            asked = await _asked_then_expired(client, "g.txt")
            host.deny(str(asked.request_state), "operator", "not now")
            late = await client.session.call_tool(
                "fx.gated", {"path": "g.txt"}, allow_input_required=True,
                request_state=asked.request_state, input_responses={APPROVAL: APPROVE})
            assert isinstance(late, types.CallToolResult)
            assert (_id(late), _status(late)) == (asked.request_state, "denied")

    asyncio.run(journey())
    assert SEEN == []


def test_a_late_answer_never_decides_a_call_this_session_did_not_ask_about(
        host: Host) -> None:  # noqa: F811
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="0.3")

    async def journey() -> None:
        # A client that cannot be asked leaves a call waiting in the same (sessionless) run.
        async with mcp.Client(server, mode="2026-07-28") as mute:
            waiting = await mute.call_tool("fx.gated", {"path": "other.txt"})
            assert _status(waiting) == "awaiting_approval"
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            await _asked_then_expired(client, "g.txt")  # a question the timeout took back
            forged = await client.session.call_tool(
                "fx.gated", {"path": "other.txt"}, allow_input_required=True,
                request_state=_id(waiting), input_responses={APPROVAL: APPROVE})
            # Never a decision: the question, put now.
            assert isinstance(forged, types.InputRequiredResult)

    asyncio.run(journey())
    assert SEEN == []
    assert len(host.pipeline.invocations.pending(limit=10)) == 2  # both still waiting


# ---------------------------------------------------------------- "running": call again to get it

#: fxl.append's executions, and what holds its body until the test lets it finish.
RAN: list[str] = []
STARTED = threading.Event()
RELEASE = threading.Event()


def _append(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    RAN.append(arguments["path"])
    STARTED.set()
    RELEASE.wait(30)  # a safety bound: the test releases it long before
    return ToolOutput(structured={"text": str(len(RAN))}, content=str(len(RAN)))


APPEND = make_plugin(("fxl",), [make_tool(make_spec(
    name="fxl.append", input_schema=PATH_IN, output_schema=TEXT_OUT, risk=Risk.HIGH,
    side_effect=SideEffect.WORKSPACE_WRITE, idempotency=Idempotency.NON_IDEMPOTENT,
    allow_parallel=False), call=_append)])


@pytest.fixture
def append_host(tmp_path: Path) -> Iterator[Host]:
    RAN.clear()
    STARTED.clear()
    RELEASE.clear()
    with host_for({"toolhost-fx": PLUGIN, "toolhost-fxl": APPEND},
                  data_dir=tmp_path / "data") as made:
        yield made


@pytest.mark.parametrize("waiting", [1, 2])
def test_every_call_answered_running_gets_the_result_when_called_again(
        append_host: Host, waiting: int) -> None:
    # Regression (D435's "left", waiting=2): of two requests answered ``running`` for one
    # row, only the first to call again got the result; the other's repeat asked again.
    server, _ = serve(append_host)
    forms: list[str] = []
    all_forms = asyncio.Event()

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        forms.append(params.message)
        asked = len(forms)
        if asked == 1:  # approved once every form is open
            await all_forms.wait()
            return APPROVE
        if asked <= 1 + waiting:  # approved while the first approval's execution runs
            if asked == 1 + waiting:
                all_forms.set()
            while not STARTED.is_set():
                await asyncio.sleep(0.02)
            return APPROVE
        return DECLINE

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=answer) as client:
            call = {"path": "count.txt"}
            first = asyncio.ensure_future(client.call_tool("fxl.append", call))
            while not forms:
                await asyncio.sleep(0.02)
            running = await asyncio.gather(
                *(client.call_tool("fxl.append", call) for _ in range(waiting)))
            for told in running:
                assert _status(told) == "running"
                assert "Call this tool again with the same arguments" in told.content[0].text
            RELEASE.set()
            done = await first
            assert not done.is_error and {_id(told) for told in running} == {_id(done)}
            # As each answer said: the recorded result, no new approval, no second execution.
            for _ in running:
                again = await client.call_tool("fxl.append", call)
                assert not again.is_error, again
                assert (_id(again), again.structured_content) == (_id(done), {"text": "1"})
            assert len(forms) == 1 + waiting
            # Handed back to each call it was promised to: the next identical call is new.
            fresh = await client.call_tool("fxl.append", call)
            assert _status(fresh) == "denied" and _id(fresh) != _id(done)

    asyncio.run(journey())
    assert RAN == ["count.txt"]
    # Every form asked about the one row, and one more for the deliberate new call.
    assert len(forms) == 2 + waiting and len(set(forms[:-1])) == 1


def test_a_2026_second_answer_while_the_first_runs_is_told_running_then_collects(
        append_host: Host) -> None:
    # The second answer to a question the first is running: ``running``, then the result,
    # once; never a new row, a third form or a second execution.
    server, _ = serve(append_host)

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            call = {"path": "count.txt"}
            asked = [await client.session.call_tool("fxl.append", call, allow_input_required=True)
                     for _ in range(2)]
            assert all(isinstance(a, types.InputRequiredResult) for a in asked)
            state = asked[0].request_state
            assert asked[1].request_state == state
            first = asyncio.ensure_future(client.session.call_tool(
                "fxl.append", call, allow_input_required=True,
                request_state=state, input_responses={APPROVAL: APPROVE}))
            while not STARTED.is_set():
                await asyncio.sleep(0.02)
            second = await client.session.call_tool(
                "fxl.append", call, allow_input_required=True,
                request_state=state, input_responses={APPROVAL: APPROVE})
            assert isinstance(second, types.CallToolResult), second
            assert (_id(second), _status(second)) == (state, "running")
            RELEASE.set()
            done = await first
            assert isinstance(done, types.CallToolResult) and _status(done) == "succeeded"
            again = await client.call_tool("fxl.append", call)
            assert (_id(again), again.structured_content) == (state, {"text": "1"})
            fresh = await client.session.call_tool("fxl.append", call,
                                                   allow_input_required=True)
            assert isinstance(fresh, types.InputRequiredResult) and fresh.request_state != state

    asyncio.run(journey())
    assert RAN == ["count.txt"]


# ------------------------------------------------------- a call left waiting past the deadline


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_call_left_waiting_and_repeated_after_the_runs_deadline_ends_unasked(
        host: Host, mode: str) -> None:  # noqa: F811
    # Regression (D433's gap): the repeat found the waiting row and asked the person again
    # (2026-07-28), or answered "runs once approved" (2025), though no approval could run it.
    server, _ = serve(host, TOOLHOST_MCP_RUN_TIMEOUT_S="1",
                      TOOLHOST_MCP_ELICITATION_TIMEOUT_S="60")
    asked: list[object] = []

    async def journey() -> tuple[Any, Any]:
        if mode == "legacy":
            async with mcp.Client(server, elicitation_callback=person()) as client:  # cancels
                first = await client.call_tool("fx.gated", {"path": "g.txt"})
                await asyncio.sleep(1.5)
                count = len(asked)
                again = await client.call_tool("fx.gated", {"path": "g.txt"})
                return first, (again, count)
        async with mcp.Client(server, mode="2026-07-28",
                              elicitation_callback=person()) as client:
            first = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            await asyncio.sleep(1.5)
            again = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            return first, (again, 0)

    first, (again, _) = asyncio.run(journey())
    if mode == "legacy":
        assert _status(first) == "awaiting_approval"
    else:
        assert isinstance(first, types.InputRequiredResult)
    assert isinstance(again, types.CallToolResult), again  # nobody asked
    meta = again.meta or {}
    assert "toolhost/reasonCode" in meta, (meta, again.content)
    assert (meta["toolhost/status"], meta["toolhost/reasonCode"], meta["toolhost/retryable"]) == (
        "failed", "tool.timeout.run_deadline_passed", False)
    record = host.row(_id(again))
    assert (record.state.value, record.approver) == ("failed", None)
    assert SEEN == []  # nothing ran


def test_a_question_open_when_the_runs_deadline_passes_ends_its_call_unasked(
        host: Host) -> None:  # noqa: F811
    # Regression: a 2026-07-28 retry naming the question with no answer after the deadline
    # was asked again; one dismissed after it left the call "runs once approved".
    server, _ = serve(host, TOOLHOST_MCP_RUN_TIMEOUT_S="1",
                      TOOLHOST_MCP_ELICITATION_TIMEOUT_S="60")

    async def journey() -> tuple[Any, Any]:
        async with mcp.Client(server, mode="2026-07-28",
                              elicitation_callback=person()) as client:
            asked = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            await asyncio.sleep(1.5)
            unanswered = await client.session.call_tool(
                "fx.gated", {"path": "g.txt"}, allow_input_required=True,
                request_state=asked.request_state)
            return asked, unanswered

    asked, unanswered = asyncio.run(journey())
    assert isinstance(unanswered, types.CallToolResult), unanswered
    assert (_id(unanswered), (unanswered.meta or {})["toolhost/reasonCode"]) == (
        asked.request_state, "tool.timeout.run_deadline_passed")
    record = host.row(str(asked.request_state))
    assert (record.state.value, record.approver) == ("failed", None)
    assert SEEN == []


def test_a_2025_question_cut_by_the_runs_deadline_ends_its_call_not_left_waiting(
        host: Host) -> None:  # noqa: F811
    # Regression: a form left unanswered past the deadline (here dismissed after it) left the
    # call "runs once approved", and the operator's approval could only fail.
    server, _ = serve(host, TOOLHOST_MCP_RUN_TIMEOUT_S="1",
                      TOOLHOST_MCP_ELICITATION_TIMEOUT_S="60")

    async def journey() -> Any:
        async with mcp.Client(server, elicitation_callback=person(delay=2.0)) as client:
            return await client.call_tool("fx.gated", {"path": "g.txt"})

    answered = asyncio.run(journey())
    meta = answered.meta or {}
    assert (meta["toolhost/status"], meta["toolhost/reasonCode"]) == (
        "failed", "tool.timeout.run_deadline_passed")
    assert host.row(_id(answered)).state.value == "failed"
    assert SEEN == []


def test_a_question_put_again_keeps_its_timeout_from_the_second_asking(
        host: Host) -> None:  # noqa: F811
    # Regression: the first asking's timer fired during the second's timeout, paused the run
    # and discarded its workspace: the timely approval ran in an empty one.
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="1.0")

    async def journey() -> Any:
        async with mcp.Client(server, mode="2026-07-28",
                              elicitation_callback=person()) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            first = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                    allow_input_required=True)
            await asyncio.sleep(0.7)
            second = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                     allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert isinstance(second, types.InputRequiredResult)
            await asyncio.sleep(0.5)  # past the first asking's second, within the second's
            return await client.session.call_tool(
                "fx.gated", {"path": "g.txt"}, allow_input_required=True,
                request_state=second.request_state, input_responses={APPROVAL: APPROVE})

    approved = asyncio.run(journey())
    assert _status(approved) == "succeeded"
    assert [listing for name, _, listing in SEEN if name == "touch"][-1] == "before.txt"


def test_a_question_the_operator_decided_meanwhile_never_pauses_the_run(
        host: Host) -> None:  # noqa: F811
    # Regression: the question's timer paused the run (its workspace discarded) though the
    # operator had already denied the call at the command line.
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="0.5")

    async def journey() -> Any:
        async with mcp.Client(server, mode="2026-07-28",
                              elicitation_callback=person()) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            asked = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            host.deny(str(asked.request_state), "operator", "not now")
            await asyncio.sleep(1.0)  # the question's timeout passes
            return await client.call_tool("fx.write", {"path": "x.txt"})

    after = asyncio.run(journey())
    assert after.content[0].text == "before.txt"  # the workspace kept ("" once discarded)


def test_a_store_that_fails_the_timers_read_still_has_the_run_paused(
        host: Host, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # Regression: the timer reads the row to see whether the call still waits; a failed read
    # dropped the call from those held without pausing the run, though the row still waited
    # (the workspace kept for a call left waiting, the split the pause prevents).
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="0.5")
    real_row, broken = host.row, {"on": False}

    def row(invocation_id: str) -> Any:
        if broken["on"]:
            raise OSError("database is locked")  # the store away for one moment
        return real_row(invocation_id)

    monkeypatch.setattr(host, "row", row)

    async def journey() -> Any:
        async with mcp.Client(server, mode="2026-07-28",
                              elicitation_callback=person()) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            asked = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            await asyncio.sleep(0.3)
            broken["on"] = True
            await asyncio.sleep(0.4)  # the timer fires now
            broken["on"] = False
            return await client.call_tool("fx.write", {"path": "x.txt"})

    after = asyncio.run(journey())
    assert after.content[0].text == ""  # the run paused: its workspace went with it
