"""The tokenizer: characters to tokens, by the printed lexical grammar and nothing else.

    NUMBER := digit+ ["." digit+] [("e" | "E") ["+" | "-"] digit+]
    NAME   := [a-z][a-z0-9_]*
    operators: + - * / // % ^ ** ( ) ,

Hand-written rather than Python's tokenizer because Python's lexical rules are not ours:
``1_000``, ``.5``, ``0x10``, ``1j`` and Unicode digits are all Python numbers and none is ours.
The character classes are spelled out as ASCII ranges for the same reason (``str.isdigit``
accepts ``"٣"`` and ``"²"``). Whitespace is the six ASCII whitespace characters.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from toolhost_math.bounds import MAX_LENGTH, MAX_TOKENS
from toolhost_math.errors import CalculationError, Reason

__all__ = ["END", "NAME", "NUMBER", "POWER", "Token", "tokenize"]

NUMBER = "number"
NAME = "name"
END = "end"
#: ``^`` and ``**`` are one operator: a person writes one, a model writes the other.
POWER = "^"

# The exponent group is optional as a whole, so "1e" and "1e+" lex as the number 1 followed
# by whatever comes next (the name e), which the parser then refuses as a trailing token.
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_WHITESPACE = frozenset(" \t\n\r\f\v")
_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_TWO_CHAR = {"**": POWER, "//": "//"}
_ONE_CHAR = {c: c for c in "+-*/%(),"} | {"^": POWER}


class Token(NamedTuple):
    """``kind`` is NUMBER, NAME, END or the operator itself (POWER for both ^ and **);
    ``text`` is the source text verbatim; ``offset`` is the character offset of its start."""

    kind: str
    text: str
    offset: int


def tokenize(expression: str) -> list[Token]:
    """The tokens of ``expression``, ending with one END token (which the bound ignores).

    :raises CalculationError: expression_too_long past 1024 characters or 512 tokens;
        syntax at the first character that starts no token (detail: offset, token).
    """
    # Checked again here although the input schema has maxLength: a tool that depends on its
    # caller having validated is wrong the first time it is called from anywhere else.
    if len(expression) > MAX_LENGTH:
        raise CalculationError(
            Reason.EXPRESSION_TOO_LONG, length=len(expression), limit=MAX_LENGTH
        )
    tokens: list[Token] = []
    append = tokens.append
    new = tuple.__new__  # Token(...) without NamedTuple's Python-level __new__: a third faster
    position = 0
    length = len(expression)
    while position < length:
        char = expression[position]
        if char in _WHITESPACE:
            position += 1
            continue
        if len(tokens) == MAX_TOKENS:
            raise CalculationError(
                Reason.EXPRESSION_TOO_LONG, tokens=MAX_TOKENS + 1, limit=MAX_TOKENS,
                offset=position,
            )
        if char in _DIGITS:
            end = _NUMBER.match(expression, position).end()  # type: ignore[union-attr]
            append(new(Token, (NUMBER, expression[position:end], position)))
        elif char in _LETTERS:
            end = _NAME.match(expression, position).end()  # type: ignore[union-attr]
            append(new(Token, (NAME, expression[position:end], position)))
        elif (pair := expression[position : position + 2]) in _TWO_CHAR:
            end = position + 2
            append(new(Token, (_TWO_CHAR[pair], pair, position)))
        elif char in _ONE_CHAR:
            end = position + 1
            append(new(Token, (_ONE_CHAR[char], char, position)))
        else:
            raise CalculationError(Reason.SYNTAX, offset=position, token=char)
        position = end
    append(Token(END, "", length))
    return tokens
