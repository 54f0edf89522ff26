"""Fixtures: the tool as the host builds it, and two ways to call it.

Tests go through ``toolhost_math.tool.build(Services(clock=...))`` and the real callable, so
what they assert is what the pipeline would run.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from toolhost import (
    FixedClock,
    Principal,
    Services,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
)
from toolhost_math import tool

Call = Callable[[str], ToolOutput]
Fail = Callable[[str], ToolFailure]


def drive(result: Any) -> Any:
    """The value of a coroutine that never suspends (the tool awaits nothing), run inline."""
    if not inspect.iscoroutine(result):
        return result
    try:
        result.send(None)
    except StopIteration as stop:
        return stop.value
    result.close()
    raise AssertionError("the tool suspended; it must await nothing")


@pytest.fixture(scope="session")
def calculate_tool() -> Callable[..., Any]:
    clock = FixedClock(dt.datetime(2026, 7, 25, 13, 3, 11, tzinfo=dt.UTC))
    built = tool.build(Services(clock=clock))
    return lambda arguments, context: drive(built(arguments, context))


@pytest.fixture(scope="session")
def context() -> ToolExecutionContext:
    return ToolExecutionContext(run_id="run-test", principal=Principal("tester"))


@pytest.fixture(scope="session")
def call(calculate_tool: Callable[..., Any], context: ToolExecutionContext) -> Call:
    """Run an expression that must succeed; returns the ToolOutput."""

    def run(expression: str) -> ToolOutput:
        output = calculate_tool({"expression": expression}, context)
        assert isinstance(output, ToolOutput)
        return output

    return run


@pytest.fixture(scope="session")
def fail(calculate_tool: Callable[..., Any], context: ToolExecutionContext) -> Fail:
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
