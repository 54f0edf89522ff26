"""Functions, constants, and the reason codes evaluation can fail with."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from toolhost import ToolFailure, ToolOutput

Call = Callable[[str], ToolOutput]
Result = Callable[[str], str]
Reason = Callable[[str], str]
Fail = Callable[[str], ToolFailure]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("abs(-3.5)", "3.5"),
        ("abs(3)", "3"),
        ("ceil(2.1)", "3"),
        ("ceil(-2.1)", "-2"),
        ("floor(2.9)", "2"),
        ("floor(-2.1)", "-3"),
        ("floor(1e30)", "1e+30"),
        ("round(2.675, 2)", "2.68"),
        ("round(1.5)", "2"),
        ("round(1234.5678, -2)", "1200"),
        ("round(1, 50)", "1"),
        ("round(1e-60, 50)", "0"),
        ("round(1.5, -50)", "0"),
        ("round(7, 2.0)", "7"),
        ("sqrt(16)", "4"),
        ("sqrt(0)", "0"),
        ("sqrt(0.25)", "0.5"),
        ("ln(1)", "0"),
        ("log10(1000)", "3"),
        ("log10(0.001)", "-3"),
        ("exp(0)", "1"),
        ("min(3, 1, 2)", "1"),
        ("max(3, 1, 2)", "3"),
        ("min(5)", "5"),
        ("max(-1, -2)", "-1"),
        ("max(1, 2) + min(3, 4)", "5"),
        ("abs(-(2^3))", "8"),
        ("0^0", "1"),
        ("0^2", "0"),
        ("0^0.5", "0"),
        ("(-2)^3", "-8"),
        ("(-1)^(10^40)", "1"),
    ],
)
def test_functions(result: Result, expression: str, expected: str) -> None:
    assert result(expression) == expected


@pytest.mark.parametrize(
    "expression",
    ["foo(1)", "x", "sin(1)", "cos(0)", "tau", "inf", "nan", "sqrt", "pi(1)", "e(2)", "log(8)",
     "abs(1) + y", "max(1, q)", "exp(pi) + tan(1)"],
)
def test_unknown_name(reason: Reason, expression: str) -> None:
    assert reason(expression) == "unknown_name"


@pytest.mark.parametrize(
    "expression",
    ["abs()", "abs(1, 2)", "sqrt(1, 2)", "ln()", "round()", "round(1, 2, 3)", "min()", "max()",
     "exp(1, 2)", "floor(1, 2)", "ceil()", "log10(10, 10)"],
)
def test_arity(reason: Reason, expression: str) -> None:
    assert reason(expression) == "arity"


def test_arity_detail(fail: Fail) -> None:
    assert fail("round(1, 2, 3)").detail == {
        "offset": 0, "function": "round", "arguments": 3, "expected": "1 or 2"
    }


@pytest.mark.parametrize(
    ("expression", "function", "argument"),
    [
        ("sqrt(-1)", "sqrt", 1),
        ("sqrt(-1e-30)", "sqrt", 1),
        ("ln(0)", "ln", 1),
        ("ln(-1)", "ln", 1),
        ("log10(0)", "log10", 1),
        ("log10(-5)", "log10", 1),
        ("round(1, 51)", "round", 2),
        ("round(1, -51)", "round", 2),
        ("round(1, 0.5)", "round", 2),
        ("round(1, 1e9999)", "round", 2),
    ],
)
def test_domain(fail: Fail, expression: str, function: str, argument: int) -> None:
    failure = fail(expression)
    assert failure.reason_code == "tool.invalid_arguments.domain"
    assert failure.detail["function"] == function
    assert failure.detail["argument"] == argument


def test_negative_base_to_a_fractional_power_is_domain(reason: Reason) -> None:
    assert reason("(-8)^(1/3)") == "domain"
    assert reason("(-1)^0.5") == "domain"


@pytest.mark.parametrize(
    "expression", ["1/0", "1//0", "1%0", "0^-1", "0**-1", "0^-0.5", "1/(2-2)", "5 % (0*3)", "1/-0"]
)
def test_division_by_zero(reason: Reason, expression: str) -> None:
    assert reason(expression) == "division_by_zero"


@pytest.mark.parametrize(
    ("expression", "signal"),
    [
        ("9**9**9", "Overflow"),
        ("9^9^9", "Overflow"),
        ("1e9999 * 100", "Overflow"),
        ("1e10001", "Overflow"),
        ("exp(23100)", "Overflow"),
        ("2^2^2^2^2", "Overflow"),
        ("1e9999 // 1e-9999", "Overflow"),
        ("1/1e-10049", "Overflow"),
        ("1e-9999 / 1e60", "Underflow"),
        ("1e-99999", "Underflow"),
        ("exp(-23100)", "Underflow"),
        ("0.5^40000", "Underflow"),
        ("1e-10040 / 3", "Underflow"),
    ],
)
def test_result_out_of_range(fail: Fail, expression: str, signal: str) -> None:
    failure = fail(expression)
    assert failure.reason_code == "tool.invalid_arguments.result_out_of_range"
    assert failure.detail["signal"] == signal


def test_an_exact_subnormal_is_a_result_not_an_underflow(result: Result) -> None:
    # Underflow is trapped, Subnormal is not (the spec's trap list): 1e-10009 is below Emin
    # but carried exactly, so it is returned rather than refused. A subnormal that would lose
    # digits is Underflow (test_result_out_of_range).
    assert result("1e-9999 / 1e10") == "1e-10009"


@pytest.mark.parametrize(
    "expression", ["round(1e-10000, -50)", "round(1e-10049, -1)", "round(5e-10045, -10)",
                   "round(-1e-10049, -50)", "round(1e-10049, 50)", "round(9.9e-9951, -50)"],
)
def test_rounding_a_tiny_value_to_a_coarser_place_is_zero(call: Call, expression: str) -> None:
    # Scaling 1e-10000 by 10**-50 goes below Etiny, but that is a step inside the rounding,
    # not a result: the value is 0, exactly, as the decimal semantics have it.
    output = call(expression)
    assert output.structured["result"] == "0" and output.structured["result_exact"] is True
    assert output.content == "0"


@pytest.mark.parametrize("expression", ["1e-10000 / 1e50", "1e-10000 / 3e10",
                                        "round(1e-10000 / 1e50, -50)",
                                        "round(1e-10000, -50) + 1e-10000 / 3e10"])
def test_a_result_that_underflows_is_still_out_of_range(fail: Fail, expression: str) -> None:
    # The rounding step's scaling is exempt; a result's underflow is not. (1e-10000 / 1e10 is
    # 1e-10010: subnormal but exact, so a result, as test_an_exact_subnormal_... has it.)
    failure = fail(expression)
    assert failure.reason_code == "tool.invalid_arguments.result_out_of_range"
    assert failure.detail["signal"] == "Underflow" and failure.detail["operation"] == "/"


def test_evaluation_fails_left_to_right(fail: Fail) -> None:
    assert fail("1/0 + sqrt(-1)").reason_code.endswith("division_by_zero")
    assert fail("sqrt(-1) + 1/0").reason_code.endswith("domain")
