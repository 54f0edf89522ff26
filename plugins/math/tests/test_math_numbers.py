"""Numbers, precision, rounding and rendering: every value a Decimal at fifty digits."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from toolhost import ToolOutput
from toolhost_math.render import render

Call = Callable[[str], ToolOutput]
Result = Callable[[str], str]

PI_50 = "3.1415926535897932384626433832795028841971693993751"
# e to fifty digits is ...4709369999|5957 -> ...4709370000, and rendering strips those zeros.
E_50 = "2.7182818284590452353602874713526624977572470937"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0.1 + 0.2", "0.3"),
        ("0.1 * 3", "0.3"),
        ("1 - 0.9", "0.1"),
        ("1.10 + 2.20", "3.3"),
        ("2/8", "0.25"),
        ("1/4", "0.25"),
        ("10/4", "2.5"),
        ("1.5 * 2", "3"),
        ("100", "100"),  # zeros before any point are digits, not padding
        ("1e3", "1000"),
        ("2.50", "2.5"),
        ("3.000", "3"),
        ("123456789012 * 987654321098", "121932631136585886175176"),
    ],
)
def test_exact_decimal_arithmetic(call: Call, expression: str, expected: str) -> None:
    output = call(expression)
    assert output.structured["result"] == expected
    assert output.structured["result_exact"] is True
    assert output.content == expected


def test_round_half_even(result: Result) -> None:
    assert result("round(2.5)") == "2"
    assert result("round(3.5)") == "4"
    assert result("round(-2.5)") == "-2"
    assert result("round(0.125, 2)") == "0.12"
    assert result("round(0.135, 2)") == "0.14"
    assert result("round(150, -2)") == "200"
    assert result("round(250, -2)") == "200"


def test_rounding_functions_are_exact(call: Call) -> None:
    for expression in ("round(2.5)", "round(2.567, 2)", "floor(2.5)", "ceil(2.5)"):
        assert call(expression).structured["result_exact"] is True, expression


def test_a_long_literal_is_rounded_to_fifty_digits(call: Call) -> None:
    output = call("1" * 60)
    assert output.structured["result"] == "1.1111111111111111111111111111111111111111111111111e+59"
    assert output.structured["result_exact"] is False


def test_fifty_digits_are_exact(call: Call) -> None:
    fifty = "1234567890123456789012345.1234567890123456789012345"  # 50 digits, adjusted 24
    assert call(fifty).structured == {"result": fifty, "result_exact": True, "expression": fifty}
    assert call(fifty + "8").structured["result_exact"] is False


def test_pi_and_e_at_fifty_digits(call: Call) -> None:
    pi = call("pi")
    assert pi.content == f"{PI_50}\nrounded to 50 significant digits"
    assert pi.structured["result_exact"] is False
    assert len(PI_50.replace(".", "")) == 50
    e = call("e")
    assert e.structured["result"] == E_50
    assert Decimal(e.structured["result"]) == Decimal(
        "2.7182818284590452353602874713526624977572470937000"
    )
    assert call("exp(1)").structured["result"] == E_50


def test_inexact_is_the_context_flag(call: Call) -> None:
    assert call("1/3").structured["result_exact"] is False
    assert call("1/3*3").structured["result_exact"] is False  # 0.999... : rounded on the way
    assert call("sqrt(2)").structured["result_exact"] is False
    assert call("sqrt(16)").structured["result_exact"] is True
    assert call("2^10").structured["result_exact"] is True
    assert call("2^-10").structured["result_exact"] is True


# ------------------------------------------------------------------ rendering


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1e25", "10000000000000000000000000"),
        ("9.5e25", "95000000000000000000000000"),
        ("1e26", "1e+26"),
        ("10e25", "1e+26"),  # a function of the value, not of the coefficient
        ("1.5e26", "1.5e+26"),
        ("-1e26", "-1e+26"),
        ("1e-25", "0.0000000000000000000000001"),
        ("1.5e-25", "0.00000000000000000000000015"),
        ("1e-26", "1e-26"),
        ("-2.5e-26", "-2.5e-26"),
        ("2^100", "1.267650600228229401496703205376e+30"),
        ("1e9999", "1e+9999"),
        ("2.50 * 1e30", "2.5e+30"),
    ],
)
def test_rendering_band(result: Result, expression: str, expected: str) -> None:
    assert result(expression) == expected


@pytest.mark.parametrize(
    "expression", ["0", "-0", "0*-1", "-0.000", "0e30", "0 * 1e30", "ceil(-0.5)", "round(-0.4)"]
)
def test_every_zero_renders_as_0(result: Result, expression: str) -> None:
    assert result(expression) == "0"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("391", "391"),
        ("3.91E+2", "391"),
        ("0.250000", "0.25"),
        ("1.000", "1"),
        ("1E+25", "10000000000000000000000000"),
        ("1E+26", "1e+26"),
        ("1.0E+26", "1e+26"),
        ("-1E-26", "-1e-26"),
        ("1E-10049", "1e-10049"),
        ("-0E-7", "0"),
    ],
)
def test_render(value: str, expected: str) -> None:
    assert render(Decimal(value)) == expected


def test_every_rendering_parses_back_to_the_value() -> None:
    for text in ("1.5", "-7", "1E+26", "1.2345E-30", "99E+24", "0.1E-24"):
        assert Decimal(render(Decimal(text))) == Decimal(text)
