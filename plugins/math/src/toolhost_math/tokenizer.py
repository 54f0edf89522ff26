"""The tokenizer: characters to tokens, by the printed lexical grammar and nothing else.

    NUMBER := digit+ ["." digit+] [("e" | "E") ["+" | "-"] digit+]
    NAME   := [a-z][a-z0-9_]*
    operators: + - * / // % ^ ** ( ) ,

Hand-written rather than Python's tokenizer because Python's lexical rules are not ours:
``1_000``, ``.5``, ``0x10``, ``1j`` and Unicode digits are all Python numbers and none is ours.
The character classes are spelled out as ASCII ranges for the same reason (``str.isdigit``
accepts ``"٣"`` and ``"²"``). Whitespace is the six ASCII whitespace characters.

One regular expression of exactly those tokens finds them all in one call; an input with a
character that starts no token, or with a 513th token, is then scanned token by token to
report the first problem where it is.
"""

from __future__ import annotations

import re
from typing import NamedTuple, NoReturn

from toolhost_math.bounds import MAX_LENGTH, MAX_TOKENS
from toolhost_math.errors import CalculationError, Reason

__all__ = ["END", "HOT_TEXT_PATTERN", "NAME", "NUMBER", "POWER", "Token", "tokenize"]

NUMBER = "number"
NAME = "name"
END = "end"
#: ``^`` and ``**`` are one operator: a person writes one, a model writes the other.
POWER = "^"

# The exponent group is optional as a whole, so "1e" and "1e+" lex as the number 1 followed
# by whatever comes next (the name e), which the parser then refuses as a trailing token.
_NUMBER_RE = r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_NAME_RE = r"[a-z][a-z0-9_]*"
_OPERATOR_RE = r"\*\*?|//?|[-+%^(),]"
#: A run of whitespace and the token after it, operators first (``**`` before ``*``, ``//``
#: before ``/``). ``findall`` applies it across the input in C; it skips what starts no token,
#: which the running offset then shows.
_TOKEN = re.compile(rf"([ \t\n\r\f\v]*)({_OPERATOR_RE}|{_NUMBER_RE}|{_NAME_RE})")
#: For ``toolhost_math.hotpath``: each token's text alone in the one group (so ``findall``
#: returns plain strings), except that a name directly followed by ``(`` is read with it as
#: one text, a call.
HOT_TEXT_PATTERN = rf"[ \t\n\r\f\v]*({_OPERATOR_RE}|{_NUMBER_RE}|{_NAME_RE}\(|{_NAME_RE})"
_WHITESPACE = " \t\n\r\f\v"
_SPACE = re.compile(rf"[{_WHITESPACE}]*")
_OPERATORS = {"**": POWER, "^": POWER, "//": "//"} | {c: c for c in "+-*/%(),"}
#: A number or name's kind, by its first character (operators are looked up whole first).
_KIND_BY_FIRST = dict.fromkeys("0123456789", NUMBER) | dict.fromkeys(
    "abcdefghijklmnopqrstuvwxyz", NAME)


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
    operator = _OPERATORS.get
    offset = 0
    for space, text in _TOKEN.findall(expression):
        offset += len(space)
        append(new(Token, (operator(text) or _KIND_BY_FIRST[text[0]], text, offset)))
        offset += len(text)
    # ``offset`` counts the characters the matches consumed. If one was skipped, what is left
    # after ``offset`` holds more than trailing whitespace (at least the last token's end),
    # and every offset is suspect: scan again to find the first problem where it is.
    if offset != len(expression) and expression[offset:].strip(_WHITESPACE):
        _refuse(expression)
    if len(tokens) > MAX_TOKENS:
        raise CalculationError(
            Reason.EXPRESSION_TOO_LONG, tokens=MAX_TOKENS + 1, limit=MAX_TOKENS,
            offset=tokens[MAX_TOKENS].offset,
        )
    append(new(Token, (END, "", len(expression))))
    return tokens


def _refuse(expression: str) -> NoReturn:
    """For an expression with a character that starts no token: raise the first problem
    reading left to right, that character (syntax) or a 513th token before it
    (expression_too_long)."""
    position = count = 0
    while True:
        start = _SPACE.match(expression, position).end()  # type: ignore[union-attr]
        assert start < len(expression), "_refuse called on an expression that lexes"
        if count == MAX_TOKENS:
            raise CalculationError(
                Reason.EXPRESSION_TOO_LONG, tokens=MAX_TOKENS + 1, limit=MAX_TOKENS,
                offset=start,
            )
        match = _TOKEN.match(expression, start)
        if match is None:
            raise CalculationError(Reason.SYNTAX, offset=start, token=expression[start])
        count += 1
        position = match.end()
