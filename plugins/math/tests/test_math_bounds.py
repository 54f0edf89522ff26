"""Hard gate 5 and the four bounds: a hostile expression is a failure, not an outage."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pytest

from toolhost import (
    ToolCallable,
    ToolExecutionContext,
    ToolFailure,
    ToolFailureKind,
    ToolOutput,
)
from toolhost.testing import Harness

Call = Callable[[str], ToolOutput]
Fail = Callable[[str], ToolFailure]

#: Hard gate 5's bound. Loose on purpose: the measured figures are microseconds.
FIFTY_MS = 0.050

HOSTILE = {
    "9**9**9": "result_out_of_range",
    "9^9^9": "result_out_of_range",
    "1" * 1025: "expression_too_long",
    "(" * 33 + "1" + ")" * 33: "expression_too_deep",
}


@pytest.mark.parametrize(("expression", "code"), HOSTILE.items(), ids=lambda v: str(v)[:12])
def test_hostile_expressions_fail_fast_with_their_own_code(
    calculate_tool: ToolCallable, context: ToolExecutionContext, expression: str, code: str
) -> None:
    calculate_tool({"expression": "1"}, context)  # imports and first-call costs paid
    started = time.perf_counter()
    with pytest.raises(ToolFailure) as caught:
        calculate_tool({"expression": expression}, context)
    elapsed = time.perf_counter() - started
    assert caught.value.reason_code == f"tool.invalid_arguments.{code}"
    assert elapsed < FIFTY_MS, f"{elapsed * 1e3:.2f} ms"


# ------------------------------------------------------------------ length


TOO_LONG = "tool.invalid_arguments.expression_too_long"
TOO_LONG_MESSAGE = "The expression is longer than 1024 characters."


def test_1024_characters_pass_and_1025_fail(call: Call, fail: Fail) -> None:
    # Called directly, with no pipeline in front: the tokenizer holds the bound itself.
    assert call("1" + " " * 1023).content == "1"
    failure = fail("1" + " " * 1024)
    assert failure.reason_code == TOO_LONG
    assert failure.detail == {"length": 1025, "limit": 1024}


@pytest.mark.parametrize(
    "expression", ["1" + " " * 1024, "1" * 1025, "$" * 1025, "(" * 1025, "1" * 2000],
    ids=["padded", "digits", "junk", "deep", "2000"],
)
def test_through_the_pipeline_1025_characters_are_expression_too_long(
    toolhost_host: Harness, expression: str
) -> None:
    # Hard gate 5 end to end: the input schema's maxLength fails at step 4, and the tool maps
    # that rule (SchemaRule("/expression", "maxLength")) to its own reason, not the host's
    # generic schema failure. The message is the static one, byte for byte.
    outcome = toolhost_host.invoke("math.calculate", expression=expression)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == TOO_LONG
    assert outcome.failure.kind is ToolFailureKind.INVALID_ARGUMENTS
    assert outcome.failure.retryable is False
    assert outcome.content == outcome.failure.message == TOO_LONG_MESSAGE
    assert outcome.content.encode() == b"The expression is longer than 1024 characters."
    assert outcome.failure.detail["rule"] == "maxLength"  # step 4's, not the tokenizer's


@pytest.mark.parametrize(
    ("expression", "content"),
    [("1" + " " * 1023, "1"), (" " * 1023 + "7", "7"), ("1" * 1024, None)],
    ids=["padded", "leading", "digits"],
)
def test_through_the_pipeline_1024_characters_are_not_refused_for_length(
    toolhost_host: Harness, expression: str, content: str | None
) -> None:
    assert len(expression) == 1024
    outcome = toolhost_host.invoke("math.calculate", expression=expression)
    assert outcome.ok, outcome.to_json()
    assert outcome.structured is not None
    assert outcome.structured["expression"] == expression
    if content is not None:
        assert outcome.content == content
    else:  # a 1024-digit literal: rounded to fifty digits, and said so
        assert outcome.structured["result"] == "1." + "1" * 49 + "e+1023"
        assert outcome.structured["result_exact"] is False


def test_length_is_checked_before_anything_else(fail: Fail) -> None:
    assert fail("$" * 2000).reason_code.endswith("expression_too_long")


# ------------------------------------------------------------------ tokens


def test_512_tokens_pass_and_513_fail(call: Call, fail: Fail) -> None:
    assert call("+".join(["1"] * 256) + "  ").content == "256"  # 511 tokens
    assert call("-" + "+".join(["1"] * 256)).content == "254"  # 512 tokens
    failure = fail("-" + "+".join(["1"] * 256) + "+1")  # 514 tokens, refused at the 513th
    assert failure.reason_code == "tool.invalid_arguments.expression_too_long"
    assert failure.detail["tokens"] == 513


def test_exactly_513_tokens_fail(fail: Fail) -> None:
    assert fail("1" + "+1" * 256).reason_code.endswith("expression_too_long")  # 513 tokens


# ------------------------------------------------------------------ depth


def _groups(depth: int) -> str:
    return "(" * depth + "1" + ")" * depth


def _calls(depth: int) -> str:
    return "abs(" * depth + "1" + ")" * depth


def _signs(depth: int) -> str:
    return "-" * depth + "1"


def _mixed(depth: int) -> str:
    # Alternating unary minus and group: each adds one.
    half, odd = divmod(depth, 2)
    return "-(" * half + "-" * odd + "1" + ")" * half


@pytest.mark.parametrize("shape", [_groups, _calls, _signs, _mixed])
def test_depth_32_passes_and_33_fails(
    call: Call, fail: Fail, shape: Callable[[int], str]
) -> None:
    assert abs(int(call(shape(32)).structured["result"])) == 1
    failure = fail(shape(33))
    assert failure.reason_code == "tool.invalid_arguments.expression_too_deep"
    assert failure.detail["limit"] == 32


def test_depth_counts_nesting_not_siblings(call: Call) -> None:
    assert call("+".join([_groups(32)] * 4)).content == "4"
    assert call("max(" + ",".join([_groups(31)] * 3) + ")").content == "1"


def test_call_arguments_add_one_level(call: Call, fail: Fail) -> None:
    assert call("abs(" + _groups(31) + ")").content == "1"
    assert fail("abs(" + _groups(32) + ")").reason_code.endswith("expression_too_deep")


def test_a_power_chain_does_not_count_as_depth(call: Call) -> None:
    # 2^3^4 nests through power's right operand, not through a group, call or sign.
    assert call("^".join(["1"] * 200)).content == "1"


def test_depth_fails_where_level_33_opens_before_the_rest_is_read(fail: Fail) -> None:
    # The syntax error at the end is never reached: the bound fires while descending.
    failure = fail("(" * 33 + "1 +")
    assert failure.reason_code.endswith("expression_too_deep")
    assert failure.detail["offset"] == 32


def test_no_recursion_error_even_with_a_tiny_stack(call: Call, fail: Fail) -> None:
    # Chains are loops and depth is bounded, so the tool fits in a small fraction of the
    # default recursion limit: 511 tokens of + chain or ^ chain, 32 levels of groups.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(_frames()) + 250)
    try:
        assert call("+".join(["1"] * 256)).content == "256"
        assert call("^".join(["1"] * 256)).content == "1"
        assert call(_mixed(32)).content in {"1", "-1"}
        assert fail("(" * 500).reason_code.endswith("expression_too_deep")
        assert fail("-" * 500 + "1").reason_code.endswith("expression_too_deep")
    finally:
        sys.setrecursionlimit(limit)


def _frames() -> list[object]:
    frames = []
    frame = sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return frames
