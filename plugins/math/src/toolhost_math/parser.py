"""The parser: tokens to a tree, by exactly the printed grammar.

    expression := term (("+" | "-") term)*
    term       := unary (("*" | "/" | "//" | "%") unary)*
    unary      := ("+" | "-") unary | power
    power      := primary [("^" | "**") unary]
    primary    := NUMBER | NAME | call | "(" expression ")"
    call       := NAME "(" [expression ("," expression)*] ")"

Recursive descent. Because power's right operand is a full unary, ``-2^2`` is ``-(2^2)``,
``2^3^2`` is ``2^(3^2)`` and ``2^-1`` parses. ``parse`` returns the tree; ``parse_in_order``
returns its nodes in the order they were built, which is post-order, so the evaluator runs
them as a stack machine without walking the tree again.

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

__all__ = ["Binary", "Call", "Constant", "Node", "Number", "Unary", "parse", "parse_in_order"]


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
    return parse_in_order(tokens)[-1]


def parse_in_order(tokens: list[Token]) -> list[Node]:
    """Every node of the tree for ``tokens`` in evaluation order: post-order, operands left to
    right, so the root is last. What ``parse`` does, without a second walk for the evaluator.

    :raises CalculationError: as ``parse``.
    """
    parser = _Parser(tokens)
    parser.expression(0)
    trailing = tokens[parser.index]
    if trailing.kind != END:
        raise _syntax(trailing)
    if parser.unresolved is not None:
        raise parser.unresolved
    return parser.nodes


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


class _Parser:
    """One method per rule, except that ``expression`` folds ``term`` into its loop and
    ``unary`` folds in ``power``: a Python call is the dearest thing a parser this size does.

    Every node is appended to ``nodes`` as it is built. A node is built once its operands are,
    and operands are read left to right, so ``nodes`` is the tree in post-order."""

    __slots__ = ("index", "nodes", "tokens", "unresolved")

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.nodes: list[Node] = []
        #: The first unknown_name or arity problem, raised only if the whole input parses.
        self.unresolved: CalculationError | None = None

    def defer(self, error: CalculationError) -> None:
        if self.unresolved is None:
            self.unresolved = error

    def expression(self, depth: int) -> Node:
        """``term (("+" | "-") term)*`` where ``term`` is ``unary (("*" | ...) unary)*``: the
        term being read and the sum before it, both left-associative."""
        tokens, unary, add = self.tokens, self.unary, self.nodes.append
        term = unary(depth)
        total: Node | None = None
        pending: Token | None = None  # the "+" or "-" between ``total`` and ``term``
        while True:
            token = tokens[self.index]
            kind = token.kind
            if kind in _TERM_OPERATORS:
                self.index += 1
                term = Binary(kind, term, unary(depth), token.offset)
                add(term)
            elif kind in _SIGNS:
                self.index += 1
                if pending is None:
                    total = term
                else:
                    total = Binary(pending.kind, total, term, pending.offset)  # type: ignore[arg-type]
                    add(total)
                pending = token
                term = unary(depth)
            else:
                break
        if pending is None:
            return term
        node = Binary(pending.kind, total, term, pending.offset)  # type: ignore[arg-type]
        add(node)
        return node

    def signs(self, depth: int) -> tuple[list[Token], int]:
        """``("+" | "-")*``, each one a level of unary recursion."""
        signs: list[Token] = []
        while (token := self.tokens[self.index]).kind in _SIGNS:
            depth = _deeper(depth, token)
            signs.append(token)
            self.index += 1
        return signs, depth

    def wrap(self, signs: list[Token], node: Node) -> Node:
        for sign in reversed(signs):
            node = Unary(sign.kind, node, sign.offset)
            self.nodes.append(node)
        return node

    def unary(self, depth: int) -> Node:
        """``unary`` and ``power`` in one method: the signs, the primary, then the exponent
        chain if one follows (``-2^2`` is ``-(2^2)``)."""
        tokens, index = self.tokens, self.index
        token = tokens[index]
        if token.kind == NUMBER and tokens[index + 1].kind != POWER:
            # The commonest operand by far, a number alone, without the general path's calls.
            self.index = index + 1
            node: Node = Number(token.text, token.offset)
            self.nodes.append(node)
            return node
        signs = None
        if token.kind == "(":
            # A group, without the trip through primary: one call per level of nesting.
            self.index = index + 1
            node = self.expression(_deeper(depth, token))
            self.expect(")")
        else:
            if token.kind in _SIGNS:
                signs, depth = self.signs(depth)
            node = self.primary(depth)
        if self.tokens[self.index].kind == POWER:
            node = self.exponents(node, depth)
        return node if signs is None else self.wrap(signs, node)

    def exponents(self, base: Node, depth: int) -> Node:
        """The ``("^" | "**") unary`` after ``base``. That unary's operand may again be a
        power: 2^-3^4 is 2^(-(3^4)). Read the chain in a loop, carrying the depth its signs
        add, then fold it rightwards."""
        tokens = self.tokens
        links: list[tuple[Token, list[Token] | None, Node]] = []
        while (operator := tokens[self.index]).kind == POWER:
            self.index += 1
            signs = None
            if tokens[self.index].kind in _SIGNS:
                signs, depth = self.signs(depth)
            links.append((operator, signs, self.primary(depth)))
        node = links[-1][2]
        add = self.nodes.append
        for i in range(len(links) - 1, -1, -1):
            operator, signs, _ = links[i]
            if signs is not None:
                node = self.wrap(signs, node)
            node = Binary(POWER, links[i - 1][2] if i else base, node, operator.offset)
            add(node)
        return node

    def primary(self, depth: int) -> Node:
        token = self.tokens[self.index]
        kind = token.kind
        node: Node
        if kind == NUMBER:
            self.index += 1
            node = Number(token.text, token.offset)
        elif kind == "(":
            self.index += 1
            node = self.expression(_deeper(depth, token))
            self.expect(")")
            return node
        elif kind == NAME:
            self.index += 1
            if self.tokens[self.index].kind == "(":
                return self.call(token, depth)
            if token.text not in CONSTANTS:
                self.defer(
                    CalculationError(Reason.UNKNOWN_NAME, offset=token.offset, token=token.text)
                )
            node = Constant(token.text, token.offset)
        else:
            raise _syntax(token)
        self.nodes.append(node)
        return node

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
        node = Call(name.text, tuple(args), name.offset)
        self.nodes.append(node)
        return node

    def expect(self, kind: str) -> None:
        token = self.tokens[self.index]
        if token.kind != kind:
            raise _syntax(token)
        self.index += 1
