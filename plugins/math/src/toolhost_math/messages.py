"""The model-facing message for each reason code, exactly as the specification prints them.

Messages are static: they carry the remedy (unknown_name lists the whole supported set) and
never the input, because the message table is one table for every tool, including the ones
whose failure text is attacker-controlled. Where a syntax error was lives in ``detail``.
"""

from __future__ import annotations

from toolhost import Reason, SchemaRule
from toolhost_math.errors import Reason as Code

__all__ = ["MESSAGES", "REASONS", "REASON_CODES"]

_TEXT: dict[Code, str] = {
    Code.SYNTAX: "The expression could not be parsed.",
    # One line: the spec's two-line rendering is a print wrap, not a newline in the message.
    Code.UNKNOWN_NAME: (
        "Unknown function or constant. Functions: abs, ceil, exp, floor, ln, log10, max, min, "
        "round, sqrt. Constants: pi, e."
    ),
    Code.ARITY: "Wrong number of arguments for that function.",
    Code.DOMAIN: "An argument is outside the function's domain.",
    Code.DIVISION_BY_ZERO: "Division by zero.",
    Code.RESULT_OUT_OF_RANGE: "The result is too large or too small to represent.",
    Code.EXPRESSION_TOO_LONG: "The expression is longer than 1024 characters.",
    Code.EXPRESSION_TOO_DEEP: "The expression is nested more than 32 levels deep.",
}

#: The bounds table's first row: the expression-length bound is enforced at step 4 (maxLength
#: in the input schema) *and* by the tokenizer, and both answer expression_too_long.
_SCHEMA_RULES = {Code.EXPRESSION_TOO_LONG: (SchemaRule("/expression", "maxLength"),)}

#: Every reason math.calculate may end with, in the spec's order, each with its message.
REASONS: tuple[Reason, ...] = tuple(
    Reason(code.reason_code, _TEXT[code], schema_rules=_SCHEMA_RULES.get(code, ()))
    for code in Code
)

#: Every reason code, in the spec's order.
REASON_CODES: tuple[str, ...] = tuple(reason.code for reason in REASONS)

#: ``{reason_code: message}``.
MESSAGES: dict[str, str] = {reason.code: reason.message for reason in REASONS}
