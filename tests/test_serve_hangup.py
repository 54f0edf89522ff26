"""`toolhost serve` and SIGHUP, the signal a server gets when the terminal of its client (or
its own ssh or tmux pane) closes: the same graceful stop as SIGTERM on either transport (the
call in flight finishes or records its cancellation, the run and its workspace end), exit
129 as every command reports it; under ``nohup`` it stays ignored (D337).

Real `toolhost serve` subprocesses with the fixture plugin's fxw.slow, raw frames on stdio and
the SDK's streamable HTTP client."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from conftest import nothing_left

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import free_port
from mcp import ClientSession
from test_mcp_server import (  # noqa: F401 - the fixture, asked for by name
    INITIALIZE,
    INITIALIZED,
    SERVING_STDIO,
    Served,
    assert_no_traceback,
    executions,
    finish,
    fixture_served_fixture,
    read_frames,
    run,
    stderr_line,
    write,
)

from toolhost._model import host_reasons

HANGUP_EXIT = 128 + signal.SIGHUP


def slow_call(seconds: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "fxw.slow", "arguments": {"seconds": seconds}}}


def wait_until_started(served: Served) -> None:
    deadline = time.monotonic() + 30
    while executions(served) != ["started"]:
        assert time.monotonic() < deadline, "the slow tool never started"
        time.sleep(0.02)


def hung_up(process: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """SIGHUP, then the exit code and output. stdin stays open until the process has ended:
    closing it is a stop of its own, which would hide what the signal did."""
    process.send_signal(signal.SIGHUP)
    try:
        process.wait(timeout=30)
    finally:
        out, err = process.communicate(timeout=30)
    return process.returncode, out.decode(), err.decode()


def test_sighup_on_stdio_cancels_the_call_in_flight_and_ends_its_run(
        fixture_served: Served) -> None:
    process = fixture_served.popen()
    write(process, INITIALIZE)
    read_frames(process, 1)
    write(process, INITIALIZED, slow_call(30))
    wait_until_started(fixture_served)
    code, out, err = hung_up(process)
    assert code == HANGUP_EXIT, err
    assert_no_traceback(out + err)
    (row,) = fixture_served.rows()
    assert (row["tool_name"], row["state"], row["reason_code"]) == (
        "fxw.slow", "failed", host_reasons.RUN_CANCELLED)
    # The run ended with the server: its workspace is gone, not left for `runs end`.
    assert nothing_left(fixture_served.data_dir / "workspaces")


def test_under_nohup_sighup_leaves_the_stdio_server_serving(fixture_served: Served) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "toolhost._cli", "serve"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=fixture_served.env(), bufsize=0,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))  # what nohup does
    fixture_served.processes.append(process)
    assert stderr_line(process) == SERVING_STDIO
    write(process, INITIALIZE)
    read_frames(process, 1)
    process.send_signal(signal.SIGHUP)
    write(process, INITIALIZED, slow_call(0))
    (answer,) = read_frames(process, 1)
    assert answer["result"]["structuredContent"] == {"slept": 0}
    code, _, err = finish(process)
    assert code == 0
    assert_no_traceback(err)


@pytest.mark.parametrize(("seconds", "drain_s", "state", "reason_code"), [
    (2, "30", "succeeded", None),  # within the drain time: it finishes
    (30, "1", "failed", host_reasons.RUN_CANCELLED),  # past it: cancelled and recorded
])
def test_sighup_over_http_drains_as_sigterm_does(
        fixture_served: Served, seconds: float, drain_s: str, state: str,
        reason_code: str | None) -> None:
    import anyio
    from mcp.client.streamable_http import streamable_http_client

    fixture_served.settings["TOOLHOST_HTTP_DRAIN_S"] = drain_s
    port = free_port()
    process = fixture_served.popen("--http", f"127.0.0.1:{port}", stdin=subprocess.DEVNULL)
    assert stderr_line(process).startswith("toolhost: serving 2 tools at")
    answered: list[bool] = []

    async def main() -> None:
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write_, *_), \
                ClientSession(read, write_) as s:
            await s.initialize()
            await s.list_tools()  # the client checks the result against the output schema

            async def call() -> None:
                try:
                    result = await s.call_tool("fxw.slow", {"seconds": seconds})
                    answered.append(not result.is_error)
                except Exception:  # the stream ends with the server
                    answered.append(False)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.to_thread.run_sync(wait_until_started, fixture_served)
                process.send_signal(signal.SIGHUP)

    run(main)
    code = process.wait(timeout=60)
    _, err = process.communicate(timeout=30)
    assert code == HANGUP_EXIT, err.decode()
    assert_no_traceback(err.decode())
    assert answered == [state == "succeeded"]
    (row,) = fixture_served.rows()
    assert (row["tool_name"], row["state"], row["reason_code"]) == ("fxw.slow", state, reason_code)
