"""What a typed tool's body returns, as the model, the row and ``toolhost call`` read it.

The content is exactly a ``str`` (a ``str`` Enum's member is its value, which the row and MCP
write, not its ``Status.DONE`` as ``print`` would show it); a sync wrapper of an ``async def``
(``functools.wraps`` over a coroutine function, as logging or retry decorators are) returns a
coroutine the pipeline awaits, as for a hand-written body; a result JSON cannot carry says
why in its failure's detail.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import io
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from test_typed_tools import SAFE as TYPED_SAFE

from toolhost import (
    Domain,
    Tool,
    hookimpl,
    tool,
)
from toolhost._cli.common import print_content
from toolhost.testing import Harness

SAFE: dict[str, Any] = {**TYPED_SAFE, "timeout_s": 5}  # read-only, with time for a coroutine


class Status(str, enum.Enum):  # noqa: UP042 - the common "string enum" idiom, under test
    DONE = "done"


@attrs.frozen
class Job:
    status: str

    def __str__(self) -> str:
        return Status(self.status)  # a str subclass: str() passes it through as it is


@attrs.frozen
class Count:
    n: int


@attrs.frozen
class Ratio:
    value: float


def logged(function: Callable[..., Any]) -> Callable[..., Any]:
    """An ordinary sync decorator, as logging, retry or metrics ones are."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return wrapper


RAN: list[int] = []


@tool("results.status", "1.0.0", **SAFE)
def status() -> str:
    """A text result that is a str Enum's member."""
    return Status.DONE


@tool("results.job", "1.0.0", **SAFE)
def job() -> Job:
    """A result whose own __str__ returns a str subclass."""
    return Job("done")


@tool("results.double", "1.0.0", **SAFE)
@logged
async def double(n: int) -> str:
    """Double n, in an async body under a sync decorator."""
    await asyncio.sleep(0)
    RAN.append(n)
    return str(2 * n)


@tool("results.huge", "1.0.0", **SAFE)
def huge() -> Count:
    """A result with an integer past Python's digit limit for int-to-str conversion."""
    return Count(10 ** (sys.get_int_max_str_digits() + 1))


@tool("results.nan", "1.0.0", **SAFE)
def nan() -> Ratio:
    """A result that is NaN."""
    return Ratio(float("nan"))


TOOLS: list[Tool] = [status, job, double, huge, nan]


@pytest.fixture
def harness() -> Iterator[Harness]:
    plugin = types.SimpleNamespace(
        toolhost_domains=hookimpl(lambda: [Domain("results", "Results under test.")]),
        toolhost_tools=hookimpl(lambda: TOOLS))
    with Harness.over({"toolhost-results": plugin}) as made:
        yield made


def _printed(content: str) -> str:
    """What ``toolhost call`` prints of a content, to a pipe."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_content(content)
    return out.getvalue()


@pytest.mark.parametrize("name", ["results.status", "results.job"])
def test_a_str_subclass_result_is_its_plain_text(harness: Harness, name: str) -> None:
    outcome = harness.invoke(name)
    assert outcome.ok, outcome.failure
    assert type(outcome.content) is str
    assert _printed(outcome.content) == "done\n"


def test_a_text_results_structured_text_is_a_plain_str(harness: Harness) -> None:
    outcome = harness.invoke("results.status")
    assert outcome.structured == {"text": "done"}
    assert outcome.structured is not None and type(outcome.structured["text"]) is str


def test_an_async_body_under_a_sync_decorator_is_awaited(harness: Harness) -> None:
    RAN.clear()
    outcome = harness.invoke("results.double", n=21)
    assert outcome.ok, outcome.failure
    assert (outcome.content, outcome.structured, RAN) == ("42", {"text": "42"}, [21])


def test_an_integer_json_cannot_write_is_not_called_nan(harness: Harness) -> None:
    outcome = harness.invoke("results.huge")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.output_invalid.schema"
    problem = str(outcome.failure.detail["problem"])
    assert "NaN" not in problem and "digits" in problem, problem


def test_a_nan_result_still_says_nan(harness: Harness) -> None:
    outcome = harness.invoke("results.nan")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.output_invalid.schema"
    assert "NaN" in str(outcome.failure.detail["problem"])
