"""Hard gate 4, and a differential test of the grammar against its own precedence table.

Every input either evaluates within the bounds, returning a string Decimal parses, or fails
with one of the eight reason codes. It never raises anything else, never returns a
non-Decimal, and never runs longer than the declared timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolhost import ToolCallable, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost_math.messages import REASON_CODES
from toolhost_math.tool import INEXACT_NOTE, SPEC

#: Timing is asserted explicitly (the declared 2 s timeout), so hypothesis's deadline is off.
PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ the oracle


def _check(tool: ToolCallable, context: ToolExecutionContext, expression: str) -> None:
    started = time.perf_counter()
    failure: ToolFailure | None = None
    try:
        output = tool({"expression": expression}, context)
    except ToolFailure as raised:
        failure, output = raised, None
    elapsed = time.perf_counter() - started
    assert elapsed < SPEC.timeout_s, f"{elapsed:.3f} s for {expression!r}"
    if failure is not None:
        assert failure.reason_code in REASON_CODES, failure
        assert failure.retryable is False
    else:
        assert isinstance(output, ToolOutput)
        structured = output.structured
        assert set(structured) == {"result", "result_exact", "expression"}
        assert structured["expression"] == expression
        assert isinstance(structured["result"], str)
        assert isinstance(structured["result_exact"], bool)
        value = Decimal(structured["result"])
        assert value.is_finite()
        assert len(value.as_tuple().digits) <= 50
        expected = structured["result"]
        if not structured["result_exact"]:
            expected += "\n" + INEXACT_NOTE
        assert output.content == expected


# ------------------------------------------------------------------ hostile strings

_NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10**60).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, min_value=0, max_value=10**6).map(
        lambda d: format(d, "f")
    ),
    st.sampled_from(
        ["9", "0", "1e9999", "1e-9999", "9e10000", "1e-10049", "1e99999", "0.5", "1E+5", "2e-3"]
    ),
    st.integers(min_value=1, max_value=300).map(lambda n: "9" * n),
)
_NAMES = st.one_of(
    st.sampled_from(
        ["abs", "ceil", "floor", "round", "sqrt", "ln", "log10", "exp", "min", "max", "pi", "e"]
    ),
    st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True),
    st.sampled_from(["PI", "Abs", "x", "__import__", "lambda", "inf", "nan", "sin"]),
)
_OPERATORS = st.sampled_from(
    ["+", "-", "*", "/", "//", "%", "^", "**", "(", ")", ",", "(", ")", "-", "^"]
)
_JUNK = st.sampled_from(
    [".", "_", "=", "==", "'", '"', "[", "]", "{", "}", "<", "!", "~", "&", "|", ";", "#", "$",
     "\\", "@", ":", "0x", "1_0", "\u00a0", "\u0663", "\u00b2", "\x00", "\U0001f600"]
)
_SPACE = st.sampled_from(["", "", "", " ", "  ", "\t", "\n"])
_FRAGMENT = st.one_of(_NUMBERS, _NAMES, _OPERATORS, _OPERATORS, _JUNK, _SPACE)


@st.composite
def _hostile(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(_FRAGMENT, _SPACE), max_size=60))
    body = "".join(a + b for a, b in parts)
    prefix = draw(st.sampled_from(["", "", "(" * 31, "(" * 40, "-" * 33, "abs(" * 20, "2^" * 20]))
    suffix = draw(st.sampled_from(["", "", ")" * 31, ")" * 40, "^9^9", "/0", "%0"]))
    return prefix + body + suffix


@PROPERTY
@given(expression=st.one_of(_hostile(), st.text(max_size=80), st.text(max_size=1100)))
@example(expression="9**9**9")
@example(expression="9^9^9")
@example(expression="1" * 1025)
@example(expression="(" * 33 + "1" + ")" * 33)
@example(expression="\x00")
@example(expression="exp(1e9999)")
@example(expression="1e9999 // 1e-10049")
@example(expression="9.99e9999 % 3e-10049")
@example(expression="(1+1e-49)^1e60")
@example(expression="round(1e9999, 50)")
def test_hostile_inputs_fail_only_with_the_eight_codes(
    calculate_tool: ToolCallable, context: ToolExecutionContext, expression: str
) -> None:
    _check(calculate_tool, context, expression)


# ------------------------------------------------------------------ well-formed expressions

_FUNCTION_ARITY = {
    "abs": 1, "ceil": 1, "floor": 1, "round": 2, "sqrt": 1, "ln": 1, "log10": 1, "exp": 1,
    "min": 3, "max": 2,
}


def _well_formed() -> st.SearchStrategy[str]:
    leaves = st.one_of(_NUMBERS, st.sampled_from(["pi", "e"]))

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(
            children, st.sampled_from(["+", "-", "*", "/", "//", "%", "^", "**"]), children
        ).map(lambda t: f"{t[0]} {t[1]} {t[2]}")
        unary = st.tuples(st.sampled_from(["-", "+"]), children).map("".join)
        group = children.map(lambda c: f"({c})")
        call = st.sampled_from(sorted(_FUNCTION_ARITY)).flatmap(
            lambda name: st.lists(
                children, min_size=1, max_size=_FUNCTION_ARITY[name]
            ).map(lambda args: f"{name}({', '.join(args)})")
        )
        return st.one_of(binary, unary, group, call)

    return st.recursive(leaves, extend, max_leaves=40)


@PROPERTY
@given(expression=_well_formed())
@example(expression="17 * 23")
@example(expression="exp(ln(9) * 9^9)")
@example(expression="sqrt(1e-10049) ^ -1e9999")
def test_well_formed_inputs_evaluate_or_fail_with_the_eight_codes(
    calculate_tool: ToolCallable, context: ToolExecutionContext, expression: str
) -> None:
    _check(calculate_tool, context, expression)


# ------------------------------------------------------------------ differential: precedence
# A tree of integer operations, printed with only the parentheses the spec's precedence table
# requires, must evaluate to the value the tree has under Python's int arithmetic.

_ADD, _MUL, _UNARY, _POW, _ATOM = 1, 2, 3, 4, 5
_LEVEL = {"+": _ADD, "-": _ADD, "*": _MUL, "//": _MUL, "%": _MUL}

Tree = tuple[Any, ...]


def _apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    assert op == "^"
    assert b >= 0  # generated exponents are 0..3: an int power of an int is an int
    power: int = a**b
    return power


def _value(tree: Tree) -> int:
    kind = tree[0]
    if kind == "num":
        return int(tree[1])
    if kind == "neg":
        return -_value(tree[1])
    return _apply(tree[1], _value(tree[2]), _value(tree[3]))


def _level(tree: Tree) -> int:
    kind = tree[0]
    if kind == "num":
        return _ATOM
    if kind == "neg":
        return _UNARY
    return _POW if tree[1] == "^" else _LEVEL[tree[1]]


def _print(tree: Tree, spaces: Callable[[], str]) -> str:
    def child(sub: Tree, minimum: int) -> str:
        text = _print(sub, spaces)
        return text if _level(sub) >= minimum else f"({text})"

    kind = tree[0]
    if kind == "num":
        return str(tree[1])
    if kind == "neg":
        return "-" + child(tree[1], _UNARY)  # unary := "-" unary | power
    op, left, right = tree[1], tree[2], tree[3]
    if op == "^":  # power := primary ["^" unary]: right-associative, unary on the right
        return f"{child(left, _ATOM)}{spaces()}{op}{spaces()}{child(right, _UNARY)}"
    level = _LEVEL[op]  # left-associative: the right operand must bind tighter
    return f"{child(left, level)}{spaces()}{op}{spaces()}{child(right, level + 1)}"


def _trees() -> st.SearchStrategy[Tree]:
    leaves = st.integers(min_value=0, max_value=999).map(lambda n: ("num", n))

    def extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
        return st.one_of(
            children.map(lambda c: ("neg", c)),
            st.tuples(st.just("bin"), st.sampled_from(["+", "-", "*", "//", "%"]), children,
                      children),
            st.tuples(st.just("bin"), st.just("^"), children,
                      st.integers(min_value=0, max_value=3).map(lambda n: ("num", n))),
        )

    return st.recursive(leaves, extend, max_leaves=12)


@PROPERTY
@given(tree=_trees(), data=st.data())
def test_precedence_differential_against_python_ints(
    calculate_tool: ToolCallable, context: ToolExecutionContext, tree: Tree, data: st.DataObject
) -> None:
    expression = _print(tree, lambda: data.draw(st.sampled_from(["", " "])))
    try:
        expected: int | None = _value(tree)
    except ZeroDivisionError:
        expected = None
    if expected is not None and abs(expected) >= 10**50:
        return  # beyond fifty digits the tool rounds, which Python's ints do not
    try:
        output = calculate_tool({"expression": expression}, context)
    except ToolFailure as raised:
        failure = raised
    else:
        assert isinstance(output, ToolOutput)
        assert expected is not None, expression
        assert Decimal(output.structured["result"]) == expected, expression
        assert output.structured["result_exact"] is True
        return
    assert expected is None, (expression, failure)
    assert failure.reason_code == "tool.invalid_arguments.division_by_zero"


# ------------------------------------------------------------------ round(x, n) near zero


@PROPERTY
@given(
    negative=st.booleans(),
    coefficient=st.integers(min_value=1, max_value=10**50 - 1),
    exponent=st.one_of(st.integers(min_value=-10049, max_value=-9900),
                       st.integers(min_value=-120, max_value=0)),
    places=st.integers(min_value=-50, max_value=50),
)
@example(negative=False, coefficient=1, exponent=-10000, places=-50)
@example(negative=False, coefficient=1, exponent=-10049, places=-1)
@example(negative=False, coefficient=5, exponent=-10045, places=-10)
@example(negative=True, coefficient=5, exponent=-51, places=50)
def test_round_of_a_small_value_is_the_exactly_rounded_value(
    calculate_tool: ToolCallable, context: ToolExecutionContext, negative: bool,
    coefficient: int, exponent: int, places: int,
) -> None:
    # x = (-1)^negative * coefficient * 10^exponent, an exact literal (a subnormal one is
    # carried exactly at an exponent of -10049 or above); the oracle rounds it half-even at
    # 10^-places with Fractions, which have no exponent range to leave.
    digits = str(coefficient)
    if exponent + len(digits) - 1 < -10000:  # subnormal: at most this many digits are exact
        digits = digits[:max(exponent + len(digits) - 1 + 10050, 1)]
        coefficient = int(digits)
    expression = f"round({'-' if negative else ''}{digits}e{exponent}, {places})"
    output = calculate_tool({"expression": expression}, context)
    assert isinstance(output, ToolOutput), expression
    x = Fraction(coefficient * (-1 if negative else 1)) * Fraction(10) ** exponent
    expected = round(x, places)
    assert Fraction(Decimal(output.structured["result"])) == expected, expression
    assert output.structured["result_exact"] is True
