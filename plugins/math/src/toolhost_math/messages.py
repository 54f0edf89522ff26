"""The model-facing message for each reason code, exactly as the specification prints them.

Messages are static: they carry the remedy (unknown_name lists the whole supported set) and
never the input, because the message table is one table for every tool, including the ones
whose failure text is attacker-controlled. Where a syntax error was lives in ``detail``.
"""

from __future__ import annotations

from toolhost_math.errors import Reason

__all__ = ["MESSAGES", "REASON_CODES"]

_TEXT: dict[Reason, str] = {
    Reason.SYNTAX: "The expression could not be parsed.",
    # One line: the spec's two-line rendering is a print wrap, not a newline in the message.
    Reason.UNKNOWN_NAME: (
        "Unknown function or constant. Functions: abs, ceil, exp, floor, ln, log10, max, min, "
        "round, sqrt. Constants: pi, e."
    ),
    Reason.ARITY: "Wrong number of arguments for that function.",
    Reason.DOMAIN: "An argument is outside the function's domain.",
    Reason.DIVISION_BY_ZERO: "Division by zero.",
    Reason.RESULT_OUT_OF_RANGE: "The result is too large or too small to represent.",
    Reason.EXPRESSION_TOO_LONG: "The expression is longer than 1024 characters.",
    Reason.EXPRESSION_TOO_DEEP: "The expression is nested more than 32 levels deep.",
}

#: Every reason code math.calculate may raise, in the spec's order.
REASON_CODES: tuple[str, ...] = tuple(reason.reason_code for reason in Reason)

#: ``{reason_code: message}``: what ``toolhost_messages`` returns.
MESSAGES: dict[str, str] = {reason.reason_code: _TEXT[reason] for reason in Reason}
