"""A log line that cannot be written never decides a call (D17: every call ends on a row).

The log is the operator's: stderr's reader gone (a log shipper that died: a real pipe whose
read end is closed), or a value the redactor or renderer cannot handle (a namedtuple in a
tool's failure detail), drops the line, counts it, and reports the first one once; the call
ends, is recorded and is answered exactly as it would have been. Over MCP (a real
``toolhost serve --http``) the client gets the call's result, never the exception's text as a
JSON-RPC error."""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import httpx
import pytest
import structlog
from conftest import make_plugin, make_spec

from toolhost import (
    Idempotency,
    Reason,
    Risk,
    SideEffect,
    Tool,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
)
from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._pipeline.instruments import Instruments
from toolhost._pipeline.log import configure_logging, get_logger, lost_lines, redact_secrets
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT, Harness

NO_ARGUMENTS = {"type": "object", "properties": {}, "required": [],
                "additionalProperties": False}
ECHO = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
        "additionalProperties": False}
WRITER = dict(input_schema=NO_ARGUMENTS, output_schema=ECHO, side_effect=SideEffect.WORKSPACE_WRITE,
              risk=Risk.LOW, idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)
BAD_PLACE = "tool.invalid_arguments.bad_place"
#: What a plugin's detail may hold: canonical JSON takes it (a list), the row stores it.
Where = collections.namedtuple("Where", "line column")


def write(arguments: Any, context: ToolExecutionContext) -> ToolOutput:
    return ToolOutput(structured={"echo": "ok"}, content="ok")


def fail_at_a_place(arguments: Any, context: ToolExecutionContext) -> ToolOutput:
    raise ToolFailure(BAD_PLACE, detail={"where": Where(3, 4)})


TOOLS = [Tool(make_spec(name="fx.write", **WRITER), call=write),
         Tool(make_spec(name="fx.fail", **WRITER), call=fail_at_a_place,
              reasons=(Reason(BAD_PLACE, "Bad place."),))]


@pytest.fixture
def harness() -> Iterator[Harness]:
    with Harness.over({"fx-dist": make_plugin(tools=TOOLS)}) as harness:
        yield harness
    structlog.reset_defaults()


def log_to(stream: TextIO, *, json_lines: bool = True) -> None:
    configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=stream,
                      json=json_lines)


def states(harness: Harness) -> list[tuple[str, str]]:
    return [(r.tool_name, r.state.value) for r in harness.host.pipeline.invocations.list()]


def test_a_log_whose_reader_is_gone_fails_no_call_and_the_row_is_finished(
        harness: Harness) -> None:
    # Regression: BrokenPipeError from pipeline.succeeded escaped invoke after the body ran,
    # and the writing call's row stayed `running` under this live process.
    read, written = os.pipe()
    os.close(read)  # the reader is gone: every write now raises BrokenPipeError
    gone = os.fdopen(written, "w")
    try:
        log_to(gone)
        before = lost_lines()
        outcome = harness.invoke("fx.write")
        assert outcome.ok, outcome.failure
        assert states(harness) == [("fx.write", "succeeded")]
        assert lost_lines() > before  # counted, not raised
    finally:
        structlog.reset_defaults()  # before the stream closes
        with contextlib.suppress(BrokenPipeError):  # what it still buffers cannot go either
            gone.close()


def test_a_namedtuple_in_a_failures_detail_is_logged_as_a_list_and_the_call_recorded(
        harness: Harness) -> None:
    # Regression: the redactor rebuilt every tuple as type(value)(generator), which a
    # namedtuple's constructor refuses (TypeError) at step 13, after the body ran.
    out = io.StringIO()
    log_to(out)
    outcome = harness.invoke("fx.fail")
    assert outcome.failure is not None and outcome.failure.reason_code == BAD_PLACE
    assert states(harness) == [("fx.fail", "failed")]
    (failed,) = [e for e in map(json.loads, out.getvalue().splitlines())
                 if e["event"] == "pipeline.failed"]
    assert failed["detail"] == {"where": [3, 4]}


def test_the_redactor_rebuilds_plain_containers_and_turns_others_into_lists() -> None:
    class Names(list[str]):
        def __init__(self, first: str) -> None:  # not list's constructor
            super().__init__([first])

    event = redact_secrets(None, "info", {
        "where": Where(1, "Authorization: Bearer abc.def"), "names": Names("x"),
        "places": {Where(1, 2)}, "pair": ("a", "b"), "kinds": frozenset({"a"})})
    assert event == {"where": [1, "Authorization: Bearer [redacted]"], "names": ["x"],
                     "places": [[1, 2]], "pair": ("a", "b"), "kinds": frozenset({"a"})}


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize("json_lines", [True, False], ids=["json", "console"])
def test_a_line_that_cannot_be_rendered_is_dropped_counted_and_reported_once(
        json_lines: bool) -> None:
    out = io.StringIO()
    log_to(out, json_lines=json_lines)
    try:
        before = lost_lines()
        log = get_logger(run_id="r1")
        log.info("first.lost", thing=Unprintable())
        log.error("second.lost", thing=Unprintable())
        log.info("written")
    finally:
        structlog.reset_defaults()
    assert lost_lines() == before + 2
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "written" in lines[1]
    if json_lines:
        assert json.loads(lines[0]) == {"event": "log.line_lost", "level": "error",
                                        "exception": "RuntimeError", "lost_event": "first.lost"}
    else:
        assert lines[0].startswith("toolhost: a log line (first.lost) could not be written")


# ---------------------------------------------------------------------------- over MCP

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, free_port, write_tokens  # noqa: E402

TOKEN = "ada-token-7f3e"
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}


class RawClient:
    """One MCP session over raw HTTP: what a client sends, and the JSON-RPC answer."""

    def __init__(self, url: str) -> None:
        self.url, self.headers, self.id = url, dict(MCP_HEADERS), 0
        opened = self.post("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "raw", "version": "0"}})
        assert "result" in opened, opened
        self.headers["mcp-protocol-version"] = "2025-11-25"
        httpx.post(url, headers=self.headers, timeout=30,
                   json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.id += 1
        answer = httpx.post(self.url, headers=self.headers, timeout=60,
                            json={"jsonrpc": "2.0", "id": self.id, "method": method,
                                  "params": params})
        assert answer.status_code == 200, answer.text
        if "mcp-session-id" in answer.headers:
            self.headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        if answer.headers["content-type"].startswith("text/event-stream"):
            frames = [json.loads(line[5:]) for line in answer.text.splitlines()
                      if line.startswith("data:")]
            return dict(frames[-1])
        return dict(answer.json())

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.post("tools/call", {"name": name, "arguments": arguments})


def test_over_mcp_a_call_whose_log_cannot_be_written_is_answered_and_recorded(
        tmp_path: Path) -> None:
    # Regression: the answer was JSON-RPC error {"code": 0, "message": "[Errno 32] Broken
    # pipe"} (mcp.call.failed could not be logged either), after the body wrote the file, and
    # the row stayed `running` while the server lived.
    tokens = write_tokens(tmp_path / "tokens.toml",
                          (TOKEN, "ada", ["workspace.read", "workspace.write"]))
    env = Deployment(tmp_path, plugins="toolhost-workspace", TOOLHOST_LOG_LEVEL="info",
                     TOOLHOST_HTTP_TOKENS_FILE=str(tokens)).env()
    port = free_port()
    read, written = os.pipe()
    server = subprocess.Popen(
        [sys.executable, "-m", "toolhost._cli", "serve", "--http", f"127.0.0.1:{port}"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=written)
    os.close(written)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while not _healthy(base):
            assert server.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)
        client = RawClient(base + "/mcp")
        first = client.call("workspace.write_text", {"path": "first.txt", "content": "x"})
        assert first["result"]["isError"] is False, first
        os.set_blocking(read, False)
        while True:  # what the server wrote so far, then nobody reads its stderr any more
            try:
                if not os.read(read, 1 << 16):
                    break
            except BlockingIOError:
                break
        os.close(read)
        read = -1
        answer = client.call("workspace.write_text", {"path": "a.txt", "content": "hello"})
        assert "error" not in answer, answer
        assert answer["result"]["isError"] is False
        assert answer["result"]["_meta"]["toolhost/status"] == "succeeded"
        with contextlib.closing(sqlite3.connect(tmp_path / "data" / DATABASE_NAME)) as db:
            rows = db.execute("SELECT tool_name, state FROM tool_invocations "
                              "ORDER BY created_at").fetchall()
        assert rows == [("workspace.write_text", "succeeded")] * 2
        assert server.poll() is None
    finally:
        if read != -1:
            os.close(read)
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _healthy(base: str) -> bool:
    try:
        return httpx.get(base + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_lost_lines_are_a_metric_on_every_scrape() -> None:
    instruments = Instruments(time.monotonic)
    # Always a sample, so an alert on its rate has a series before the first loss.
    assert f"\ntoolhost_log_lines_lost_total {lost_lines()}\n" in instruments.render()
    out = io.StringIO()
    log_to(out)
    try:
        get_logger().info("lost", thing=Unprintable())
    finally:
        structlog.reset_defaults()
    scraped = instruments.render()
    assert f"\ntoolhost_log_lines_lost_total {lost_lines()}\n" in scraped
    assert "# TYPE toolhost_log_lines_lost_total counter" in scraped
    # One sample however often scraped: brought up to the count, never added to twice.
    assert [line for line in instruments.render().splitlines()
            if line.startswith("toolhost_log_lines_lost_total ")] == [
        f"toolhost_log_lines_lost_total {lost_lines()}"]
