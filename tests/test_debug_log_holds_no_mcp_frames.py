"""``TOOLHOST_LOG_LEVEL=debug`` on ``serve --http`` logs toolhost's steps and the libraries'
diagnostics, not each MCP frame whole: sse_starlette wrote every answer it sent at debug, a
tool's result with it (a file's text, a mail, a command's output), and a secret setting's value
in one came out as written (DESIGN: secrets never appear in logs). Every line now hides the
secret settings' values wherever they appear, and the loggers that dump frames are held at
info unless the process set their level itself (the documented way to open them).

A real ``toolhost serve --http`` at debug, driven by the MCP SDK's own HTTP client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, run  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

SECRET = "supersecretvalue123"
#: 1234567 * 7654321: the result, in the answer and nowhere in the log.
EXPRESSION, RESULT = "1234567 * 7654321", "9449772114007"
#: What opens the frame loggers: their level set in the process before serve starts.
OPENED = 'import logging\nlogging.getLogger("sse_starlette").setLevel(logging.DEBUG)\n'


def served_at_debug(tmp_path: Path, **settings: str) -> list[dict[str, Any]]:
    """The log lines of a ``serve --http`` at debug that answered a calculation, read back a
    file holding the secret setting's value, and refused a call to a tool named as it (a
    caller's word: any field of toolhost's own lines may hold it)."""
    deployment = Deployment(tmp_path, plugins="toolhost-math,toolhost-workspace", TOOLHOST_LOG_LEVEL="debug",
                            MY_SERVICE_API_KEY=SECRET, **settings)

    async def journey() -> None:
        async with deployment.http_server() as url, streamable_http_client(url) as (
                read, write, *_), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("math.calculate", {"expression": EXPRESSION})
            assert (result.structured_content or {})["result"] == RESULT
            note = {"path": "note.txt", "content": f"the value is {SECRET}"}
            assert not (await session.call_tool("workspace.write_text", note)).is_error
            read = await session.call_tool("workspace.read_text", {"path": "note.txt"})
            assert SECRET in json.dumps(read.structured_content)  # the answer holds it
            with pytest.raises(MCPError):  # its name in toolhost's own lines
                await session.call_tool(SECRET, {})

    run(journey)
    text = deployment.stderr()
    assert SECRET not in text, [line for line in text.splitlines() if SECRET in line]
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_debug_log_holds_toolhosts_steps_and_no_frame(tmp_path: Path) -> None:
    lines = served_at_debug(tmp_path)
    assert {"pipeline.resolve", "pipeline.execute"} <= {line["event"] for line in lines}
    assert not [line for line in lines if str(line.get("logger")).startswith("sse_starlette")]
    assert not [line for line in lines if RESULT in json.dumps(line)]


def test_frames_opened_by_the_process_are_logged_with_the_secret_hidden(
        tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(OPENED)
    lines = served_at_debug(tmp_path, PYTHONPATH=str(site))
    frames = [line["event"] for line in lines if line.get("logger") == "sse_starlette.sse"]
    assert any(RESULT in frame for frame in frames)
    assert any("[redacted]" in frame for frame in frames)
