"""A running command's progress (``context.progress``): once a second, the seconds gone out
of its timeout and the output read so far; nothing after the result. The host decides who
hears it (tests/test_progress.py); here the context's reporter is the test's own, so every
report the body makes is seen."""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from sandbox_support import NAME
from toolhost import ToolExecutionContext
from toolhost.testing import Harness, Run
from toolhost_sandbox.run_command import output_message
from toolhost_sandbox.ticker import Ticker

Report = tuple[float, "float | None", "str | None"]


@pytest.fixture
def reports() -> list[Report]:
    return []


@pytest.fixture
def context(toolhost_host: Harness, run: Run, isolation: None,
            reports: list[Report]) -> Iterator[ToolExecutionContext]:
    yield attrs.evolve(toolhost_host.context(run=run, timeout_s=30),
                       reporter=lambda *report: reports.append(report))


def _run(host: Harness, context: ToolExecutionContext, command: str, timeout_s: int) -> Any:
    output = host.run_body(NAME, {"command": command, "timeout_s": timeout_s}, context)
    assert output.structured["exit_code"] == 0, output.structured
    return output


def test_each_second_the_time_gone_of_the_timeout_and_the_output_so_far(
        toolhost_host: Harness, context: ToolExecutionContext, reports: list[Report]) -> None:
    _run(toolhost_host, context, "echo hello; sleep 2.5", 10)
    after = list(reports)
    # One a second while it ran (loosely: a slow start may add one).
    assert 2 <= len(after) <= 4, after
    assert [done for done, _, _ in after] == list(range(1, len(after) + 1))
    assert {total for _, total, _ in after} == {10}
    assert after[-1][2] == "6 bytes of output"  # "hello\n", read while the command slept
    assert reports == after  # nothing once the result is back


def test_output_is_counted_in_kib(toolhost_host: Harness, context: ToolExecutionContext,
                                  reports: list[Report]) -> None:
    _run(toolhost_host, context, "head -c 20000 /dev/zero; sleep 1.5", 10)
    assert reports and reports[-1][2] == "19 KiB of output"


def test_a_quick_command_reports_nothing(toolhost_host: Harness, context: ToolExecutionContext,
                                         reports: list[Report]) -> None:
    _run(toolhost_host, context, "true", 10)
    assert reports == []


@pytest.mark.parametrize("listening", [True, False])
def test_a_call_starts_no_thread(toolhost_host: Harness, run: Run, context: ToolExecutionContext,
                                 monkeypatch: pytest.MonkeyPatch, listening: bool) -> None:
    # The timeout, progress and the quota's measurements run on the caller's thread, off a
    # timer fd: none of them is a thread of the call's own (they were three, whoever listened).
    started: list[str] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    if not listening:  # the host's own context: its reporter goes nowhere
        context = toolhost_host.context(run=run, timeout_s=30)
    _run(toolhost_host, context, "echo hi; sleep 0.5", 10)
    assert started == []


def test_the_ticker_counts_ticks_and_never_blocks() -> None:
    hourly, fast = Ticker(3600), Ticker(0.001)
    try:
        assert hourly.passed() == 0  # none yet, and no wait for one
        select.select([fast], [], [])  # until one has passed
        assert fast.passed() >= 1
    finally:
        hourly.close()
        fast.close()
    fast.close()  # twice is harmless


@pytest.mark.parametrize(("size", "message"), [
    (0, "0 bytes of output"), (1, "1 byte of output"), (1023, "1023 bytes of output"),
    (1024, "1 KiB of output"), (12 * 1024 + 5, "12 KiB of output"),
    (1024 * 1024, "1024 KiB of output"),
])
def test_the_output_message(size: int, message: str) -> None:
    assert output_message(size) == message
