"""Fixtures, all from the toolhost test kit (``toolhost.testing``).

- ``toolhost_plugins`` tells the kit's ``toolhost_host`` fixture to run this plugin alone, not
  whatever is installed: tests that go through the pipeline take ``toolhost_host: Harness``.
- The many grammar, number and property tests call the tool body directly, for speed. They
  share one session-scoped ``Harness`` over the plugin: ``calculate_tool`` is the body exactly
  as that host builds it (``Harness.tool``), and ``context`` a context the kit made for it.
  What they assert is what the pipeline would run, minus the pipeline's own checks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolhost import ToolExecutionContext, ToolFailure, ToolOutput
from toolhost.testing import Harness
from toolhost_math import plugin

Call = Callable[[str], ToolOutput]
Fail = Callable[[str], ToolFailure]

PLUGINS = {"toolhost-math": plugin}


@pytest.fixture
def toolhost_plugins() -> dict[str, object]:
    return dict(PLUGINS)


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
def math_harness() -> Iterator[Harness]:
    """One host over the plugin for the whole session (the direct-call tests only read it)."""
    with Harness.over(PLUGINS) as harness:
        yield harness


@pytest.fixture(scope="session")
def calculate_tool(math_harness: Harness) -> Callable[..., Any]:
    """The body as the host builds it, driven inline: ``calculate_tool(arguments, context)``."""
    body = math_harness.tool("math.calculate")
    return lambda arguments, context: drive(body(arguments, context))


@pytest.fixture(scope="session")
def context(math_harness: Harness) -> ToolExecutionContext:
    # The body reads nothing from its context; the deadline is the kit's, and is not checked.
    return math_harness.context()


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
