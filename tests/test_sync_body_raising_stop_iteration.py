"""A sync body that raises StopIteration (a bare ``next()`` on an exhausted iterator) fails
unexpectedly at once, like any other exception it raises (D391).

An asyncio Future refuses a StopIteration (``set_exception`` raises TypeError in the loop's
callback), so the call waited out its whole deadline and was recorded as a retryable
``tool.timeout.deadline``, the exception lost. Real host and SQLite store.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import Idempotency, Tool, ToolExecutionContext, ToolOutput
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationState
from toolhost.testing import Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}
#: Far longer than the test waits: a call that waits it out fails the test's bound.
TIMEOUT_S = 30


def exhausted(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    next(iter(()))  # what a plugin's bare next() on an empty iterator raises
    return ToolOutput(structured={"echo": "unreached"}, content="unreached")


def raises_it(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    raise StopIteration("no more pages")


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    tools = [Tool(make_spec(name=name, input_schema=SCHEMA, output_schema=OUT,
                            timeout_s=TIMEOUT_S, idempotency=Idempotency.READ_ONLY), call=body)
             for name, body in (("fx.exhausted", exhausted), ("fx.raises_it", raises_it))]
    with Harness.over({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path / "data") as h:
        yield h


@pytest.mark.parametrize(("name", "text"), [("fx.exhausted", ""),
                                            ("fx.raises_it", "no more pages")])
def test_a_sync_body_raising_stop_iteration_fails_unexpectedly_at_once(
    harness: Harness, name: str, text: str,
) -> None:
    started = time.monotonic()
    outcome = harness.invoke(name)
    assert time.monotonic() - started < TIMEOUT_S / 3  # not its deadline waited out
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        host_reasons.INTERNAL_UNEXPECTED, False)
    assert outcome.content == "The tool failed unexpectedly."
    row = harness.record(str(outcome.invocation_id))
    assert (row.state, row.reason_code) == (InvocationState.FAILED,
                                            host_reasons.INTERNAL_UNEXPECTED)
    assert row.failure_detail == {"exception": "StopIteration", "error": text}
