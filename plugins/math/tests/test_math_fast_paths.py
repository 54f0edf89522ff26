"""The fast paths against plain references: the tokenizer's one-call scan against a
character-by-character scanner, and the parser's evaluation order against the tree it builds.

The tokenizer finds every token with one regular expression and rescans only when a character
starts no token; the parser lists nodes as it builds them instead of the evaluator walking the
tree. Both are only worth having if they are exactly what the plain versions give.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost_math.errors import CalculationError
from toolhost_math.parser import Binary, Call, Node, Unary, parse, parse_in_order
from toolhost_math.tokenizer import END, NAME, NUMBER, POWER, Token, tokenize

_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def reference_tokenize(expression: str) -> list[Token] | tuple[str, dict[str, object]]:
    """The lexical grammar read one character at a time: the tokens, or (code, detail)."""
    tokens: list[Token] = []
    position = 0
    while position < len(expression):
        char = expression[position]
        if char in " \t\n\r\f\v":
            position += 1
            continue
        if len(tokens) == 512:
            return ("expression_too_long", {"tokens": 513, "limit": 512, "offset": position})
        if "0" <= char <= "9":
            text = _NUMBER.match(expression, position).group()  # type: ignore[union-attr]
            tokens.append(Token(NUMBER, text, position))
        elif "a" <= char <= "z":
            text = _NAME.match(expression, position).group()  # type: ignore[union-attr]
            tokens.append(Token(NAME, text, position))
        elif expression[position:position + 2] in ("**", "//"):
            text = expression[position:position + 2]
            tokens.append(Token(POWER if text == "**" else "//", text, position))
        elif char in "+-*/%^(),":
            text = char
            tokens.append(Token(POWER if char == "^" else char, char, position))
        else:
            return ("syntax", {"offset": position, "token": char})
        position += len(text)
    tokens.append(Token(END, "", len(expression)))
    return tokens


def actual_tokenize(expression: str) -> list[Token] | tuple[str, dict[str, object]]:
    try:
        return tokenize(expression)
    except CalculationError as error:
        return (error.reason.value, dict(error.detail))


# Token characters, whitespace, and characters that start no token, weighted toward tokens.
_ALPHABET = st.sampled_from([*"0123456789.eE+-*/%^(),az_ \t\n", "**", "//", "1e5", "pi", "$",
                             "A", "٣", "\v"])


@settings(max_examples=400)
@given(parts=st.lists(_ALPHABET, max_size=60))
def test_the_tokenizer_is_the_character_by_character_scan(parts: list[str]) -> None:
    expression = "".join(parts)
    assert actual_tokenize(expression) == reference_tokenize(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "1+" * 256 + "$",  # the 513th token starts at a bad character: the bound fires first
        "1+" * 255 + "$ 1 1",  # a bad character before the 513th token: syntax
        "1+" * 300,  # 600 tokens, all good: the 513th token's offset
        " " * 5 + "1+" * 300 + "@",  # a bad character after the 513th token
        "1 . 2",
        "abc\u00a0+1",  # a non-ASCII space is not whitespace here
    ],
    ids=["bound-at-bad", "bad-first", "600-tokens", "bad-after-bound", "dot", "nbsp"],
)
def test_the_first_problem_is_reported_where_it_is(expression: str) -> None:
    assert actual_tokenize(expression) == reference_tokenize(expression)
    assert isinstance(reference_tokenize(expression), tuple)


def postorder(tree: Node) -> list[Node]:
    """The tree's nodes, operands before their operator, left to right."""
    if type(tree) is Binary:
        return [*postorder(tree.left), *postorder(tree.right), tree]
    if type(tree) is Unary:
        return [*postorder(tree.operand), tree]
    if type(tree) is Call:
        return [node for arg in tree.args for node in postorder(arg)] + [tree]
    return [tree]


@pytest.mark.parametrize(
    "expression",
    [
        "17 * 23",
        "1 + 2 * 3 - 4 / 5 // 6 % 7",
        "2^-3^4",
        "-2^-3^-+4 ** 5",
        "-(1 + 2) * -(3)",
        "max(1, -2 ^ 2, min(3, 4), abs(-5)) + pi - e",
        "round(sqrt(2) * pi / ln(10), 3) ^ (1 + 1) ^ 2",
        "((((1))))",
        "1 - 2 - 3 * 4 * 5 + 6",
    ],
)
def test_the_evaluation_order_is_the_trees_postorder(expression: str) -> None:
    tokens = tokenize(expression)
    in_order = parse_in_order(tokens)
    assert in_order == postorder(parse(tokens))
    assert all(a is b for a, b in zip(in_order, postorder(in_order[-1]), strict=True))
