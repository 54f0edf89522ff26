"""The hot path against the exact path: the same value, the same refusal, or no answer.

``toolhost_math.hotpath`` answers most calls without the exact path's Tokens and Nodes, and
returns None for the rest so the exact path answers them. It is only worth having if every
answer it gives is the exact path's byte for byte: the value's digits and exponent, exactness,
and for a refusal the reason, the detail and the detail's key order. Generated expressions
here sit on every bound the hot path decides for itself: nesting around 32 levels, token
counts around 512, results around 1e10000 and 1e-10000, arities and names either side.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolhost_math.errors import CalculationError
from toolhost_math.evaluator import evaluate
from toolhost_math.hotpath import evaluate_expression
from toolhost_math.parser import parse_in_order
from toolhost_math.tokenizer import tokenize

Outcome = tuple[object, ...]


def _value(value: Decimal, exact: bool) -> Outcome:
    return ("value", value.as_tuple(), exact)  # digits, exponent and sign: the representation


def _refusal(error: CalculationError) -> Outcome:
    return ("refused", error.reason_code, list(error.detail.items()))


def exact_path(expression: str) -> Outcome:
    try:
        return _value(*evaluate(parse_in_order(tokenize(expression))))
    except CalculationError as error:
        return _refusal(error)


def hot_path(expression: str) -> Outcome | None:
    """The hot path's own answer, or None where it declines."""
    try:
        evaluation = evaluate_expression(expression)
    except CalculationError as error:
        return _refusal(error)
    return None if evaluation is None else _value(*evaluation)


def assert_same(expression: str) -> None:
    answer = hot_path(expression)
    if answer is not None:
        assert answer == exact_path(expression), expression


# ------------------------------------------------------------------ the hot path answers

ANSWERED = [
    "17 * 23",
    "sqrt(2)*pi/ln(10)",
    "1 + 2 * 3 - 4 / 5 // 6 % 7",
    "2^-3^4",
    "-2^-3^-+4 ** 5",
    "-(1 + 2) * -(3)",
    "max(1, -2 ^ 2, min(3, 4), abs(-5)) + pi - e",
    "round(sqrt(2) * pi / ln(10), 3) ^ (1 + 1) ^ 2",
    "round(2.5) + round(-1.25, 1) + floor(-0.5) + ceil(0.5) + exp(1) + log10(1000)",
    "0.1 + 0.2",
    "-7 // 2 + -7 % 2",
    "1" + "0" * 60,
    "(" * 32 + "1" + ")" * 32,
    "-" * 32 + "1",
    "1+" * 255 + "1",
    # Refused by the hot path itself: Overflow and Underflow, where the exact path says.
    "9**9**9",
    "9^9^9",
    "1 + 9 ^ 9 ^ 9 * 2",
    "1e99999",
    "1e-99999",
    "exp(100000)",
    "-(10 ^ 10001)",
    "0.1 ^ 10001",
    "pi ^ 30000",
    "2 ^ 33300",  # past the hot path's bound: refused before any power is computed
    "2 ^ 1e9999",
    # The 33rd level, opened by a group or a sign: raised where it opens, as the exact parser does.
    "(" * 33 + "1" + ")" * 33,
    "-" * 33 + "1",
    "2^-" * 17 + "(" * 16 + "1" + ")" * 16,
    "-" * 16 + "(" * 16 + "+1",
    # What binary() refuses, at the operator the exact evaluator names (issue #27: these went
    # the exact way, and paid for both paths).
    "1 / 0",
    "1/0",
    "7 // 0",
    "7  %  (3 - 3)",
    "0 ^ -1",
    "0 ** -1",
    "(-8) ^ (1/3)",
    "1 + 2 / (3 - 3) * 9^9^9",  # the division comes first in reading order
    "9^9^9 / 0",  # the overflow comes first
    "sqrt(4) / 0",
]


@pytest.mark.parametrize("expression", ANSWERED)
def test_the_hot_path_answers_these_as_the_exact_path_does(expression: str) -> None:
    answer = hot_path(expression)
    assert answer is not None, "declined: the exact path would run"
    assert answer == exact_path(expression)


DECLINED = [
    "",
    " ",
    "1 +",
    "1 $ 1",
    "1 . 2",
    "foo(1)",
    "pi(1)",
    "foo",
    "abs 1",
    "max()",
    "abs(1, 2)",
    "round(1, 2, 3)",
    "(1",
    "1)",
    "()",
    "1, 2",
    "(1, 2)",
    "(" * 33 + "1 $",  # a bad character anywhere outranks the 33rd level
    "abs(" * 33 + "1" + ")" * 33,
    "1+" * 256 + "1",
    "1" * 1025,
    "1 / 0 +",  # a later syntax error outranks the division
    "1 / 0 + foo",
    "sqrt(-1)",
    "ln(0)",
    "round(1, 51)",
    "9**9**9 + foo",  # a later unknown name outranks an earlier overflow
    "9**9**9 +",  # as does a later syntax error
]


@pytest.mark.parametrize("expression", DECLINED)
def test_the_hot_path_declines_what_only_the_exact_path_can_say(expression: str) -> None:
    assert hot_path(expression) is None
    assert exact_path(expression)[0] == "refused"


@pytest.mark.parametrize(
    ("expression", "value"), [("1\t+\n1", Decimal(2)), ("sqrt (4)", Decimal(2))],
    ids=["tab-newline", "name-space-paren"],
)
def test_these_are_read_the_exact_way(expression: str, value: Decimal) -> None:
    # Whitespace other than spaces, and a call written apart from its "(": both valid.
    assert hot_path(expression) is None
    assert exact_path(expression) == _value(value, True)


# ------------------------------------------------------------------ generated, near the bounds

_NUMBERS = st.sampled_from([
    "0", "1", "2", "9", "10", "0.5", "0.1", "3.75", "1e5", "2E-3", "1e5000", "1e-5000",
    "9e9999", "1e-9999", "1e10000", "1e-10049", "1e-10050", "5" * 55, "0.000", "1.0000",
])
_NAMES = st.sampled_from(["pi", "e", "x", "sin", "abs", "inf"])
_FUNCTIONS = st.sampled_from(
    ["abs", "ceil", "floor", "round", "sqrt", "ln", "log10", "exp", "min", "max", "cos"]
)
_BINARY = st.sampled_from(["+", "-", "*", "/", "//", "%", "^", "**", " + ", " ^ "])


def _expressions() -> st.SearchStrategy[str]:
    """Well-formed by the grammar (names and arities aside), nested at random."""

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, _BINARY, inner).map("".join),
            st.tuples(st.sampled_from(["-", "+", "--", "- "]), inner).map("".join),
            inner.map(lambda text: f"({text})"),
            st.tuples(_FUNCTIONS, st.lists(inner, min_size=0, max_size=3)).map(
                lambda call: f"{call[0]}({', '.join(call[1])})"
            ),
        )

    return st.recursive(st.one_of(_NUMBERS, _NAMES), extend, max_leaves=12)


@settings(max_examples=600)
@given(expression=_expressions())
@example("2 ^ 33219")  # 10^10000 is between 2^33219 and 2^33220
@example("2 ^ 33220")
@example("2 ^ 33222")  # the largest finite value is below 1e10001, between 2^33222 and 2^33223
@example("2 ^ 33223")
@example("2 ^ 33299.99")  # the hot path's own bound (33300) either side
@example("2 ^ 33300")
@example("1.99 ^ 33300")
@example("2 ^ 1e9999")
@example("2 ^ 9.5e9999")
@example("2 ^ -1e9999")
@example("0.5 ^ 33219")
@example("0.5 ^ 33270")
@example("(-2) ^ 33221")
@example("9e9999 * 1.2")
@example("1e-9999 / 1e50")
def test_well_formed_expressions_get_the_exact_answer(expression: str) -> None:
    assert_same(expression)


# Token soup: every token, the characters that start none, and whitespace of all six kinds.
_PIECES = st.sampled_from([
    *"0123456789.eE+-*/%^(),az_ \t\n", "**", "//", "1e5", "pi", "$", "A", "٣", "\v", "max(",
    "round(", "9^9^9", "sqrt(",
])


@settings(max_examples=600)
@given(parts=st.lists(_PIECES, max_size=40))
def test_token_soup_gets_the_exact_answer(parts: list[str]) -> None:
    assert_same("".join(parts))


_OPENERS = st.sampled_from(["(", "-", "+", "abs(", "max(1, ", "2^-", "2^("])
_CLOSERS = {"(": ")", "-": "", "+": "", "abs(": ")", "max(1, ": ")", "2^-": "", "2^(": ")"}


@settings(max_examples=300)
@given(openers=st.lists(_OPENERS, min_size=28, max_size=36), leaf=_NUMBERS,
       tail=st.sampled_from(["", "^2", "*3", ")", "+(1)"]))
def test_nesting_around_32_levels_gets_the_exact_answer(
    openers: list[str], leaf: str, tail: str
) -> None:
    closers = "".join(_CLOSERS[opener] for opener in reversed(openers))
    assert_same("".join(openers) + leaf + tail + closers)


@settings(max_examples=100)
@given(count=st.integers(min_value=250, max_value=260), operator=_BINARY,
       last=st.sampled_from(["1", "", "9^9^9", "1 $"]))
def test_token_counts_around_512_get_the_exact_answer(
    count: int, operator: str, last: str
) -> None:
    assert_same(("1" + operator) * count + last)


@settings(max_examples=100)
@given(count=st.integers(min_value=120, max_value=132),
       unit=st.sampled_from(["abs(1)+", "(1)+", "max(1,2)+", "-(1)*"]))
def test_calls_and_groups_near_512_tokens_get_the_exact_answer(count: int, unit: str) -> None:
    assert_same(unit * count + "1")


@settings(max_examples=300)
@given(base=st.sampled_from(["2", "9", "10", "0.5", "1.0001", "0.9999", "-2", "-0.5", "pi", "e"]),
       exponent=st.integers(min_value=-40000, max_value=40000),
       fraction=st.sampled_from(["", ".5", ".0"]))
def test_powers_around_the_magnitude_bound_get_the_exact_answer(
    base: str, exponent: int, fraction: str
) -> None:
    assert_same(f"({base}) ^ {exponent}{fraction}")
