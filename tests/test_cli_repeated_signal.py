"""A signal repeated at once during ``call`` or ``approve`` is one request: ``timeout(1)`` sends
SIGTERM to its child and then to the child's group, microseconds apart, and the second must not
kill the process before the first's cancellation is recorded. An operator's second signal later,
or another signal, still stops at once (D337)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli_signals_and_input import child_env, started_slowx

from toolhost._cli.common import SAME_REQUEST_S

#: A tool that takes ``STOP_S`` seconds to end once cancelled, holding the event loop meanwhile
#: (a stuck write, a slow cleanup): the window in which a repeated signal arrives before the
#: call's row is written.
SLOW_TO_STOP = '''
import asyncio, os, sys, time
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

SPEC = ToolSpec(
    name="slowstop.wait", version="1.0.0", description="Waits until cancelled, then a while.",
    input_schema={"type": "object", "additionalProperties": False},
    output_schema={"type": "object", "additionalProperties": False},
    kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.WORKSPACE_WRITE,
    risk=Risk.LOW, idempotency=Idempotency.IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=120, maximum_output_bytes=4096, allow_parallel=False,
    deprecated=False,
)

async def wait(arguments, context):
    sys.stderr.write("started\\n")
    sys.stderr.flush()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        time.sleep(float(os.environ["STOP_S"]))
        raise
    return ToolOutput(structured={}, content="done")

@hookimpl
def toolhost_domains():
    return [Domain("slowstop")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=wait)]
'''


def _env(tmp_path: Path, stop_s: float) -> dict[str, str]:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-slowstop", "fake_slowstop", SLOW_TO_STOP)
    return child_env(tmp_path / "d", TOOLHOST_PLUGINS="fake-slowstop", STOP_S=str(stop_s),
                     PYTHONPATH=os.pathsep.join([str(site), *filter(None, [
                         os.environ.get("PYTHONPATH")])]))


def _twice(tmp_path: Path, stop_s: float, first: int, second: int, gap_s: float) -> int:
    """The exit status of ``call slowstop.wait`` sent ``first``, then ``second`` ``gap_s``
    later (a negative status: the signal that killed it)."""
    proc = started_slowx(["call", "slowstop.wait"], _env(tmp_path, stop_s))
    try:
        proc.send_signal(first)
        time.sleep(gap_s)
        proc.send_signal(second)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode


def _rows(tmp_path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(tmp_path / "d" / "toolhost.sqlite3") as db:
        rows = db.execute("SELECT state, reason_code FROM tool_invocations").fetchall()
    db.close()
    return rows


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_same_signal_again_at_once_is_one_cancellation(
        tmp_path: Path, signum: signal.Signals) -> None:
    # Regression: the first signal restored the handlers, so the second (timeout(1)'s to the
    # group) killed the process while the call was ending: its row stayed `running`.
    assert _twice(tmp_path, 1.0, signum, signum, 0.05) == 128 + signum
    assert _rows(tmp_path) == [("failed", "tool.cancelled.run_cancelled")]


def test_the_same_signal_later_still_stops_at_once(tmp_path: Path) -> None:
    # D337: an operator's second signal, once the first had time to be one, is "stop now".
    assert _twice(tmp_path, 60.0, signal.SIGTERM, signal.SIGTERM,
                  SAME_REQUEST_S + 0.5) == -signal.SIGTERM


def test_another_signal_at_once_still_stops_at_once(tmp_path: Path) -> None:
    assert _twice(tmp_path, 60.0, signal.SIGTERM, signal.SIGHUP, 0.05) == -signal.SIGHUP
