"""Hard gates 3 and 7, and the exact shape of what the tool returns, asserted on bytes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from toolhost import ToolFailure, ToolOutput, ToolValidationError
from toolhost.testing import Harness

Call = Callable[[str], ToolOutput]
Fail = Callable[[str], ToolFailure]

ONE_THIRD = "0.33333333333333333333333333333333333333333333333333"


def test_17_times_23_is_exactly_391(call: Call) -> None:
    # The spec's hard gate 3: its first demonstration, 17 * 23.
    output = call("17 * 23")
    assert output.content.encode() == b"391"
    assert output.structured == {"result": "391", "result_exact": True, "expression": "17 * 23"}
    assert output.structured["result_exact"] is True


def test_point_one_plus_point_two_is_exactly_point_three(call: Call) -> None:
    # Hard gate 7: the regression test for the whole reason the numeric type is Decimal.
    output = call("0.1 + 0.2")
    assert output.content.encode() == b"0.3"
    assert output.structured["result"] == "0.3"
    assert output.structured["result_exact"] is True


def test_inexact_result_carries_the_second_line(call: Call) -> None:
    output = call("1/3")
    assert output.content.encode() == (
        b"0.33333333333333333333333333333333333333333333333333\nrounded to 50 significant digits"
    )
    assert output.structured == {"result": ONE_THIRD, "result_exact": False, "expression": "1/3"}


def test_exact_result_has_no_second_line(call: Call) -> None:
    assert "\n" not in call("2/8").content
    assert call("2/8").content == "0.25"


def test_expression_is_echoed_verbatim(call: Call) -> None:
    expression = "  2 **  3\t"
    assert call(expression).structured["expression"] == expression


def test_output_trust_is_left_to_the_spec(call: Call) -> None:
    assert call("1").output_trust is None


def test_every_failure_is_invalid_arguments_and_not_retryable(fail: Fail) -> None:
    for expression in ("1 +", "nope", "abs()", "sqrt(-1)", "1/0", "9^9^9", "1" * 1025, "(" * 40):
        failure = fail(expression)
        assert failure.reason_code.startswith("tool.invalid_arguments.")
        assert failure.retryable is False
        assert failure.kind.value == "INVALID_ARGUMENTS"


@pytest.mark.parametrize(
    "arguments",
    [{}, {"expression": 17}, {"expression": None}, {"expression": ["1"]}, {"expression": ""},
     {"expression": "1", "precision": 80}, ["17 * 23"], "17 * 23"],
    ids=["missing", "int", "null", "list", "empty", "extra", "array", "string"],
)
def test_arguments_the_schema_refuses_never_reach_the_body(
    toolhost_host: Harness, arguments: object
) -> None:
    # The body no longer re-checks what step 4 guarantees (a string of 1 to 1024 characters):
    # the pipeline refuses everything else with the host's one validation failure.
    outcome = toolhost_host.call("math.calculate", arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == ToolValidationError.REASON_CODE
    assert outcome.failure.retryable is False
    assert outcome.structured is None
