"""A process started with stderr closed (``2>&-``: a supervisor's, cron's, a daemon's child)
runs and records its calls as with any stderr: Python leaves ``sys.stderr`` None there, and
the log's set-up asked it ``isatty()``, ending ``call`` and ``serve`` with exit 1 before the
call ran, with no row and no word (docs/observability.md: a log line never decides a call).

The commands run as an operator runs them: the real ``toolhost`` console script in a child
whose descriptor 2 the shell closed, over MCP with the SDK's own stdio client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import invocation_rows
from installed import install_fake_plugin

from toolhost._pipeline.log import configure_logging, get_logger, lost_lines
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT, run_toolhost, toolhost_command

#: ``toolhost ARGS`` with descriptor 2 closed, as ``toolhost ARGS 2>&-`` in a shell.
STDERR_CLOSED = ["sh", "-c", 'exec "$@" 2>&-', "sh"]
FIXTURE_SOURCE = Path(__file__).with_name("mcp_fixture_plugin.py")


def rows(data: Path) -> list[tuple[str, str]]:
    return [(r["tool_name"], r["state"]) for r in invocation_rows(data / "toolhost.sqlite3")]


def test_a_call_with_stderr_closed_runs_and_is_recorded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run_toolhost("call", "math.calculate", "--args", '{"expression": "2+2"}',
                        data_dir=data, plugins="toolhost-math",
                        env={"TOOLHOST_LOG_LEVEL": "debug"},  # lines to drop at each step
                        command=[*STDERR_CLOSED, *toolhost_command()])
    assert (done.returncode, done.stdout, done.stderr) == (0, "4\n", "")
    assert rows(data) == [("math.calculate", "succeeded")]


def test_a_refused_calls_operator_line_stays_off_stdout(tmp_path: Path) -> None:
    """``print(..., file=sys.stderr)`` with ``sys.stderr`` None writes to stdout: the one line
    for the operator landed after the model's message, where a script reads the answer."""
    data = tmp_path / "data"
    done = run_toolhost("call", "nope.tool", "--args", "{}", data_dir=data,
                        plugins="toolhost-math", command=[*STDERR_CLOSED, *toolhost_command()])
    assert (done.returncode, done.stdout) == (
        1, "Unknown tool. Call one of the tools you were given.\n")
    assert rows(data) == [("nope.tool", "failed")]


def test_serve_over_stdio_with_stderr_closed_answers_and_records(tmp_path: Path) -> None:
    """The fixture's ``fxw.slow`` prints to stdout, which stdio ``serve`` points at its stderr
    while serving: with none, that was SQLite's read-only null device, and the print failed
    the call."""
    pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra is not installed")
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    site, data = tmp_path / "site", tmp_path / "data"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", FIXTURE_SOURCE.read_text())
    params = StdioServerParameters(
        command="sh", args=[*STDERR_CLOSED[1:], sys.executable, "-m", "toolhost._cli", "serve"],
        env={"TOOLHOST_DATA_DIR": str(data), "TOOLHOST_PLUGINS": "toolhost-math,fake-mcp",
             "TOOLHOST_LOG_LEVEL": "debug", "PYTHONPATH": str(site)})

    async def calls() -> list[Any]:
        with (tmp_path / "client-errlog").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return [await session.call_tool("math.calculate", {"expression": "2+2"}),
                        await session.call_tool("fxw.slow", {"seconds": 0})]

    calculated, slept = anyio.run(calls)
    assert (calculated.is_error, calculated.structured_content) == (
        False, {"result": "4", "result_exact": True, "expression": "2+2"})
    assert (slept.is_error, slept.structured_content) == (False, {"slept": 0})
    assert rows(data) == [("math.calculate", "succeeded"), ("fxw.slow", "succeeded")]


def test_with_no_stderr_a_log_line_is_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Python API's host in a process with no stderr: ``configure_logging`` falls back to
    ``sys.stderr``, and each line it would have written is lost, counted as any lost line."""
    import structlog

    monkeypatch.setattr(sys, "stderr", None)
    try:
        configure_logging(FixedClock(DEFAULT_INSTANT), level="info")
        before = lost_lines()
        get_logger(invocation_id="i-1").info("call.finished", status="succeeded")
        assert lost_lines() == before + 1
    finally:
        structlog.reset_defaults()
