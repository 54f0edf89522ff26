"""The evaluator: a tree to one Decimal, inside one explicit decimal context.

    prec 50, ROUND_HALF_EVEN, Emax 10000, Emin -10000, capitals 0,
    traps InvalidOperation, DivisionByZero, Overflow, Underflow

The magnitude bound is the context's: nothing here tests whether a value got too big. Overflow
and Underflow are trapped, and the trap is the check (9**9**9 overflows from the exponents, in
microseconds, before any digit is computed). Underflow is trapped too, because quietly rounding
a tiny result to zero is the same lie as quietly returning infinity for a huge one.

Exactness is the context's Inexact flag: cleared before, read after.

The evaluator runs the tree's nodes in post-order, as the parser lists them, on a stack of
values: a long chain such as 1+1+...+1 costs no recursion however the parser shaped it, and
operands are evaluated left to right, so the first failure in reading order is the one
reported.
"""

from __future__ import annotations

import decimal
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    Underflow,
)
from typing import NamedTuple

from toolhost_math.errors import CalculationError, Reason
from toolhost_math.functions import CONSTANTS, FUNCTIONS, OutsideDomain
from toolhost_math.parser import Binary, Call, Constant, Node, Number, Unary
from toolhost_math.tokenizer import POWER

__all__ = ["CONTEXT", "PRECISION", "Evaluation", "binary", "evaluate"]

PRECISION = 50
_TRAPS = [InvalidOperation, DivisionByZero, Overflow, Underflow]

#: The template; every evaluation runs in a fresh copy (``decimal.localcontext`` copies).
CONTEXT = Context(
    prec=PRECISION,
    rounding=ROUND_HALF_EVEN,
    Emax=10000,
    Emin=-10000,
    capitals=0,
    clamp=0,
    flags=[],
    traps=_TRAPS,
)

_ONE = Decimal(1)
_ZERO = Decimal(0)


class Evaluation(NamedTuple):
    value: Decimal
    exact: bool


def evaluate(nodes: list[Node]) -> Evaluation:
    """The value of the tree whose nodes ``nodes`` lists in evaluation order (post-order, the
    root last, as ``parse_in_order`` returns it) at fifty significant digits, and whether it
    is exact.

    :raises CalculationError: domain, division_by_zero or result_out_of_range.
    """
    with decimal.localcontext(CONTEXT) as context:
        context.clear_flags()
        value = _run(nodes, context)
        return Evaluation(value, not context.flags[Inexact])


def _run(nodes: list[Node], context: Context) -> Decimal:
    # A stack machine over the post-order: each node's operands are the values on top of the
    # stack when it is reached. Numbers, the commonest node, are tested first.
    values: list[Decimal] = []
    push, take = values.append, values.pop
    create = context.create_decimal
    node = nodes[0]
    try:
        for node in nodes:
            if type(node) is Number:
                # Rounded into the context on creation: a 60-digit literal is 50 digits and
                # inexact, and 1e99999 overflows here rather than somewhere later.
                push(create(node.text))
            elif type(node) is Binary:
                right = take()
                op = node.op
                if op == "+":
                    values[-1] += right
                elif op == "*":
                    values[-1] *= right
                elif op == "-":
                    values[-1] -= right
                else:
                    values[-1] = binary(op, node.offset, values[-1], right)
            elif type(node) is Constant:
                push(+CONSTANTS[node.name])  # unary plus rounds it to the context
            elif type(node) is Unary:
                values[-1] = -values[-1] if node.op == "-" else +values[-1]
            else:
                assert type(node) is Call
                count = len(node.args)
                args = values[-count:]
                del values[-count:]
                try:
                    push(FUNCTIONS[node.function].apply(args))
                except OutsideDomain as outside:
                    raise CalculationError(
                        Reason.DOMAIN, offset=node.offset, function=node.function,
                        argument=outside.argument,
                    ) from None
    except (Overflow, Underflow) as signal:
        raise CalculationError(
            Reason.RESULT_OUT_OF_RANGE, offset=node.offset, operation=_label(node),
            signal=type(signal).__name__,
        ) from None
    except DivisionByZero:
        # Zero divisors are refused explicitly below; this is the context's backstop.
        raise CalculationError(
            Reason.DIVISION_BY_ZERO, offset=node.offset, operation=_label(node)
        ) from None
    except InvalidOperation:
        # Every invalid operation has an explicit domain check; this is the context's backstop.
        raise CalculationError(Reason.DOMAIN, offset=node.offset, operation=_label(node)) from None
    (value,) = values
    return value


def _label(node: Node) -> str:
    if type(node) is Binary or type(node) is Unary:
        return node.op
    if type(node) is Call:
        return node.function
    return "number" if type(node) is Number else "constant"


def binary(op: str, offset: int, a: Decimal, b: Decimal) -> Decimal:
    """``a op b`` for the operators other than + - * (which the walk applies inline), in the
    current context; ``offset`` is the operator's, for a refusal's detail."""
    if op == POWER:
        return _power(offset, a, b)
    if b.is_zero():
        raise CalculationError(Reason.DIVISION_BY_ZERO, offset=offset, operation=op)
    if op == "/":
        return a / b
    quotient, remainder = floor_divmod(a, b)
    # Unary plus rounds the exact wide-context result into the evaluation context, which is
    # where Inexact, Overflow and Underflow are raised.
    return +quotient if op == "//" else +remainder


def floor_divmod(a: Decimal, b: Decimal) -> tuple[Decimal, Decimal]:
    """``(floor(a / b), a - b * floor(a / b))``, both exact. ``b`` must not be zero.

    Not Decimal's ``//`` and ``%``: those truncate toward zero (Decimal(-7) // 2 is -3 and
    Decimal(-7) % 2 is -1), while the caller is a model whose prior is Python's flooring form
    (-7 // 2 is -4, -7 % 2 is 1), and that mismatch is silently wrong rather than loudly. So
    the truncated quotient is computed exactly and then moved down one when the remainder's
    sign differs from the divisor's: the remainder's sign follows the divisor, as in Python.

    The work happens in a context wide enough to hold the integer quotient and the adjusted
    remainder exactly (about twenty thousand digits at the extremes of the exponent range),
    because rounding a / b to fifty digits first can round 2.99... up to 3 and floor the
    wrong integer. The caller rounds the result into the evaluation context.
    """
    a_exponent = a.as_tuple().exponent
    b_exponent = b.as_tuple().exponent
    assert isinstance(a_exponent, int)  # finite operands: the exponent is an int
    assert isinstance(b_exponent, int)
    width = max(a.adjusted(), b.adjusted()) - min(a_exponent, b_exponent) + 3
    wide = Context(
        prec=max(width, PRECISION), rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN,
        traps=_TRAPS,
    )
    quotient = wide.divide_int(a, b)  # truncated toward zero, exact at this width
    remainder = wide.subtract(a, wide.multiply(b, quotient))
    if not remainder.is_zero() and remainder.is_signed() != b.is_signed():
        quotient = wide.subtract(quotient, _ONE)
        remainder = wide.add(remainder, b)
    return quotient, remainder


def _power(offset: int, base: Decimal, exponent: Decimal) -> Decimal:
    if base.is_zero():
        if exponent < 0:
            raise CalculationError(Reason.DIVISION_BY_ZERO, offset=offset, operation=POWER)
        # 0^0 is 1, as Python's int and float have it; Decimal would signal InvalidOperation.
        return _ONE if exponent.is_zero() else _ZERO
    if base < 0 and exponent != exponent.to_integral_value():
        # A negative base to a non-integral power is not a real number.
        raise CalculationError(Reason.DOMAIN, offset=offset, operation=POWER, argument=1)
    return base**exponent
