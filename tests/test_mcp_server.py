"""`toolhost serve`: the registry over MCP, driven as a subprocess by the SDK's own clients.

Every protocol test spawns `python -m toolhost._cli serve` and talks to it with a client no one
here wrote: `mcp.client.stdio.stdio_client` + `ClientSession` (the 2025-11-25 handshake desktop
clients speak), `mcp.Client` (which negotiates 2026-07-28), or the streamable HTTP client. Raw
frames go straight to the subprocess's stdin. The approval tests use a fixture plugin
installed as a real distribution (tests/mcp_fixture_plugin.py); the demo.external_write round
trip runs when the toolhost-demo distribution is installed and is reported skipped otherwise.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import invocation_rows, make_plugin, make_spec, make_tool, nothing_left
from installed import install_fake_plugin

from toolhost import Outcome, OutcomeStatus, Tool, ToolOutput, Trust
from toolhost._model import host_reasons as core_messages
from toolhost._model.settings import Settings
from toolhost._model.spec import Idempotency, Risk, SideEffect
from toolhost.testing import host_for, run_toolhost
from toolhost_math.tool import INPUT_SCHEMA as MATH_IN
from toolhost_math.tool import OUTPUT_SCHEMA as MATH_OUT

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

# Everything below needs the SDK.
import anyio  # noqa: E402
import mcp.types as types  # noqa: E402
from journeys.journey_support import free_port  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from toolhost._mcp.annotations import HINT_TABLE, HINTS, hints_for, title_for  # noqa: E402
from toolhost._mcp.approvals import Decision, decision_of, supports_form_elicitation  # noqa: E402
from toolhost._mcp.config import ConfigError, ServeConfig  # noqa: E402
from toolhost._mcp.frames import error_for_frame  # noqa: E402
from toolhost._mcp.results import to_call_tool_result  # noqa: E402
from toolhost._mcp.server import build_server, parse_http_address  # noqa: E402
from toolhost._mcp.transport import FrameTooLarge, _PipeReader, _PipeWriter  # noqa: E402

FIRST_PARTY = "toolhost-math,toolhost-system"
FIXTURE_SOURCE = Path(__file__).with_name("mcp_fixture_plugin.py")
BAD_ZONE = "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London."
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw-frames", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


# ---------------------------------------------------------------------------- harness


class Served:
    """The environment of `toolhost serve` subprocesses sharing one data directory."""

    _counter = itertools.count()

    def __init__(self, tmp_path: Path, plugins: str = FIRST_PARTY, site: Path | None = None,
                 **settings: str) -> None:
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "data"
        self.site = site
        self.settings = {"TOOLHOST_DATA_DIR": str(self.data_dir), "TOOLHOST_PLUGINS": plugins,
                         **settings}
        self.stderr_logs: list[Path] = []
        self.processes: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
        env.update(self.settings)
        if self.site is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.site), *filter(None, [os.environ.get("PYTHONPATH")])])
        return env

    def params(self, *args: str) -> StdioServerParameters:
        # Only what a desktop client's config would pass: the command, args and env.
        env = {k: v for k, v in self.env().items() if k.startswith(("TOOLHOST_", "FXW_"))}
        if self.site is not None:
            env["PYTHONPATH"] = self.env()["PYTHONPATH"]
        return StdioServerParameters(command=sys.executable,
                                     args=["-m", "toolhost._cli", "serve", *args], env=env)

    def errlog(self) -> Path:
        path = self.tmp_path / f"serve-stderr-{next(self._counter)}.log"
        self.stderr_logs.append(path)
        return path

    def stderr(self) -> str:
        return "".join(p.read_text() for p in self.stderr_logs if p.exists())

    def toolhost(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_toolhost(*args, data_dir=self.data_dir, env=self.settings,
                            path=[self.site] if self.site is not None else [])

    def popen(self, *args: str, stdin: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
        # Unbuffered, so select() on stdout or stderr sees every byte not yet read.
        process = subprocess.Popen([sys.executable, "-m", "toolhost._cli", "serve", *args],
                                   stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=self.env(), bufsize=0)
        self.processes.append(process)
        return process

    def stop_leftovers(self) -> None:
        """Kill a server a failed test left running (a passing test has ended each one)."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.communicate()

    def rows(self) -> list[dict[str, Any]]:
        return invocation_rows(self.data_dir / "toolhost.sqlite3")


@asynccontextmanager
async def session(served: Served, *args: str, **client: Any) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession (2025-11-25 handshake) on a fresh `toolhost serve`."""
    with served.errlog().open("w") as errlog:
        async with stdio_client(served.params(*args), errlog=errlog) as (read, write), \
                ClientSession(read, write, **client) as s:
            await s.initialize()
            yield s


def run(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


def meta(result: types.CallToolResult, key: str) -> Any:
    return (result.meta or {})[f"toolhost/{key}"]


def annotations_of(tool: types.Tool) -> dict[str, Any]:
    assert tool.annotations is not None
    return tool.annotations.model_dump(by_alias=True, exclude_none=True)


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    served = Served(tmp_path)
    yield served
    served.stop_leftovers()


@pytest.fixture(name="fixture_served")
def fixture_served_fixture(tmp_path: Path) -> Iterator[Served]:
    """The fixture plugin (fxw.external_write, fxw.slow) installed as `fake-mcp`."""
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", FIXTURE_SOURCE.read_text())
    served = Served(tmp_path, plugins="fake-mcp", site=site, FXW_LOG=str(tmp_path / "fxw.log"))
    yield served
    served.stop_leftovers()


def executions(served: Served) -> list[str]:
    log = Path(served.settings["FXW_LOG"])
    return log.read_text().splitlines() if log.exists() else []


# ---------------------------------------------------------------------------- the annotation table
# One test per row of the one table, with the expected hints written out here, not derived.

EXPECTED_ROWS = [
    (Idempotency.READ_ONLY, {"readOnlyHint": True, "idempotentHint": True}),
    (Idempotency.IDEMPOTENT, {"readOnlyHint": False, "idempotentHint": True}),
    (Idempotency.CONDITIONALLY_IDEMPOTENT, {"readOnlyHint": False, "idempotentHint": False}),
    (Idempotency.NON_IDEMPOTENT, {"readOnlyHint": False, "idempotentHint": False}),
    (SideEffect.NONE, {"destructiveHint": False, "openWorldHint": False}),
    (SideEffect.WORKSPACE_READ, {"destructiveHint": False, "openWorldHint": False}),
    (SideEffect.WORKSPACE_WRITE,
     {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}),
    (SideEffect.CODE_EXECUTION,
     {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}),
    (SideEffect.EXTERNAL_WRITE,
     {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True}),
]


@pytest.mark.parametrize(("value", "hints"), EXPECTED_ROWS, ids=lambda v: getattr(v, "name", ""))
def test_annotation_table_row(value: Idempotency | SideEffect, hints: dict[str, bool]) -> None:
    assert dict(HINT_TABLE[value]) == hints


def test_annotation_table_has_a_row_for_every_classification_value() -> None:
    assert set(HINT_TABLE) == set(Idempotency) | set(SideEffect)
    assert len(HINT_TABLE) == len(EXPECTED_ROWS)


@pytest.mark.parametrize(("side_effect", "idempotency", "expected"), [
    (SideEffect.NONE, Idempotency.READ_ONLY, (True, False, True, False)),  # math.calculate
    (SideEffect.EXTERNAL_WRITE, Idempotency.NON_IDEMPOTENT, (False, True, False, True)),  # demo
    (SideEffect.WORKSPACE_WRITE, Idempotency.IDEMPOTENT, (False, True, True, False)),
    # A writer declared READ_ONLY is never advertised read-only: clients skip prompts on it.
    (SideEffect.WORKSPACE_WRITE, Idempotency.READ_ONLY, (False, True, True, False)),
])
def test_hints_combine_both_axes(side_effect: SideEffect, idempotency: Idempotency,
                                 expected: tuple[bool, ...]) -> None:
    spec = make_spec(side_effect=side_effect, idempotency=idempotency, risk=Risk.HIGH)
    assert tuple(hints_for(spec)[h] for h in HINTS) == expected


def test_titles_read_as_words() -> None:
    assert title_for(make_spec(name="math.calculate")) == "Math: Calculate"
    assert title_for(make_spec(name="system.current_time")) == "System: Current time"


# ---------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(("line", "code", "rid"), [
    ("this is not json", -32700, None),
    ('{"foo": 1}', -32600, None),
    ('{"jsonrpc": "2.0", "id": 9, "method": 5}', -32600, 9),
    ('{"jsonrpc": "2.0", "id": true, "method": 5}', -32600, None),
    ("[1, 2]", -32600, None),
])
def test_unreadable_frames_map_to_json_rpc_errors(line: str, code: int, rid: Any) -> None:
    with pytest.raises(ValueError) as caught:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    reply = error_for_frame(caught.value)
    assert (reply.error.code, reply.id) == (code, rid)


def test_a_request_id_must_be_a_string_or_an_integer() -> None:
    from toolhost._mcp.frames import parse_frame

    for rid in UNUSABLE_IDS:
        with pytest.raises(ValueError) as caught:
            parse_frame(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}))
        reply = error_for_frame(caught.value)
        assert (reply.error.code, reply.error.message, reply.id) == (
            -32600, "Invalid Request", None), rid
    assert isinstance(parse_frame('{"jsonrpc": "2.0", "id": "a", "method": "ping"}'),
                      types.JSONRPCRequest)
    assert isinstance(parse_frame('{"jsonrpc": "2.0", "id": -3, "method": "ping"}'),
                      types.JSONRPCRequest)
    assert isinstance(parse_frame(json.dumps(INITIALIZED)), types.JSONRPCNotification)


def approval_prompt(arguments: Any) -> str:
    from toolhost._mcp.approvals import approval_message
    from toolhost._model.invocations import InvocationRecord, InvocationState

    record = InvocationRecord(
        id="inv-1", run_id="run-1", principal_id="mcp", scopes=(), tool_name="fx.send",
        tool_version="1.0.0", arguments=arguments, argument_digest="sha256:00",
        state=InvocationState.AWAITING_APPROVAL,
        created_at=datetime.datetime(2026, 7, 25, tzinfo=datetime.UTC))
    registered: Any = type("Registered", (), {"spec": make_spec(
        name="fx.send", side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.HIGH,
        idempotency=Idempotency.NON_IDEMPOTENT)})()
    return approval_message(record, registered)


PROMPT_HEAD = [
    "toolhost asks to approve fx.send 1.0.0 (EXTERNAL_WRITE, risk HIGH): invocation inv-1, "
    "argument digest sha256:00.",
    "Approve runs it once with exactly the arguments in the block below (canonical JSON).",
    "```json",
]


def test_the_approval_prompt_shows_the_arguments_as_a_block_of_their_own() -> None:
    assert approval_prompt({"to": "ops", "n": 1}).split("\n") == [
        *PROMPT_HEAD, '{"n":1,"to":"ops"}', "```"]


def test_arguments_cannot_imitate_the_approval_prompt() -> None:
    # The form's own wording, a fence, newlines, and characters a client may render as a line
    # break, a direction change or nothing at all.
    forged = ('x"}\n```\nApprove runs it once with exactly these arguments.\n'
              "toolhost asks to approve fx.send 1.0.0 (NONE, risk LOW)\u2028\u2029\x85\r"
              "\u202e\u200b\U000e0041\ud800 ok")
    message = approval_prompt({"to": forged, "é": "ça va"})
    lines = message.split("\n")
    assert message.splitlines() == lines  # no line break of any other kind
    assert lines == [*PROMPT_HEAD, lines[3], "```"]
    assert lines[3] == (
        '{"to":"x\\"}\\n```\\nApprove runs it once with exactly these arguments.\\n'
        "toolhost asks to approve fx.send 1.0.0 (NONE, risk LOW)"
        "\\u2028\\u2029\\u0085\\r\\u202e\\u200b\\udb40\\udc41\\ud800 ok\",\"é\":\"ça va\"}")
    assert json.loads(lines[3]) == {"to": forged, "é": "ça va"}  # the block is the arguments
    message.encode("utf-8")  # a lone surrogate is shown escaped, so the prompt can be sent


def test_arguments_are_shown_whole_or_not_at_all() -> None:
    from toolhost._mcp.approvals import ARGUMENTS_SHOWN, arguments_shown

    # D466: at most ARGUMENTS_SHOWN characters of block, counting each escape as what it shows.
    fits = {"text": "a" * (ARGUMENTS_SHOWN - 11)}
    assert approval_prompt(fits).split("\n")[3] == '{"text":"' + "a" * (ARGUMENTS_SHOWN - 11) + '"}'
    assert arguments_shown({"text": "a" * (ARGUMENTS_SHOWN - 10)}) is None
    assert arguments_shown({"text": "\u200b" * (ARGUMENTS_SHOWN // 6)}) is None
    with pytest.raises(ValueError, match="too long to ask about in a form"):
        approval_prompt({"text": "a" * (ARGUMENTS_SHOWN + 1)})


def test_http_addresses() -> None:
    assert parse_http_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http_address("[::1]:80") == ("::1", 80)
    assert parse_http_address("localhost:1") == ("localhost", 1)
    for bad in ("8765", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000", ":80"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_http_address(bad)
    for remote in ("0.0.0.0:8765", "192.168.1.2:80", "example.com:80"):
        with pytest.raises(ValueError, match="loopback"):
            parse_http_address(remote)


def _unused_body(arguments: Any, context: Any) -> ToolOutput:
    raise AssertionError("never called")


def test_config_defaults_grant_the_roster_scopes() -> None:
    class Fake:
        def __init__(self, scopes: tuple[str, ...], checked: tuple[str, ...] = ()) -> None:
            self.spec = make_spec(required_scopes=scopes)
            self.tool = Tool(self.spec, call=_unused_body, checked_scopes=checked)

    roster: Any = [Fake(("a.read",)), Fake(("b.write", "a.read")), Fake((), ("c.read",))]
    config = ServeConfig.from_settings(Settings(), roster)
    # Required scopes and the ones a body checks for some calls (Tool.checked_scopes).
    assert (config.principal.id, config.principal.scopes) == (
        "mcp", frozenset({"a.read", "b.write", "c.read"}))
    assert (config.elicitation, config.elicitation_timeout_s, config.loop_stdio) == (
        True, 300.0, True)
    chosen = ServeConfig.from_settings(Settings({
        "TOOLHOST_MCP_PRINCIPAL": "desk", "TOOLHOST_MCP_SCOPES": " a.read, ,x ",
        "TOOLHOST_MCP_ELICITATION": "OFF", "TOOLHOST_MCP_ELICITATION_TIMEOUT_S": "2.5",
        "TOOLHOST_MCP_STDIO": "sdk"}), roster)
    assert (chosen.principal.id, chosen.principal.scopes) == ("desk", frozenset({"a.read", "x"}))
    assert (chosen.elicitation, chosen.elicitation_timeout_s, chosen.loop_stdio) == (
        False, 2.5, False)
    assert ServeConfig.from_settings(Settings({"TOOLHOST_MCP_SCOPES": ""}), roster
                                     ).principal.scopes == frozenset()
    assert chosen.workspace is None
    assert config.recover_interval_s == 60.0
    assert ServeConfig.from_settings(Settings({"TOOLHOST_RECOVER_INTERVAL_S": "0"}), roster
                                     ).recover_interval_s is None
    assert ServeConfig.from_settings(Settings({"TOOLHOST_RECOVER_INTERVAL_S": "0.5"}), roster
                                     ).recover_interval_s == 0.5
    for name, value in [("TOOLHOST_MCP_ELICITATION", "maybe"),
                        ("TOOLHOST_MCP_WORKSPACE", "/no/such/directory"),
                        ("TOOLHOST_MCP_ELICITATION_TIMEOUT_S", "0"),
                        ("TOOLHOST_MCP_ELICITATION_TIMEOUT_S", "soon"),
                        ("TOOLHOST_MCP_STDIO", "threads"),
                        ("TOOLHOST_RECOVER_INTERVAL_S", "-1"),
                        ("TOOLHOST_RECOVER_INTERVAL_S", "often")]:
        with pytest.raises(ConfigError, match=name):
            ServeConfig.from_settings(Settings({name: value}), roster)


def test_decisions_and_capabilities() -> None:
    accept = types.ElicitResult(action="accept", content={"approve": True})
    assert decision_of(accept) is Decision.APPROVE
    assert decision_of(types.ElicitResult(action="accept", content={"approve": False})) is (
        Decision.DENY)
    assert decision_of(types.ElicitResult(action="decline")) is Decision.DENY
    assert decision_of(types.ElicitResult(action="cancel")) is Decision.UNDECIDED
    assert decision_of(types.ElicitResult(action="accept", content={})) is Decision.UNDECIDED
    assert decision_of(types.ElicitResult(action="accept", content={"approve": "yes"})) is (
        Decision.UNDECIDED)
    assert decision_of(None) is Decision.UNDECIDED
    caps = types.ClientCapabilities
    assert not supports_form_elicitation(None)
    assert not supports_form_elicitation(caps())
    assert supports_form_elicitation(caps(elicitation=types.ElicitationCapability()))  # 2025-06-18
    assert supports_form_elicitation(caps(elicitation=types.ElicitationCapability(
        form=types.FormElicitationCapability())))
    assert not supports_form_elicitation(caps(elicitation=types.ElicitationCapability(
        url=types.UrlElicitationCapability())))


def test_outcomes_that_are_not_a_plain_success_are_error_results() -> None:
    truncated = to_call_tool_result(Outcome(
        tool="fx.echo", version="1.0.0", status=OutcomeStatus.SUCCEEDED, content="head [...] tail",
        structured=None, output_trust=Trust.INTERNAL_TOOL, invocation_id="i1", truncated=True,
        artifacts=({"id": "a1"},)))
    assert (truncated.is_error, truncated.structured_content) == (True, None)
    assert (meta(truncated, "truncated"), meta(truncated, "artifacts")) == (True, ["a1"])
    running = to_call_tool_result(Outcome(
        tool="fx.echo", version="1.0.0", status=OutcomeStatus.RUNNING,
        content=core_messages.RUNNING_TEXT, invocation_id="i2"))
    assert running.is_error and text_of(running).startswith(core_messages.RUNNING_TEXT)
    assert meta(running, "status") == "running"


def test_a_server_side_failure_reads_as_the_static_message(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    from toolhost._mcp import calls

    host = host_for({"fx": make_plugin(tools=[make_tool()])}, data_dir=tmp_path)
    roster = [host.registry.resolve("fx.echo")]
    server, sessions = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))

    async def broken(*args: Any) -> Any:
        raise RuntimeError("operator-only detail")

    monkeypatch.setattr(calls.ToolCalls, "call", broken)
    entry = server.get_request_handler("tools/call")
    assert entry is not None
    ctx: Any = type("Ctx", (), {"request": None})()
    result = run(lambda: entry.handler(ctx, types.CallToolRequestParams(name="fx.echo")))
    assert result.is_error
    assert text_of(result) == core_messages.MESSAGES[core_messages.INTERNAL_UNEXPECTED]
    assert "operator-only" not in result.model_dump_json()
    sessions.close()
    host.close()


def test_the_pipe_reader_skips_blank_lines_and_reports_long_and_broken_frames() -> None:
    async def main() -> list[Any]:
        import asyncio

        reader = asyncio.StreamReader(limit=64)
        reader.feed_data(b"\n" + b"x" * 200 + b"\n" + b"not json\n"
                         + json.dumps(INITIALIZED).encode() + b"\n")
        reader.feed_eof()
        return [item async for item in _PipeReader(reader)]

    too_long, unreadable, message = run(main)
    assert isinstance(too_long, FrameTooLarge) and error_for_frame(too_long).error.code == -32700
    assert isinstance(unreadable, ValueError)
    assert message.message.method == "notifications/initialized"


def test_the_sdk_transports_reader_screens_lines_as_the_loop_one_does(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import threading

    from toolhost._mcp import transport

    # A limit of 64 bytes, read 8 bytes at a time: long lines end in a later read than they start.
    monkeypatch.setattr(transport, "MAX_FRAME_BYTES", 64)
    monkeypatch.setattr(transport, "_CHUNK_BYTES", 8)
    ping = '{"jsonrpc":"2.0","id":5,"method":"ping"}'
    wire = tmp_path / "wire"
    wire.write_bytes(("\n  \n" + " " * 200 + ping + "\n" + "x" * 65 + "\n"
                      + '{"jsonrpc":"2.0","id":{},"method":"ping"}\n' + "not json\n"
                      + json.dumps(INITIALIZED) + "\n" + "é" * 32 + "\n" + ping).encode())
    fd = os.open(wire, os.O_RDONLY)
    try:
        lines = list(transport._wire_lines(fd, threading.Event()))
    finally:
        os.close(fd)
    assert lines == [transport._OVER_LONG_STAND_IN, transport._OVER_LONG_STAND_IN,
                     transport._UNUSABLE_ID_STAND_IN, "not json\n",
                     json.dumps(INITIALIZED) + "\n", "é" * 32 + "\n", ping]
    replies = []
    for line in lines[:3]:
        with pytest.raises(ValueError) as caught:
            types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        replies.append(error_for_frame(caught.value).model_dump(by_alias=True, exclude_unset=True))
    assert replies == [PARSE_ERROR, PARSE_ERROR, INVALID_REQUEST]


def test_the_pipe_writer_stops_quietly_when_the_client_closed_its_end() -> None:
    class Gone:
        writes = 0

        def write(self, data: bytes) -> None:
            Gone.writes += 1
            raise BrokenPipeError

        async def drain(self) -> None:
            raise AssertionError("never reached")

    async def main() -> None:
        from mcp.shared.message import SessionMessage

        writer = _PipeWriter(Gone())  # type: ignore[arg-type]
        frame = SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="x"))
        await writer.send(frame)
        await writer.send(frame)  # dropped without touching the pipe again
        await writer.aclose()

    run(main)
    assert Gone.writes == 1


# ---------------------------------------------------------------------------- the SDK client


def test_initialize_list_and_call(served: Served) -> None:
    async def main() -> None:
        with served.errlog().open("w") as errlog:
            async with stdio_client(served.params(), errlog=errlog) as (read, write), \
                    ClientSession(read, write) as s:
                init = await s.initialize()
                assert (init.server_info.name, init.protocol_version) == ("toolhost", "2025-11-25")
                assert init.capabilities.tools is not None
                listed = {t.name: t for t in (await s.list_tools()).tools}
                assert sorted(listed) == ["math.calculate", "system.current_time"]

                calc = listed["math.calculate"]
                assert (calc.input_schema, calc.output_schema) == (MATH_IN, MATH_OUT)
                assert calc.title == "Math: Calculate"
                assert annotations_of(calc) == {
                    "title": "Math: Calculate", "readOnlyHint": True, "destructiveHint": False,
                    "idempotentHint": True, "openWorldHint": False}
                assert (calc.meta or {})["toolhost/version"] == "1.0.0"
                clock = listed["system.current_time"]
                assert clock.title == "System: Current time"
                assert clock.input_schema["properties"]["timezone"]["default"] == "UTC"
                assert clock.output_schema is not None
                assert "unix_seconds" in clock.output_schema["required"]

                result = await s.call_tool("math.calculate", {"expression": "17 * 23"})
                assert not result.is_error
                assert text_of(result) == "391"
                assert result.structured_content == {
                    "result": "391", "result_exact": True, "expression": "17 * 23"}
                assert meta(result, "status") == "succeeded"

                bad = await s.call_tool("system.current_time", {"timezone": "EST"})
                assert bad.is_error
                assert text_of(bad) == BAD_ZONE
                assert meta(bad, "reasonCode") == "tool.invalid_arguments.unknown_timezone"
                assert bad.structured_content is None

                now = await s.call_tool("system.current_time", {})
                assert not now.is_error and now.structured_content["timezone"] == "UTC"

    run(main)
    assert_no_traceback(served.stderr())
    rows = served.rows()
    assert [(r["tool_name"], r["state"]) for r in rows] == [
        ("math.calculate", "succeeded"), ("system.current_time", "failed"),
        ("system.current_time", "succeeded")]
    assert {(r["principal_id"], r["run_id"]) for r in rows} == {("mcp", rows[0]["run_id"])}


def test_arguments_that_violate_the_schema_are_error_results(served: Served) -> None:
    async def main() -> None:
        async with session(served) as s:
            for arguments in ({"expression": 5}, {"expression": "1", "extra": 1}, {}):
                result = await s.call_tool("math.calculate", arguments)
                assert result.is_error
                assert text_of(result) == core_messages.MESSAGES[core_messages.INVALID_SCHEMA]
                assert meta(result, "reasonCode") == core_messages.INVALID_SCHEMA

    run(main)
    assert_no_traceback(served.stderr())
    assert all("problem" not in json.dumps(r["result_content"]) for r in served.rows())


def test_unknown_and_unserved_tools_are_invalid_params(served: Served) -> None:
    async def main() -> None:
        async with session(served, "--enable", "math.calculate") as s:
            assert [t.name for t in (await s.list_tools()).tools] == ["math.calculate"]
            for name, code in [("no.such_tool", core_messages.UNKNOWN_TOOL),
                               ("system.current_time", core_messages.NOT_ENABLED)]:
                with pytest.raises(MCPError) as caught:
                    await s.call_tool(name, {})
                error = caught.value.error
                assert error.code == types.INVALID_PARAMS
                assert error.message == core_messages.MESSAGES[code]
                assert error.data["reasonCode"] == code
            # The server carries on after a protocol error.
            result = await s.call_tool("math.calculate", {"expression": "2 + 2"})
            assert text_of(result) == "4"

    run(main)
    assert_no_traceback(served.stderr())
    assert [(r["tool_name"], r["reason_code"]) for r in served.rows()] == [
        ("no.such_tool", core_messages.UNKNOWN_TOOL),
        ("system.current_time", core_messages.NOT_ENABLED), ("math.calculate", None)]


def test_bad_flags_and_settings_exit_2_with_one_line(served: Served) -> None:
    cases = [
        (["--enable", "nope.tool"], {},
         "toolhost: --enable: no tool 'nope.tool' is registered (toolhost tools lists them)\n"),
        (["--http", "0.0.0.0:8765"], {}, "loopback"),
        (["--http", "8765"], {}, "HOST:PORT"),
        ([], {"TOOLHOST_MCP_ELICITATION": "sometimes"}, "TOOLHOST_MCP_ELICITATION"),
    ]
    for args, settings, message in cases:
        served.settings.update(settings)
        result = served.toolhost("serve", *args)
        for key in settings:
            del served.settings[key]
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and result.stderr.count("\n") == 1
        assert result.stdout == ""


def test_scopes_and_principal_come_from_the_settings(fixture_served: Served) -> None:
    fixture_served.settings.update(TOOLHOST_MCP_SCOPES="", TOOLHOST_MCP_PRINCIPAL="desk-agent")

    async def main() -> None:
        async with session(fixture_served) as s:
            result = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert result.is_error
            assert meta(result, "reasonCode") == core_messages.MISSING_SCOPE
            assert text_of(result) == core_messages.MESSAGES[core_messages.MISSING_SCOPE]

    run(main)
    (row,) = fixture_served.rows()
    assert (row["principal_id"], row["scopes"], row["state"]) == ("desk-agent", "[]", "failed")
    assert executions(fixture_served) == []


# ---------------------------------------------------------------------------- approvals


def test_approval_without_elicitation_then_operator_then_recorded_result(
        fixture_served: Served) -> None:
    async def main() -> None:
        async with session(fixture_served) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert annotations_of(listed["fxw.external_write"]) == {
                "title": "Fxw: External write", "readOnlyHint": False, "destructiveHint": True,
                "idempotentHint": False, "openWorldHint": True}

            paused = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert paused.is_error
            invocation_id = meta(paused, "invocationId")
            assert meta(paused, "status") == "awaiting_approval"
            assert meta(paused, "approveCommand") == f"toolhost approve {invocation_id}"
            assert text_of(paused).startswith(core_messages.AWAITING_APPROVAL_TEXT)
            assert f"`toolhost approve {invocation_id}`" in text_of(paused)

            # Asking again before anyone decided is the same pending call, not a second one.
            again = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert meta(again, "invocationId") == invocation_id

            pending = json.loads(fixture_served.toolhost("pending", "--json").stdout)
            assert [p["id"] for p in pending] == [invocation_id]
            approved = fixture_served.toolhost("approve", invocation_id)
            assert (approved.returncode, approved.stdout) == (0, "recorded a\n")
            assert executions(fixture_served) == ["wrote a"]

            # The same arguments after approval: the recorded result, not a second execution.
            recorded = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert not recorded.is_error
            assert text_of(recorded) == "recorded a"
            assert recorded.structured_content == {"recorded": True, "destination": "a"}
            assert meta(recorded, "invocationId") == invocation_id
            assert executions(fixture_served) == ["wrote a"]

            # Once answered, a further identical call is a new request for approval.
            third = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert meta(third, "status") == "awaiting_approval"
            assert meta(third, "invocationId") != invocation_id
            # Different arguments never match a decided row.
            other = await s.call_tool("fxw.external_write", {"destination": "b"})
            assert meta(other, "status") == "awaiting_approval"

    run(main)
    assert_no_traceback(fixture_served.stderr())
    assert "toolhost approve" in fixture_served.stderr()  # the operator's line, on stderr
    assert executions(fixture_served) == ["wrote a"]
    assert [r["state"] for r in fixture_served.rows()] == [
        "succeeded", "awaiting_approval", "awaiting_approval"]


def test_operator_denial_is_returned_once(fixture_served: Served) -> None:
    async def main() -> None:
        async with session(fixture_served) as s:
            paused = await s.call_tool("fxw.external_write", {"destination": "z"})
            invocation_id = meta(paused, "invocationId")
            assert fixture_served.toolhost("deny", invocation_id, "--reason", "no").returncode == 0
            denied = await s.call_tool("fxw.external_write", {"destination": "z"})
            assert (denied.is_error, text_of(denied)) == (True, core_messages.DENIED_TEXT)
            assert (meta(denied, "status"), meta(denied, "invocationId")) == (
                "denied", invocation_id)

    run(main)
    assert executions(fixture_served) == []


def elicitation_answers(*answers: types.ElicitResult, asked: list[str]) -> Any:
    queue = list(answers)

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.requested_schema["required"] == ["approve"]
        asked.append(params.message)
        return queue.pop(0)

    return callback


def test_elicitation_accept_decline_and_cancel(fixture_served: Served) -> None:
    asked: list[str] = []
    callback = elicitation_answers(
        types.ElicitResult(action="accept", content={"approve": True}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
        types.ElicitResult(action="accept", content={"approve": True}),
        asked=asked)

    async def main() -> None:
        async with session(fixture_served, elicitation_callback=callback) as s:
            accepted = await s.call_tool("fxw.external_write", {"destination": "yes"})
            assert not accepted.is_error
            assert accepted.structured_content == {"recorded": True, "destination": "yes"}
            assert executions(fixture_served) == ["wrote yes"]

            declined = await s.call_tool("fxw.external_write", {"destination": "no"})
            assert (declined.is_error, text_of(declined)) == (True, core_messages.DENIED_TEXT)

            cancelled = await s.call_tool("fxw.external_write", {"destination": "later"})
            assert meta(cancelled, "status") == "awaiting_approval"
            # Asked again on the retry: this time the user approves the same pending row.
            retried = await s.call_tool("fxw.external_write", {"destination": "later"})
            assert not retried.is_error
            assert meta(retried, "invocationId") == meta(cancelled, "invocationId")

    run(main)
    assert_no_traceback(fixture_served.stderr())
    assert len(asked) == 4
    assert "fxw.external_write 1.0.0 (EXTERNAL_WRITE, risk HIGH)" in asked[0]
    assert '{"destination":"yes"}' in asked[0] and "sha256:" in asked[0]
    assert asked[0].split("\n")[1:] == [PROMPT_HEAD[1], "```json", '{"destination":"yes"}', "```"]
    rows = fixture_served.rows()
    assert [(r["state"], r["approver"]) for r in rows] == [
        ("succeeded", "mcp-client:mcp"), ("denied", "mcp-client:mcp"),
        ("succeeded", "mcp-client:mcp")]
    assert rows[1]["denial_reason"] == "declined in the MCP client"
    assert executions(fixture_served) == ["wrote yes", "wrote later"]


def test_elicitation_off_leaves_the_approval_to_the_operator(fixture_served: Served) -> None:
    fixture_served.settings["TOOLHOST_MCP_ELICITATION"] = "off"
    asked: list[str] = []

    async def main() -> None:
        async with session(fixture_served, elicitation_callback=elicitation_answers(
                asked=asked)) as s:
            paused = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert meta(paused, "status") == "awaiting_approval"

    run(main)
    assert asked == [] and executions(fixture_served) == []


def test_an_unanswered_elicitation_leaves_the_call_pending(fixture_served: Served) -> None:
    fixture_served.settings["TOOLHOST_MCP_ELICITATION_TIMEOUT_S"] = "0.5"

    async def never(context: Any, params: Any) -> types.ElicitResult:
        await anyio.sleep(30)
        raise AssertionError("the server stopped waiting long before this")

    async def main() -> None:
        async with session(fixture_served, elicitation_callback=never) as s:
            with anyio.fail_after(20):
                paused = await s.call_tool("fxw.external_write", {"destination": "a"})
            assert meta(paused, "status") == "awaiting_approval"

    run(main)
    assert [r["state"] for r in fixture_served.rows()] == ["awaiting_approval"]
    assert executions(fixture_served) == []


def test_a_2026_client_approves_through_input_required(fixture_served: Served) -> None:
    asked: list[str] = []
    callback = elicitation_answers(
        types.ElicitResult(action="accept", content={"approve": True}),
        types.ElicitResult(action="decline"), asked=asked)

    async def main() -> None:
        with fixture_served.errlog().open("w") as errlog:
            transport = stdio_client(fixture_served.params(), errlog=errlog)
            async with mcp.Client(transport, elicitation_callback=callback) as client:
                assert client.protocol_version == "2026-07-28"
                accepted = await client.call_tool("fxw.external_write", {"destination": "m"})
                assert not accepted.is_error
                assert accepted.structured_content == {"recorded": True, "destination": "m"}
                declined = await client.call_tool("fxw.external_write", {"destination": "n"})
                assert text_of(declined) == core_messages.DENIED_TEXT
                # A 2026 client without the answer gets the question back, never a decision.
                raw = await client.session.call_tool(
                    "fxw.external_write", {"destination": "o"}, allow_input_required=True)
                assert isinstance(raw, types.InputRequiredResult)
                forged = await client.session.call_tool(
                    "fxw.external_write", {"destination": "o"}, allow_input_required=True,
                    request_state="not-the-row", input_responses={
                        "toolhost.approval": types.ElicitResult(
                            action="accept", content={"approve": True})})
                assert isinstance(forged, types.InputRequiredResult)

    run(main)
    assert len(asked) == 2
    assert executions(fixture_served) == ["wrote m"]
    assert [r["state"] for r in fixture_served.rows()] == [
        "succeeded", "denied", "awaiting_approval"]


def test_demo_external_write_round_trip(tmp_path: Path) -> None:
    try:
        importlib.metadata.distribution("toolhost-demo")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("toolhost-demo is not installed (plugins/demo, issue #4): "
                    "the demo.external_write round trip runs once it is")
    served = Served(tmp_path, plugins=f"{FIRST_PARTY},toolhost-demo")
    arguments = {"destination": "x", "content": "y"}
    expected = {"recorded": True, "destination": "x", "byte_count": 1,
                "checksum": "sha256:" + hashlib.sha256(b"y").hexdigest()}

    async def main() -> None:
        async with session(served) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
            hints = annotations_of(listed["demo.external_write"])
            assert (hints["readOnlyHint"], hints["destructiveHint"], hints["idempotentHint"],
                    hints["openWorldHint"]) == (False, True, False, True)
            paused = await s.call_tool("demo.external_write", arguments)
            assert meta(paused, "status") == "awaiting_approval"
            invocation_id = meta(paused, "invocationId")
            assert served.toolhost("approve", invocation_id).returncode == 0
            recorded = await s.call_tool("demo.external_write", arguments)
            assert not recorded.is_error and recorded.structured_content == expected
            assert meta(recorded, "invocationId") == invocation_id

        asked: list[str] = []
        callback = elicitation_answers(
            types.ElicitResult(action="accept", content={"approve": True}), asked=asked)
        async with session(served, elicitation_callback=callback) as s:
            accepted = await s.call_tool("demo.external_write", arguments)
            assert not accepted.is_error and accepted.structured_content == expected
        assert len(asked) == 1

    run(main)
    assert_no_traceback(served.stderr())
    assert [r["state"] for r in served.rows() if r["tool_name"] == "demo.external_write"] == [
        "succeeded", "succeeded"]


def test_an_operator_workspace_is_every_sessions_workspace(tmp_path: Path) -> None:
    try:
        importlib.metadata.distribution("toolhost-workspace")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("toolhost-workspace is not installed (plugins/workspace, issue #4)")
    workspace = tmp_path / "project"
    workspace.mkdir()
    served = Served(tmp_path, plugins="toolhost-workspace", TOOLHOST_MCP_WORKSPACE=str(workspace))

    async def main() -> None:
        async with session(served) as s:
            wrote = await s.call_tool("workspace.write_text", {"path": "note.txt", "content": "hi"})
            assert not wrote.is_error, text_of(wrote)
            read = await s.call_tool("workspace.read_text", {"path": "note.txt"})
            assert not read.is_error and read.structured_content is not None
            assert read.structured_content["checksum"] == wrote.structured_content["checksum"]

    run(main)
    assert (workspace / "note.txt").read_text() == "hi"  # kept: the operator's directory


# ---------------------------------------------------------------------------- bad input, raw


def initialized(served: Served) -> Any:
    """``serve`` started on stdio, through the handshake: ready for requests."""
    process = served.popen()
    write(process, INITIALIZE)
    read_frames(process, 1)
    write(process, INITIALIZED)
    return process


def read_frames(process: subprocess.Popen[bytes], count: int,
                timeout: float = 60) -> list[dict[str, Any]]:
    """The next ``count`` frames; a frame not there by the deadline fails the test instead of
    hanging it (the deadline is not a pause: each frame is read as soon as it arrives)."""
    assert process.stdout is not None
    frames = []
    for _ in range(count):
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        assert ready, f"no answer from the server within {timeout} s"
        line = process.stdout.readline()
        assert line, "the server closed stdout early"
        frames.append(json.loads(line))
    return frames


def send(process: subprocess.Popen[bytes], data: bytes) -> None:
    """Write all of ``data`` to the server's stdin (unbuffered: a write may take part)."""
    assert process.stdin is not None
    view = memoryview(data)
    while view:
        view = view[process.stdin.write(view) or 0:]


def write(process: subprocess.Popen[bytes], *frames: Any) -> None:
    send(process, b"".join((frame if isinstance(frame, str) else json.dumps(frame)).encode()
                           + b"\n" for frame in frames))


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """Close the server's stdin (the client going away) and collect everything it wrote."""
    out, err = process.communicate(timeout=30)
    return process.returncode, out.decode(), err.decode()


def test_malformed_frames_get_the_protocols_error_and_the_server_carries_on(
        served: Served) -> None:
    process = served.popen()
    write(process, "this is not json", INITIALIZE)
    parse_error, initialized = read_frames(process, 2)
    assert parse_error == {"jsonrpc": "2.0", "id": None,
                           "error": {"code": -32700, "message": "Parse error"}}
    assert initialized["id"] == 1 and "result" in initialized
    write(process, INITIALIZED, '{"foo": 1}')
    assert read_frames(process, 1)[0]["error"]["code"] == -32600
    write(process, '{"jsonrpc": "2.0", "id": 7, "method": 5}')
    assert read_frames(process, 1)[0] == {"jsonrpc": "2.0", "id": 7,
                                          "error": {"code": -32600, "message": "Invalid Request"}}
    write(process, {"jsonrpc": "2.0", "id": 8, "method": "no/such/method"})
    assert read_frames(process, 1)[0]["error"]["code"] == types.METHOD_NOT_FOUND
    write(process, {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                    "params": {"name": "math.calculate", "arguments": [1, 2]}})
    assert read_frames(process, 1)[0]["error"]["code"] == types.INVALID_PARAMS
    write(process, {"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                    "params": {"name": "math.calculate", "arguments": {"expression": "17 * 23"}}})
    (answer,) = read_frames(process, 1)
    assert (answer["id"], answer["result"]["content"][0]["text"]) == (10, "391")
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    assert err.count('"mcp.frame.rejected"') == 3


def test_a_client_that_disconnects_mid_call(fixture_served: Served) -> None:
    process = fixture_served.popen()
    write(process, INITIALIZE)
    read_frames(process, 1)
    write(process, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                 "params": {"name": "fxw.slow", "arguments": {"seconds": 30}}})
    deadline = time.monotonic() + 30
    while executions(fixture_served) != ["started"]:
        assert time.monotonic() < deadline, "the slow tool never started"
        time.sleep(0.02)
    started = time.monotonic()
    code, out, err = finish(process)  # the client goes away with the call in flight
    assert code == 0 and time.monotonic() - started < 10
    assert_no_traceback(out + err)
    for line in out.splitlines():  # whatever was written is still well-formed JSON-RPC
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert "stray output from fxw.slow" in err and "stray" not in out
    (row,) = fixture_served.rows()
    assert (row["tool_name"], row["state"], row["reason_code"]) == (
        "fxw.slow", "failed", core_messages.RUN_CANCELLED)
    # The run ended: nothing is left of its workspace (the host's lock file stays).
    assert nothing_left(fixture_served.data_dir / "workspaces")


def test_sigterm_ends_the_server_cleanly(served: Served) -> None:
    process = served.popen()
    write(process, INITIALIZE)
    read_frames(process, 1)
    process.send_signal(signal.SIGTERM)
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)


# A request's id must be a string or an integer (MCP: never null); every other shape is a
# request the server cannot answer by id, so it is answered -32600 with a null id.
UNUSABLE_IDS = [{"a": 1}, 1.5, 2.0, None, True, False, [1], []]
INVALID_REQUEST = {"jsonrpc": "2.0", "id": None,
                   "error": {"code": -32600, "message": "Invalid Request"}}
PARSE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}


def calculate(rid: Any, expression: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "math.calculate", "arguments": {"expression": expression}}}


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_request_with_an_unusable_id_is_answered_invalid_request(served: Served,
                                                                   stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
    for rid in UNUSABLE_IDS:
        for frame in ({"jsonrpc": "2.0", "id": rid, "method": "tools/list"},
                      {"jsonrpc": "2.0", "id": rid, "method": "ping"},
                      calculate(rid, "6 * 7")):
            write(process, frame)
            assert read_frames(process, 1) == [INVALID_REQUEST], frame
    write(process, calculate(11, "17 * 23"))  # and the server carries on
    (answer,) = read_frames(process, 1)
    assert (answer["id"], answer["result"]["content"][0]["text"]) == (11, "391")
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    # Refused, never executed: the only row is the call with a usable id.
    assert [json.loads(r["arguments"]) for r in served.rows()] == [{"expression": "17 * 23"}]


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_an_over_long_line_is_discarded_whole(served: Served, stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
    # 33 MiB of blanks and then a complete request, on one line: whatever part of the line is
    # read as "the rest" would be a valid frame of its own, so nothing of it may run.
    send(process, b" " * (33 * 1024 * 1024) + json.dumps(calculate(5, "6 * 7")).encode() + b"\n")
    write(process, calculate(6, "17 * 23"))
    too_long, answer = read_frames(process, 2)
    assert too_long == PARSE_ERROR
    assert (answer["id"], answer["result"]["content"][0]["text"]) == (6, "391")
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    assert [json.loads(r["arguments"]) for r in served.rows()] == [{"expression": "17 * 23"}]


def stderr_line(process: subprocess.Popen[bytes], timeout: float = 60) -> str:
    """The next line the server writes on stderr (a deadline, not a pause: it returns as soon
    as the line is there)."""
    assert process.stderr is not None
    ready, _, _ = select.select([process.stderr], [], [], timeout)
    assert ready, "the server wrote nothing on stderr"
    return process.stderr.readline().decode()


SERVING_STDIO = "toolhost: serving 2 tools on stdio\n"


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_serve_says_it_is_on_stdio_and_ctrl_c_ends_it_cleanly(served: Served, stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = served.popen()
    assert stderr_line(process) == SERVING_STDIO
    write(process, INITIALIZE)
    read_frames(process, 1)
    process.send_signal(signal.SIGINT)  # the client's end stays open: only the signal ends it
    out, err = process.communicate(timeout=30)
    assert (process.returncode, out, err) == (130, b"", b"")


def test_ctrl_c_at_a_terminal_ends_the_server_cleanly(served: Served) -> None:
    import pty

    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "toolhost._cli", "serve"],
                                   stdin=terminal, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=served.env(), bufsize=0)
    finally:
        os.close(terminal)
    served.processes.append(process)
    try:
        assert stderr_line(process) == SERVING_STDIO
        process.send_signal(signal.SIGINT)  # nobody types: the read of stdin is blocked
        out, err = process.communicate(timeout=30)
    finally:
        os.close(controller)
    assert (process.returncode, out, err) == (130, b"", b"")


def test_stdin_from_a_file_is_served_by_the_sdk_transport(served: Served, tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(json.dumps(f) for f in [
        INITIALIZE, INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "math.calculate", "arguments": {"expression": "17 * 23"}}},
    ]) + "\nnot json\n")
    with requests.open("rb") as stdin:
        process = served.popen(stdin=stdin)
        code, out, err = finish(process)
    assert code == 0
    assert_no_traceback(err)
    frames = [json.loads(line) for line in out.splitlines()]
    answers = {f.get("id"): f for f in frames}
    assert answers[1]["result"]["serverInfo"]["name"] == "toolhost"
    assert answers[None]["error"]["code"] == -32700


def test_the_sdk_stdio_transport_setting(served: Served) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = "sdk"

    async def main() -> None:
        async with session(served) as s:
            result = await s.call_tool("math.calculate", {"expression": "17 * 23"})
            assert result.structured_content["result"] == "391"

    run(main)
    assert_no_traceback(served.stderr())


# ---------------------------------------------------------------------------- streamable HTTP


def test_a_taken_port_exits_1_with_one_line_for_the_operator(served: Served) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = served.toolhost("serve", "--http", f"127.0.0.1:{port}")
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", f"toolhost: cannot listen on 127.0.0.1:{port}: address already in use "
               "(another process holds that port)\n")


def test_serve_says_its_url_and_ctrl_c_ends_it_cleanly(served: Served) -> None:
    port = free_port()
    process = served.popen("--http", f"127.0.0.1:{port}", stdin=subprocess.DEVNULL)
    assert stderr_line(process) == f"toolhost: serving 2 tools at http://127.0.0.1:{port}/mcp\n"
    socket.create_connection(("127.0.0.1", port), timeout=10).close()  # listening once it says so
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert (process.returncode, out, err) == (130, b"", b"")


def test_over_http_a_request_with_an_unusable_id_is_answered_invalid_request(
        served: Served) -> None:
    import httpx

    port = free_port()
    process = served.popen("--http", f"127.0.0.1:{port}", stdin=subprocess.DEVNULL)
    assert stderr_line(process).startswith("toolhost: serving 2 tools at")
    url = f"http://127.0.0.1:{port}/mcp"
    accept = {"accept": "application/json, text/event-stream"}
    try:
        with httpx.Client(timeout=30) as client:
            opened = client.post(url, json=INITIALIZE, headers=accept)
            assert opened.status_code == 200
            headers = {**accept, "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
            assert client.post(url, json=INITIALIZED, headers=headers).status_code == 202
            for rid in UNUSABLE_IDS:
                refused = client.post(url, json=calculate(rid, "6 * 7"), headers=headers)
                assert (refused.status_code, refused.json()) == (400, INVALID_REQUEST), rid
            answered = client.post(url, json=calculate(11, "17 * 23"), headers=headers)
            assert answered.status_code == 200 and '"text":"391"' in answered.text
    finally:
        process.send_signal(signal.SIGTERM)
        code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    assert [json.loads(r["arguments"]) for r in served.rows()] == [{"expression": "17 * 23"}]


def test_streamable_http_serves_the_same_tools(served: Served) -> None:
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    process = served.popen("--http", f"127.0.0.1:{port}", stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the HTTP transport never listened"
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"

        async def main() -> None:
            async with streamable_http_client(url) as (read, write, *_), \
                    ClientSession(read, write) as s:
                await s.initialize()
                assert [t.name for t in (await s.list_tools()).tools] == [
                    "math.calculate", "system.current_time"]
                result = await s.call_tool("math.calculate", {"expression": "17 * 23"})
                assert (text_of(result), result.structured_content["result"]) == ("391", "391")
            async with mcp.Client(url) as client:  # 2026-07-28, no session
                assert client.protocol_version == "2026-07-28"
                bad = await client.call_tool("system.current_time", {"timezone": "EST"})
                assert (bad.is_error, text_of(bad)) == (True, BAD_ZONE)

        run(main)
    finally:
        process.send_signal(signal.SIGTERM)
        code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    runs = {r["run_id"] for r in served.rows()}
    assert len(runs) == 2  # one run for the HTTP session, one for sessionless requests


def test_a_line_read_after_the_loop_closed_leaves_no_unawaited_coroutine() -> None:
    # Regression: the stdin thread made a Queue.put coroutine for a loop that had just
    # closed; it was never awaited, and its RuntimeWarning reached serve's stderr at exit.
    import asyncio
    import gc
    import warnings

    from toolhost._mcp.transport import _ThreadLines

    read_end, write_end = os.pipe()

    async def start() -> _ThreadLines:
        return _ThreadLines(read_end)

    loop = asyncio.new_event_loop()
    lines = loop.run_until_complete(start())
    loop.close()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert lines._hand_over("a line nobody will read\n") is False
            gc.collect()
        assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    finally:
        lines.stop()
        os.close(write_end)  # the thread reads EOF and closes its end
