"""The parser: tokens to a tree, by exactly the printed grammar.

    expression := term (("+" | "-") term)*
    term       := unary (("*" | "/" | "//" | "%") unary)*
    unary      := ("+" | "-") unary | power
    power      := primary [("^" | "**") unary]
    primary    := NUMBER | NAME | call | "(" expression ")"
    call       := NAME "(" [expression ("," expression)*] ")"

Recursive descent, one method per rule. Because power's right operand is a full unary,
``-2^2`` is ``-(2^2)``, ``2^3^2`` is ``2^(3^2)`` and ``2^-1`` parses.

The depth bound counts grammar recursion, checked as the parser descends so that a 33rd level
fails before any of its tree is built: a parenthesized group, a call's arguments and each unary
operator add one. Those are the only places the parser recurses; chains of binary operators
and of powers are loops, so Python's recursion limit is never the bound that fires.

A NAME is a function if the next token is ``(`` and a constant otherwise; either way it must
be in the fixed tables (``toolhost_math.functions``) or it is unknown_name. Names and arity are
resolved here, so an evaluation never starts on an expression that names nothing, but they are
reported only once the whole input has parsed: an input that does not derive from expression
fails with syntax, so ``abs 1`` and ``foo(`` are syntax, while ``foo(1)`` is unknown_name.
The depth bound is the exception that cannot wait: it fires where the 33rd level opens.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolhost_math.bounds import MAX_DEPTH
from toolhost_math.errors import CalculationError, Reason
from toolhost_math.functions import CONSTANTS, FUNCTIONS
from toolhost_math.tokenizer import END, NAME, NUMBER, POWER, Token

__all__ = ["Binary", "Call", "Constant", "Node", "Number", "Unary", "parse"]


# Nodes are never mutated after parsing. They are not frozen only because a frozen
# dataclass's __init__ costs three to four times as much, and a 512-token input builds
# hundreds of them.


@dataclass(slots=True)
class Number:
    """A NUMBER literal, kept as its text: the evaluator rounds it into the context."""

    text: str
    offset: int


@dataclass(slots=True)
class Constant:
    name: str
    offset: int


@dataclass(slots=True)
class Unary:
    op: str  # "+" or "-"
    operand: Node
    offset: int


@dataclass(slots=True)
class Binary:
    op: str  # "+", "-", "*", "/", "//", "%" or POWER; offset is the operator's
    left: Node
    right: Node
    offset: int


@dataclass(slots=True)
class Call:
    function: str
    args: tuple[Node, ...]
    offset: int


Node = Number | Constant | Unary | Binary | Call

_SIGNS = frozenset({"+", "-"})
_TERM_OPERATORS = frozenset({"*", "/", "//", "%"})


def parse(tokens: list[Token]) -> Node:
    """The tree for ``tokens`` (as ``tokenize`` returns them, END last).

    :raises CalculationError: expression_too_deep or syntax, whichever comes first reading left
        to right; otherwise the first unknown_name or arity.
    """
    parser = _Parser(tokens)
    tree = parser.expression(0)
    trailing = tokens[parser.index]
    if trailing.kind != END:
        raise _syntax(trailing)
    if parser.unresolved is not None:
        raise parser.unresolved
    return tree


def _syntax(token: Token) -> CalculationError:
    return CalculationError(
        Reason.SYNTAX, offset=token.offset, token=token.text if token.kind != END else None
    )


def _deeper(depth: int, token: Token) -> int:
    depth += 1
    if depth > MAX_DEPTH:
        raise CalculationError(
            Reason.EXPRESSION_TOO_DEEP, offset=token.offset, token=token.text, limit=MAX_DEPTH
        )
    return depth


def _wrap(signs: list[Token], node: Node) -> Node:
    for sign in reversed(signs):
        node = Unary(sign.kind, node, sign.offset)
    return node


class _Parser:
    __slots__ = ("index", "tokens", "unresolved")

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        #: The first unknown_name or arity problem, raised only if the whole input parses.
        self.unresolved: CalculationError | None = None

    def defer(self, error: CalculationError) -> None:
        if self.unresolved is None:
            self.unresolved = error

    def expression(self, depth: int) -> Node:
        node = self.term(depth)
        while (token := self.tokens[self.index]).kind in _SIGNS:
            self.index += 1
            node = Binary(token.kind, node, self.term(depth), token.offset)
        return node

    def term(self, depth: int) -> Node:
        node = self.unary(depth)
        while (token := self.tokens[self.index]).kind in _TERM_OPERATORS:
            self.index += 1
            node = Binary(token.kind, node, self.unary(depth), token.offset)
        return node

    def signs(self, depth: int) -> tuple[list[Token], int]:
        """``("+" | "-")*``, each one a level of unary recursion."""
        signs: list[Token] = []
        while (token := self.tokens[self.index]).kind in _SIGNS:
            depth = _deeper(depth, token)
            signs.append(token)
            self.index += 1
        return signs, depth

    def unary(self, depth: int) -> Node:
        if self.tokens[self.index].kind not in _SIGNS:
            return self.power(depth)  # the common case, without building an empty chain
        signs, depth = self.signs(depth)
        return _wrap(signs, self.power(depth))

    def power(self, depth: int) -> Node:
        base = self.primary(depth)
        if self.tokens[self.index].kind != POWER:
            return base
        # The exponent is a unary whose operand may again be a power: 2^-3^4 is 2^(-(3^4)).
        # Read the chain in a loop, carrying the depth its signs add, then fold it rightwards.
        links: list[tuple[Token, list[Token], Node]] = []
        while (operator := self.tokens[self.index]).kind == POWER:
            self.index += 1
            signs, depth = self.signs(depth)
            links.append((operator, signs, self.primary(depth)))
        node = links[-1][2]
        for i in range(len(links) - 1, 0, -1):
            operator, signs, _ = links[i]
            node = Binary(POWER, links[i - 1][2], _wrap(signs, node), operator.offset)
        operator, signs, _ = links[0]
        return Binary(POWER, base, _wrap(signs, node), operator.offset)

    def primary(self, depth: int) -> Node:
        token = self.tokens[self.index]
        kind = token.kind
        if kind == NUMBER:
            self.index += 1
            return Number(token.text, token.offset)
        if kind == NAME:
            self.index += 1
            if self.tokens[self.index].kind == "(":
                return self.call(token, depth)
            if token.text not in CONSTANTS:
                self.defer(
                    CalculationError(Reason.UNKNOWN_NAME, offset=token.offset, token=token.text)
                )
            return Constant(token.text, token.offset)
        if kind == "(":
            depth = _deeper(depth, token)
            self.index += 1
            node = self.expression(depth)
            self.expect(")")
            return node
        raise _syntax(token)

    def call(self, name: Token, depth: int) -> Node:
        function = FUNCTIONS.get(name.text)
        if function is None:
            self.defer(CalculationError(Reason.UNKNOWN_NAME, offset=name.offset, token=name.text))
        self.index += 1  # the "("
        args: list[Node] = []
        first = self.tokens[self.index]
        if first.kind != ")":
            depth = _deeper(depth, first)
            args.append(self.expression(depth))
            while self.tokens[self.index].kind == ",":
                self.index += 1
                args.append(self.expression(depth))
        self.expect(")")
        if function is not None and not function.accepts(len(args)):
            self.defer(
                CalculationError(
                    Reason.ARITY, offset=name.offset, function=name.text, arguments=len(args),
                    expected=function.arity,
                )
            )
        return Call(name.text, tuple(args), name.offset)

    def expect(self, kind: str) -> None:
        token = self.tokens[self.index]
        if token.kind != kind:
            raise _syntax(token)
        self.index += 1
