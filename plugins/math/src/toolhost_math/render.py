"""Rendering: the one string form of a result, which is what the model reads and tests assert.

1. Adjusted exponent in -25..25: positional notation (``format(value, "f")``), then a trailing
   run of zeros after a decimal point is stripped, and the point if nothing follows it.
   17 * 23 is ``391``, not ``3.91e+2``; 1/4 is ``0.25``.
2. Otherwise scientific notation in to_sci_string's form under ``capitals=0``: one digit,
   the rest after a point, and an explicit exponent (``1e+26``, ``1.5e-30``). Outside the band
   positional notation is a page of zeros and the exponent is the information.

The rendering is a function of the value alone, never of how the Decimal happens to carry it:
every zero is ``0`` (no ``-0``, no ``0e+30``), and the second branch drops the coefficient's
trailing zeros as the first branch does, so 10e25 and 1e26 both read ``1e+26``.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["BAND", "render"]

#: Adjusted exponents rendered positionally, inclusive at both ends.
BAND = 25


def render(value: Decimal) -> str:
    """The string for a finite Decimal."""
    if value.is_zero():
        return "0"  # a sign on zero, or an exponent, is representation, not value
    adjusted = value.adjusted()
    if -BAND <= adjusted <= BAND:
        text = format(value, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text
    return _scientific(value, adjusted)


def _scientific(value: Decimal, adjusted: int) -> str:
    # Written out rather than to_sci_string(), which falls back to positional form whenever
    # the exponent is not positive (2**100 is 31 integer digits, adjusted exponent 30, and
    # to_sci_string gives all 31 without an exponent). This is its exponent form, always.
    sign, digits, _ = value.as_tuple()
    coefficient = "".join(map(str, digits)).rstrip("0")
    mantissa = coefficient[0] + ("." + coefficient[1:] if len(coefficient) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{adjusted:+d}"
