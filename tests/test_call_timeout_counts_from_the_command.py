"""``toolhost call --timeout S`` is "the run's deadline, from now": it counts from the
command's start, so the seconds spent loading the host (here a gateway server slow to come
up) are spent from it. A real ``toolhost call`` child process, the gateway's SDK upstream
over stdio (``GW_SLOW_START``), and the row's recorded deadline read back with ``show``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_gateway import Gateway

#: How long the upstream takes to come up, every time the host starts it: long beside the
#: command's own start before it reads the instant, which a loaded machine stretches to seconds.
SLOW_START_S = 8.0


def _call(gw: Gateway, timeout_s: int) -> tuple[dt.datetime, Any, dict[str, Any]]:
    """``toolhost call --timeout timeout_s mcp.alpha__lookup``: when it was started, the
    finished process, and the row as ``show --json`` gives it."""
    began = dt.datetime.now(dt.UTC)
    called = gw.toolhost("call", "--json", "--timeout", str(timeout_s), "mcp.alpha__lookup",
                         "--args", '{"word": "x"}')
    shown = gw.toolhost("show", json.loads(called.stdout)["invocation_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    return began, called, json.loads(shown.stdout)


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    gateway = Gateway(tmp_path, beta=False, alpha_slow_start_s=SLOW_START_S)
    yield gateway
    gateway.close()


def test_a_timeout_shorter_than_the_hosts_start_up_runs_nothing(gw: Gateway) -> None:
    began, called, row = _call(gw, 2)
    assert called.returncode == 1, called.stderr
    assert (row["state"], row["reason_code"], row["retryable"]) == (
        "failed", "tool.timeout.run_deadline_passed", False)
    # Counted after start-up it would be at least 2 + SLOW_START_S seconds after `began`.
    assert dt.datetime.fromisoformat(row["run_deadline"]) < began + dt.timedelta(
        seconds=2 + SLOW_START_S - 0.5)
    assert "alpha lookup called" not in gw.logged()  # nothing went upstream


def test_a_timeout_counts_from_the_commands_start_not_the_hosts(gw: Gateway) -> None:
    began, called, row = _call(gw, 30)
    assert called.returncode == 0, called.stderr
    assert row["state"] == "succeeded"
    assert "alpha lookup called" in gw.logged()
    # Counted after start-up it would be at least 30 + SLOW_START_S seconds after `began`.
    deadline = dt.datetime.fromisoformat(row["run_deadline"])
    assert began + dt.timedelta(seconds=30) <= deadline < began + dt.timedelta(
        seconds=30 + SLOW_START_S - 0.5)
