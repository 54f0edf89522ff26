"""The function and constant tables: the only names an expression may use.

Every function is trivial or a method ``decimal.Decimal`` already provides at context
precision (sqrt, ln, log10 and exp are correctly rounded and respect the context), which is
why the set stops where it does. There is no trigonometry: degrees against radians cannot be
signalled in a result. The implementations run inside the evaluator's local context.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

import attrs

__all__ = ["CONSTANTS", "FUNCTIONS", "Function", "OutsideDomain"]

#: Bound on round(x, n)'s n, inclusive at both ends.
ROUND_PLACES = 50
#: Compared against instead of the int 0, which Decimal converts on every comparison.
_ZERO = Decimal(0)


class OutsideDomain(Exception):
    """An argument is outside the function's domain; ``argument`` is its 1-based position."""

    def __init__(self, argument: int) -> None:
        super().__init__(argument)
        self.argument = argument


@attrs.frozen
class Function:
    """A function's arity (``max_args`` None means any number from ``min_args`` up)."""

    name: str
    min_args: int
    max_args: int | None
    apply: Callable[[Sequence[Decimal]], Decimal]

    def accepts(self, count: int) -> bool:
        return count >= self.min_args and (self.max_args is None or count <= self.max_args)

    @property
    def arity(self) -> str:
        if self.max_args is None:
            return f"{self.min_args} or more"
        if self.max_args == self.min_args:
            return str(self.min_args)
        return f"{self.min_args} or {self.max_args}"


def _round(args: Sequence[Decimal]) -> Decimal:
    # ROUND_HALF_EVEN, so round(2.5) is 2: the IEEE 754 default, stated in the description.
    x = args[0]
    if len(args) == 1:
        return x.to_integral_value(rounding=ROUND_HALF_EVEN)
    places = args[1]
    if places != places.to_integral_value() or not -ROUND_PLACES <= places <= ROUND_PLACES:
        raise OutsideDomain(2)
    n = int(places)
    if x.as_tuple().exponent >= -n:  # type: ignore[operator]  # finite: int exponent
        return x  # no digit below 10**-n to drop (and scaling could overflow)
    # Scale, round to an integer, scale back: unlike quantize, to_integral_value does not
    # signal Inexact, so round() no more makes a result inexact than floor() does. The first
    # two steps run with an unbounded exponent range: scaling 1e-10000 by 10**-50 goes below
    # Etiny, and in the evaluation context that would trip the Underflow trap, which is for
    # results; this is a step inside the rounding, and its value rounds to 0. The result
    # (the scale back) is in the evaluation context: a multiple of 10**-n, so 0 or at least
    # 10**-50, which can neither underflow nor overflow.
    steps = decimal.getcontext().copy()
    steps.Emin, steps.Emax = MIN_EMIN, MAX_EMAX
    scaled = x.scaleb(n, context=steps)
    return scaled.to_integral_value(rounding=ROUND_HALF_EVEN, context=steps).scaleb(-n)


def _positive(method: Callable[[Decimal], Decimal]) -> Callable[[Sequence[Decimal]], Decimal]:
    def apply(args: Sequence[Decimal]) -> Decimal:
        if args[0] <= _ZERO:
            raise OutsideDomain(1)
        return method(args[0])

    return apply


def _sqrt(args: Sequence[Decimal]) -> Decimal:
    if args[0] < _ZERO:
        raise OutsideDomain(1)
    return args[0].sqrt()


def _functions(*functions: Function) -> dict[str, Function]:
    return {f.name: f for f in functions}


FUNCTIONS: dict[str, Function] = _functions(
    Function("abs", 1, 1, lambda a: abs(a[0])),
    Function("ceil", 1, 1, lambda a: a[0].to_integral_value(rounding=ROUND_CEILING)),
    Function("floor", 1, 1, lambda a: a[0].to_integral_value(rounding=ROUND_FLOOR)),
    Function("round", 1, 2, _round),
    Function("sqrt", 1, 1, _sqrt),
    Function("ln", 1, 1, _positive(Decimal.ln)),
    Function("log10", 1, 1, _positive(Decimal.log10)),
    # exp's domain is "result within the magnitude bound": the context's Overflow and
    # Underflow traps enforce it, so exp needs no check of its own.
    Function("exp", 1, 1, lambda a: a[0].exp()),
    Function("min", 1, None, min),
    Function("max", 1, None, max),
)

#: Sixty significant digits, ten more than the context, so the fiftieth digit is right after
#: rounding rather than by luck. Exact here; the evaluator rounds them on use (unary plus).
CONSTANTS: dict[str, Decimal] = {
    "pi": Decimal("3.14159265358979323846264338327950288419716939937510582097494"),
    "e": Decimal("2.71828182845904523536028747135266249775724709369995957496696"),
}
