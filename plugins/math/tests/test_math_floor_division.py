"""Hard gate 6: // and % floor like Python's int operators, on every combination of signs.

Decimal's own // and % truncate toward zero; the tool chose Python's flooring form (the
caller's prior), computed explicitly. These tests are what makes that choice hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolhost import ToolOutput
from toolhost_math.evaluator import CONTEXT, floor_divmod

#: Timing is asserted explicitly (the declared 2 s timeout), so hypothesis's deadline is off.
PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow])

Call = Callable[[str], ToolOutput]


def _literal(n: int) -> str:
    return f"({n})" if n < 0 else str(n)


def _value(call: Call, expression: str) -> Decimal:
    output = call(expression)
    assert output.structured["result_exact"] is True, expression
    return Decimal(output.structured["result"])


@pytest.mark.parametrize("a", [-7, 7])
@pytest.mark.parametrize("b", [-2, 2])
def test_every_sign_combination_matches_python(call: Call, a: int, b: int) -> None:
    assert _value(call, f"{_literal(a)} // {_literal(b)}") == a // b
    assert _value(call, f"{_literal(a)} % {_literal(b)}") == a % b


def test_the_spec_examples(call: Call) -> None:
    assert call("-7 // 2").content == "-4"  # Decimal's own // gives -3
    assert call("-7 % 2").content == "1"  # Decimal's own % gives -1
    assert Decimal(-7) // Decimal(2) == -3  # the operator the tool does not use
    assert Decimal(-7) % Decimal(2) == -1


nonzero = st.integers(min_value=-(10**20), max_value=10**20).filter(bool)


@PROPERTY
@given(a=st.integers(min_value=-(10**20), max_value=10**20), b=nonzero)
@example(a=0, b=-3)
@example(a=-6, b=3)
@example(a=6, b=-3)
@example(a=-1, b=10**20)
def test_differential_against_python_ints(call: Call, a: int, b: int) -> None:
    assert _value(call, f"{_literal(a)} // {_literal(b)}") == a // b
    assert _value(call, f"{_literal(a)} % {_literal(b)}") == a % b


decimals = st.decimals(
    min_value=-(10**6), max_value=10**6, places=4, allow_nan=False, allow_infinity=False
)


def _floors_exactly(a: Decimal, b: Decimal) -> None:
    quotient, remainder = floor_divmod(a, b)
    exact = Fraction(a) / Fraction(b)
    assert quotient == math.floor(exact)
    assert Fraction(remainder) == Fraction(a) - Fraction(b) * math.floor(exact)
    assert remainder.is_zero() or remainder.is_signed() == b.is_signed()
    assert remainder.copy_abs() < b.copy_abs()  # copy_abs: abs() would round to the context


@PROPERTY
@given(a=decimals, b=decimals.filter(bool))
@example(a=Decimal(-1), b=Decimal(10**28 + 1))
def test_decimal_operands_floor_exactly(a: Decimal, b: Decimal) -> None:
    _floors_exactly(a, b)


#: Up to fifty digits at any exponent within 1e-60..1e60, where quotient and remainder are
#: still cheap to check against Fraction.
wide_decimals = st.decimals(allow_nan=False, allow_infinity=False).filter(
    lambda d: abs(d.adjusted()) < 60 and len(d.as_tuple().digits) <= 50
)


@PROPERTY
@given(a=wide_decimals, b=wide_decimals.filter(bool))
def test_wide_operands_floor_exactly(a: Decimal, b: Decimal) -> None:
    _floors_exactly(a, b)


def test_a_quotient_that_rounding_would_move_is_floored_exactly(call: Call) -> None:
    # (10**50 - 1) / 2 is 4999...9.5 with fifty integer digits. Rounded to fifty digits first
    # (half-even, up to 5e49) and then floored, it would give 5e49; the exact floor is 5e49 - 1.
    a = 10**50 - 1
    with localcontext(CONTEXT):
        rounded_first = (Decimal(a) / 2).to_integral_value(rounding=ROUND_FLOOR)
    assert rounded_first == 5 * 10**49  # the wrong answer the explicit computation avoids
    assert _value(call, f"{a} // 2") == a // 2
    assert _value(call, f"{a} % 2") == 1
    assert _value(call, f"-{a} // 2") == -a // 2


def test_huge_and_tiny_operands(call: Call) -> None:
    assert call("1e9999 % 7").content == str(10**9999 % 7)
    assert call("-1e-9000 % 1e9000").content == "1e+9000\nrounded to 50 significant digits"
    assert call("1e9999 // 7").structured["result_exact"] is False
