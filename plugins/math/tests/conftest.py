"""Fixtures: the tool as the host builds it, and two ways to call it.

Tests go through ``toolhost_math.tool.build(Services(clock=...))`` and the real callable, so
what they assert is what the pipeline would run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from toolhost import (
    FixedClock,
    Principal,
    Services,
    ToolCallable,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
)
from toolhost_math import tool

Call = Callable[[str], ToolOutput]
Fail = Callable[[str], ToolFailure]


@pytest.fixture(scope="session")
def calculate_tool() -> ToolCallable:
    clock = FixedClock(dt.datetime(2026, 7, 25, 13, 3, 11, tzinfo=dt.UTC))
    return tool.build(Services(clock=clock))


@pytest.fixture(scope="session")
def context() -> ToolExecutionContext:
    return ToolExecutionContext(run_id="run-test", principal=Principal("tester"))


@pytest.fixture(scope="session")
def call(calculate_tool: ToolCallable, context: ToolExecutionContext) -> Call:
    """Run an expression that must succeed; returns the ToolOutput."""

    def run(expression: str) -> ToolOutput:
        output = calculate_tool({"expression": expression}, context)
        assert isinstance(output, ToolOutput)
        return output

    return run


@pytest.fixture(scope="session")
def fail(calculate_tool: ToolCallable, context: ToolExecutionContext) -> Fail:
    """Run an expression that must fail; returns the ToolFailure."""

    def run(expression: str) -> ToolFailure:
        with pytest.raises(ToolFailure) as caught:
            calculate_tool({"expression": expression}, context)
        return caught.value

    return run


@pytest.fixture(scope="session")
def result(call: Call) -> Callable[[str], str]:
    """The rendered result string of an expression that must succeed."""
    return lambda expression: call(expression).structured["result"]


@pytest.fixture(scope="session")
def reason(fail: Fail) -> Callable[[str], str]:
    """The bare code (``syntax``, ...) of an expression that must fail."""
    return lambda expression: fail(expression).reason_code.rsplit(".", 1)[1]
