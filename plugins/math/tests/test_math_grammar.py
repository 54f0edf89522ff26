"""The grammar: tokens, precedence and associativity, and everything it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from toolhost_math.errors import CalculationError, Reason
from toolhost_math.parser import Binary, Call, Constant, Number, Unary, parse
from toolhost_math.tokenizer import END, NAME, NUMBER, POWER, Token, tokenize

Result = Callable[[str], str]


# ------------------------------------------------------------------ tokenizer


def test_17_times_23_tokens() -> None:
    assert tokenize("17 * 23") == [
        Token(NUMBER, "17", 0),
        Token("*", "*", 3),
        Token(NUMBER, "23", 5),
        Token(END, "", 7),
    ]


@pytest.mark.parametrize("text", ["^", "**"])
def test_caret_and_double_star_are_one_token(text: str) -> None:
    _, power, exponent, _ = tokenize(f"2{text}3")
    assert power == Token(POWER, text, 1)
    assert exponent.offset == 1 + len(text)


@pytest.mark.parametrize(
    "text", ["0", "17", "1.5", "1e5", "1E5", "1e+5", "1e-5", "1.25E-07", "007", "1" * 300]
)
def test_number_literals(text: str) -> None:
    assert tokenize(text) == [Token(NUMBER, text, 0), Token(END, "", len(text))]


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("1e", [NUMBER, NAME]),  # the exponent needs digits: "1" then the name e
        ("1e+", [NUMBER, NAME, "+"]),
        ("2pi", [NUMBER, NAME]),
        ("0x10", [NUMBER, NAME]),
        ("log10(x_1)", [NAME, "(", NAME, ")"]),
        ("8//3", [NUMBER, "//", NUMBER]),
        ("8/ /3", [NUMBER, "/", "/", NUMBER]),
        ("2***3", [NUMBER, POWER, "*", NUMBER]),
        ("max(1,2)%3", [NAME, "(", NUMBER, ",", NUMBER, ")", "%", NUMBER]),
    ],
)
def test_token_kinds(text: str, kinds: list[str]) -> None:
    assert [t.kind for t in tokenize(text)] == [*kinds, END]


def test_whitespace_is_discarded_in_any_run() -> None:
    assert [t.text for t in tokenize(" \t1\n+\r\n2\f\v ")] == ["1", "+", "2", ""]


@pytest.mark.parametrize(
    ("text", "offset", "token"),
    [
        ("1 $ 2", 2, "$"),
        ("1_000", 1, "_"),
        (".5", 0, "."),
        ("1.", 1, "."),
        ("PI", 0, "P"),
        ("2\u00a0+ 2", 1, "\u00a0"),  # only ASCII whitespace is whitespace
        ("\u0663", 0, "\u0663"),  # ARABIC-INDIC DIGIT THREE is not a digit here
        ("2\u00b2", 1, "\u00b2"),
    ],
)
def test_tokenizer_syntax_detail(text: str, offset: int, token: str) -> None:
    with pytest.raises(CalculationError) as caught:
        tokenize(text)
    assert caught.value.reason is Reason.SYNTAX
    assert caught.value.detail == {"offset": offset, "token": token}


# ------------------------------------------------------------------ parser


def test_17_times_23_is_one_multiplication_node() -> None:
    assert parse(tokenize("17 * 23")) == Binary("*", Number("17", 0), Number("23", 5), 3)


def test_unary_sits_above_power() -> None:
    power = Binary(POWER, Number("2", 1), Number("2", 3), 2)
    assert parse(tokenize("-2^2")) == Unary("-", power, 0)


def test_power_is_right_associative() -> None:
    inner = Binary(POWER, Number("3", 2), Number("2", 4), 3)
    assert parse(tokenize("2^3^2")) == Binary(POWER, Number("2", 0), inner, 1)


def test_power_takes_a_unary_on_the_right() -> None:
    tree = parse(tokenize("2^-3^4"))
    inner = Binary(POWER, Number("3", 3), Number("4", 5), 4)
    assert tree == Binary(POWER, Number("2", 0), Unary("-", inner, 2), 1)


def test_name_is_constant_unless_followed_by_parenthesis() -> None:
    assert parse(tokenize("pi")) == Constant("pi", 0)
    assert parse(tokenize("max(pi, e)")) == Call("max", (Constant("pi", 4), Constant("e", 8)), 0)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # level 1: grouping and calls
        ("(2+3)*4", "20"),
        ("abs(2-5)*2", "6"),
        # level 2: ^ and **, right-associative
        ("2^3^2", "512"),
        ("2**3**2", "512"),
        ("2^3**2", "512"),
        ("(2^3)^2", "64"),
        ("2^3^0", "2"),
        ("2^-1", "0.5"),
        ("2**-1", "0.5"),
        ("2^-2^2", "0.0625"),
        ("2^+2", "4"),
        # level 3: unary + and -, right-associative, below power
        ("-2^2", "-4"),
        ("-2**2", "-4"),
        ("(-2)^2", "4"),
        ("-2^-2", "-0.25"),
        ("-+-3", "3"),
        ("--3", "3"),
        ("+5", "5"),
        ("-7//2", "-4"),  # (-7)//2: unary binds tighter than //
        ("-(7//2)", "-3"),
        ("-3*2", "-6"),
        # level 4: * / // %, left-associative
        ("2*-3", "-6"),
        ("100/10/5", "2"),
        ("8//3*3", "6"),
        ("8%3*3", "6"),
        ("2^3*2", "16"),
        ("2*3^2", "18"),
        ("4/2*2", "4"),
        ("7%4%2", "1"),
        # level 5: binary + and -, left-associative
        ("10-4-3", "3"),
        ("2+3*4", "14"),
        ("2*3+4", "10"),
        ("1+2^2", "5"),
        ("7-2*3^2", "-11"),
        ("2--3", "5"),
        ("2-+3", "-1"),
        ("1 - 2 + 3", "2"),
    ],
)
def test_precedence_and_associativity(result: Result, expression: str, expected: str) -> None:
    assert result(expression) == expected


# ------------------------------------------------------------------ refusals

#: "Nothing else is accepted": every form the spec names, and the neighbours of each.
REJECTED = [
    # assignment
    "x = 1",
    "pi = 3",
    "a := 1",
    "x += 1",
    # comparison
    "1 == 1",
    "1 < 2",
    "2 >= 1",
    "1 != 2",
    "1 < 2 < 3",
    "not 1",
    "1 and 2",
    # string
    "'1'",
    '"1"',
    "'a' * 3",
    # list and tuple
    "[1, 2]",
    "(1, 2)",
    "{1}",
    "{'a': 1}",
    "1, 2",
    # attribute access, subscripts, and Python's other ways in
    "pi.real",
    "abs.x",
    "(1).real",
    "abs(1)(2)",
    "max[1]",
    "__import__('os')",
    "lambda: 1",
    "1 if 1 else 2",
    "f'{1}'",
    # underscore digit separators, leading point, hexadecimal and other Python literals
    "1_000",
    ".5",
    "1.",
    "1..2",
    "1.2.3",
    "1e5.5",
    "0x10",
    "0o17",
    "0b101",
    "1j",
    "1e",
    "1e+",
    # trailing, leading and doubled operators
    "1 +",
    "1 *",
    "2 ^",
    "2 **",
    "1 //",
    "-",
    "* 2",
    "1 +* 2",
    "1 // / 2",
    "2 ^ ^ 3",
    "~1",
    "1 & 2",
    "1 | 2",
    "1 << 2",
    "!1",
    "3!",
    # uppercase names
    "PI",
    "Pi",
    "E",
    "Abs(1)",
    "SQRT(4)",
    # structure
    "",
    "   ",
    "()",
    "(1",
    "1)",
    "(1))",
    "2 3",
    "2pi",
    "2(3)",
    "(2)(3)",
    "max(1,)",
    "max(,1)",
    "max(1 2)",
    "abs 1",
    "abs(",
    "foo(",
    "sqrt(4",
    "1;2",
    "1 # comment",
    "1\\\n+ 2",
]


@pytest.mark.parametrize("expression", REJECTED)
def test_rejected_forms_are_syntax(reason: Callable[[str], str], expression: str) -> None:
    assert reason(expression) == "syntax"


@pytest.mark.parametrize(
    ("expression", "offset", "token"),
    [
        ("1 + * 2", 4, "*"),
        ("(1", 2, None),
        ("1 +", 3, None),
        ("2 3", 2, "3"),
        ("max(1,)", 6, ")"),
        ("abs 1", 4, "1"),
    ],
)
def test_syntax_detail_names_offset_and_token(
    fail: Callable[[str], object], expression: str, offset: int, token: str | None
) -> None:
    failure = fail(expression)
    assert failure.detail == {"offset": offset, "token": token}  # type: ignore[attr-defined]


def test_syntax_is_reported_before_names() -> None:
    # foo(1) derives from the grammar and names nothing known; foo(1 does not derive.
    with pytest.raises(CalculationError) as caught:
        parse(tokenize("foo(1"))
    assert caught.value.reason is Reason.SYNTAX
    with pytest.raises(CalculationError) as caught:
        parse(tokenize("foo(1) + abs(1, 2)"))
    assert caught.value.reason is Reason.UNKNOWN_NAME
    with pytest.raises(CalculationError) as caught:
        parse(tokenize("abs(1, 2) + foo(1)"))
    assert caught.value.reason is Reason.ARITY
