"""A tool that needs the person's own words (``Tool.user_words``) over MCP, in the journeys a
reviewer drove: the same call repeated after its approval was left waiting finds the row its
words went on (never the person asked again), and the person is never asked for words a call
cannot use (a scope the run lacks, the run's deadline passed). The server runs in this process
(``mcp.Client(server)``, as in ``test_mcp_in_call``), driven by the SDK's own client over a
real host and data directory."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import make_plugin, make_spec, make_tool

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402
from test_mcp_in_call import (  # noqa: E402
    APPROVE,
    DECLINE,
    PLUGIN,
    SEEN,
    TEXT_OUT,
    WORDS_IN,
    Answer,
    person,
    serve,
)

from toolhost import ToolOutput, UserWords  # noqa: E402
from toolhost._adapters.sqlite_db import DATABASE_NAME  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost._pipeline.policy import policy_from_settings  # noqa: E402
from toolhost.testing import host_for  # noqa: E402

MODES = ["legacy", "2026-07-28"]
WORDS = types.ElicitResult(action="accept", content={"text": "my own words"})
CANCEL = types.ElicitResult(action="cancel")
MODEL = {"text": "the model's words"}


def _note(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    SEEN.append(("note", context.user_turn, arguments["text"]))
    return ToolOutput(structured={"text": arguments["text"]}, content=arguments["text"])


#: Needs the person's words and a scope; allowed by the default policy (NONE/LOW).
NOTE = make_plugin(("fxq",), [attrs.evolve(
    make_tool(make_spec(name="fxq.note", input_schema=WORDS_IN, output_schema=TEXT_OUT,
                        required_scopes=("fxq.write",)), call=_note),
    user_words=UserWords("It asks to note this.", arguments=("text",)))])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    # fx.remember (words, then an approval: WORKSPACE_WRITE/HIGH) and fxq.note (words only).
    SEEN.clear()
    with host_for({"toolhost-fx": PLUGIN, "toolhost-fxq": NOTE},
                  data_dir=tmp_path / "data") as made:
        yield made


def recording(*answers: types.ElicitResult) -> tuple[Answer, list[str]]:
    """The person answering in turn, and which form each question was: ``text`` (their
    words) or ``approve`` (an approval)."""
    forms: list[str] = []
    answer = person(*answers)

    async def asked(context: Any, params: Any) -> types.ElicitResult:
        forms.append(next(iter(params.requested_schema["properties"])))
        return await answer(context, params)

    return asked, forms


def _meta(result: types.CallToolResult) -> tuple[str, str]:
    meta = result.meta or {}
    return str(meta["toolhost/invocationId"]), str(meta["toolhost/status"])


def _rows(host: Host, tool: str) -> list[tuple[str, str | None, str]]:
    """The tool's rows as stored: state, reason code, arguments."""
    db = sqlite3.connect(host.data_dir / DATABASE_NAME)
    try:
        return db.execute("SELECT state, reason_code, arguments FROM tool_invocations "
                          "WHERE tool_name = ? ORDER BY created_at", (tool,)).fetchall()
    finally:
        db.close()


# ---------------------------------------------------------------- the same call, repeated


@pytest.mark.parametrize("mode", MODES)
def test_a_words_call_repeated_after_the_operator_approved_it_answers_its_outcome_unasked(
        host: Host, mode: str) -> None:
    # Before: the repeat put the words form up again, prefilled with the model's text; the
    # person declining it read "did not run, do not retry" though the call had run.
    server, _ = serve(host)
    answers, forms = recording(WORDS, CANCEL, DECLINE)

    async def journey() -> None:
        async with mcp.Client(server, mode=mode, elicitation_callback=answers) as client:
            first = await client.call_tool("fx.remember", MODEL)
            invocation_id, status = _meta(first)
            assert status == "awaiting_approval"
            await host.approve(invocation_id, "operator")  # `toolhost approve ID`
            again = await client.call_tool("fx.remember", MODEL)
            assert not again.is_error, again
            assert _meta(again) == (invocation_id, "succeeded")
            assert again.structured_content == {"text": "my own words"}
            assert forms == ["text", "approve"]
            # Handed back once (D38): the same call again is a new call, the person asked anew.
            third = await client.call_tool("fx.remember", MODEL)
            assert (third.meta or {})["toolhost/reasonCode"] == (
                "tool.permission_denied.user_declined")
            assert forms == ["text", "approve", "text"]

    asyncio.run(journey())
    assert SEEN == [("remember", "my own words", "my own words")]
    assert [state for state, _, _ in _rows(host, "fx.remember")] == ["succeeded", "failed"]


def test_a_words_call_repeated_while_still_waiting_asks_for_the_approval_not_the_words(
        host: Host) -> None:
    # Before: the repeat asked for the words again (the approval's answer read as none given).
    server, _ = serve(host)
    answers, forms = recording(WORDS, CANCEL, APPROVE)

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=answers) as client:
            first = await client.call_tool("fx.remember", MODEL)
            invocation_id, _ = _meta(first)
            again = await client.call_tool("fx.remember", MODEL)
            assert not again.is_error, again
            assert _meta(again) == (invocation_id, "succeeded")

    asyncio.run(journey())
    assert forms == ["text", "approve", "approve"]
    assert SEEN == [("remember", "my own words", "my own words")]
    assert len(_rows(host, "fx.remember")) == 1


def test_another_sessions_identical_call_never_reaches_a_row_with_the_persons_words(
        host: Host) -> None:
    server, _ = serve(host)
    other, _ = serve(host)  # another server of the host: its own session and run
    answers, forms = recording(WORDS, CANCEL)
    theirs, their_forms = recording(DECLINE)

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=answers) as client:
            invocation_id, _ = _meta(await client.call_tool("fx.remember", MODEL))
            await host.approve(invocation_id, "operator")
            async with mcp.Client(other, mode="legacy", elicitation_callback=theirs) as stranger:
                refused = await stranger.call_tool("fx.remember", MODEL)
                assert (refused.meta or {})["toolhost/reasonCode"] == (
                    "tool.permission_denied.user_declined")
                assert "my own words" not in str(refused)
            # The session whose row it is still collects it.
            mine = await client.call_tool("fx.remember", MODEL)
            assert _meta(mine) == (invocation_id, "succeeded")

    asyncio.run(journey())
    assert (forms, their_forms) == (["text", "approve"], ["text"])


# ---------------------------------------------------------------- never asked for nothing


@pytest.mark.parametrize("mode", MODES)
def test_a_words_call_the_run_lacks_the_scope_for_is_refused_without_asking(
        host: Host, mode: str) -> None:
    # Before: the person typed their words, then the call was refused missing_scope with
    # them on the row.
    server, _ = serve(host, TOOLHOST_MCP_SCOPES="")
    answers, forms = recording(WORDS)

    async def journey() -> None:
        async with mcp.Client(server, mode=mode, elicitation_callback=answers) as client:
            refused = await client.call_tool("fxq.note", MODEL)
            assert (refused.meta or {})["toolhost/reasonCode"] == (
                "tool.permission_denied.missing_scope")

    asyncio.run(journey())
    assert forms == []
    assert SEEN == []
    assert "my own words" not in str(_rows(host, "fxq.note"))


@pytest.mark.parametrize("tool", ["fxq.note", "fx.remember"])
@pytest.mark.parametrize("mode", MODES)
def test_a_words_call_after_the_runs_deadline_is_refused_without_asking(
        host: Host, mode: str, tool: str) -> None:
    # Before: the person typed their words, then the call ended run_deadline_passed with
    # them on the row.
    server, _ = serve(host, TOOLHOST_MCP_RUN_TIMEOUT_S="0.5")
    answers, forms = recording(WORDS, APPROVE)

    async def journey() -> None:
        async with mcp.Client(server, mode=mode, elicitation_callback=answers) as client:
            await client.call_tool("fx.write", {"path": "a.txt"})  # the run starts
            await asyncio.sleep(0.8)
            refused = await client.call_tool(tool, MODEL)
            assert refused.is_error
            meta = refused.meta or {}
            assert (meta["toolhost/status"], meta["toolhost/reasonCode"],
                    meta["toolhost/retryable"]) == (
                "failed", "tool.timeout.run_deadline_passed", False)

    asyncio.run(journey())
    assert forms == []
    assert [name for name, _, _ in SEEN] == ["touch"]  # fx.write's alone
    assert [(state, reason) for state, reason, _ in _rows(host, tool)] == [
        ("failed", "tool.timeout.run_deadline_passed")]
    assert "my own words" not in str(_rows(host, tool))


@pytest.fixture
def denying_host(tmp_path: Path) -> Iterator[Host]:
    # fxq.note (NONE/LOW, words) and fx.write (WORKSPACE_WRITE/LOW, none) both denied.
    SEEN.clear()
    policy = policy_from_settings(
        {"TOOLHOST_POLICY": '{"NONE/LOW": "deny", "WORKSPACE_WRITE/LOW": "deny"}'})
    with host_for({"toolhost-fx": PLUGIN, "toolhost-fxq": NOTE}, data_dir=tmp_path / "data",
                  policy=policy) as made:
        yield made


@pytest.mark.parametrize("mode", MODES)
def test_a_words_call_the_policy_denies_is_denied_without_asking(
        denying_host: Host, mode: str) -> None:
    # Before: the person typed their words, then the call was denied with them on the row.
    server, _ = serve(denying_host)
    answers, forms = recording(WORDS)

    async def journey() -> tuple[Any, Any]:
        async with mcp.Client(server, mode=mode, elicitation_callback=answers) as client:
            return (await client.call_tool("fxq.note", MODEL),
                    await client.call_tool("fx.write", {"path": "a.txt"}))

    denied, plain = asyncio.run(journey())
    assert forms == []
    assert SEEN == []
    # Answered as any call its policy cell denies is.
    assert _meta(denied)[1] == "denied"
    shown = [(result.is_error, {k: v for k, v in (result.meta or {}).items()
                                if k != "toolhost/invocationId"}, result.content[0].text)
             for result in (denied, plain)]
    assert shown[0] == shown[1]
    row = denying_host.row(_meta(denied)[0])
    assert (row.state.value, row.reason_code, row.arguments, row.user_turn, row.approver) == (
        "denied", None, MODEL, None, None)
    assert row.argument_digest is not None and (row.policy or {})["action"] == "deny"


@pytest.mark.parametrize("tool", ["fxq.note", "fx.remember"])
def test_a_words_call_refused_after_the_runs_deadline_names_it_as_every_such_refusal(
        host: Host, tool: str) -> None:
    # Before: the words call's row had no detail; every other run_deadline_passed row carries
    # the run's deadline (``steps.check_run_deadline``).
    server, _ = serve(host, TOOLHOST_MCP_RUN_TIMEOUT_S="0.5")
    answers, forms = recording(WORDS, APPROVE)

    async def journey() -> tuple[Any, Any]:
        async with mcp.Client(server, mode="legacy", elicitation_callback=answers) as client:
            await client.call_tool("fx.write", {"path": "a.txt"})  # the run starts
            await asyncio.sleep(0.8)
            return (await client.call_tool("fx.write", {"path": "b.txt"}),
                    await client.call_tool(tool, MODEL))

    plain, worded = asyncio.run(journey())
    assert forms == []
    details = [host.row(_meta(result)[0]).failure_detail for result in (plain, worded)]
    assert details[0] is not None and details[0]["run_deadline"] is not None
    assert details[1] == details[0]


def test_a_words_call_prepares_the_models_arguments_once(
        host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # The repeat's lookup (``Session.worded``) and the form both need the model's arguments
    # prepared: once, not once for each.
    server, _ = serve(host)
    answers, _ = recording(WORDS, APPROVE)
    prepared: list[Any] = []
    real_prepare = host.prepare

    def prepare(registered: Any, arguments: Any) -> Any:
        prepared.append(dict(arguments))
        return real_prepare(registered, arguments)

    monkeypatch.setattr(host, "prepare", prepare)

    async def journey() -> Any:
        async with mcp.Client(server, mode="legacy", elicitation_callback=answers) as client:
            return await client.call_tool("fx.remember", MODEL)

    done = asyncio.run(journey())
    assert _meta(done)[1] == "succeeded"
    # The model's arguments once; the person's, to find or record the approval's row.
    assert prepared == [MODEL, {"text": "my own words"}]
