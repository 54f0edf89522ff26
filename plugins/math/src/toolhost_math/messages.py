"""The model-facing message for each reason code, exactly as the specification prints them.

Messages are static: they carry the remedy (unknown_name lists the whole supported set) and
never the input, because the message table is one table for every tool, including the ones
whose failure text is attacker-controlled. Where a syntax error was lives in ``detail``.
The codes are ``errors.Reason``'s, the vocabulary the tokenizer, parser and evaluator raise.
"""

from __future__ import annotations

from toolhost import Reason, SchemaRule
from toolhost_math.errors import Reason as Code

__all__ = ["MESSAGES", "REASONS", "REASON_CODES"]

#: ``{reason_code: message}``, in the spec's order.
MESSAGES: dict[str, str] = {
    Code.SYNTAX.reason_code: "The expression could not be parsed.",
    # One line: the spec's two-line rendering is a print wrap, not a newline in the message.
    Code.UNKNOWN_NAME.reason_code: (
        "Unknown function or constant. Functions: abs, ceil, exp, floor, ln, log10, max, min, "
        "round, sqrt. Constants: pi, e."
    ),
    Code.ARITY.reason_code: "Wrong number of arguments for that function.",
    Code.DOMAIN.reason_code: "An argument is outside the function's domain.",
    Code.DIVISION_BY_ZERO.reason_code: "Division by zero.",
    Code.RESULT_OUT_OF_RANGE.reason_code: "The result is too large or too small to represent.",
    Code.EXPRESSION_TOO_LONG.reason_code: "The expression is longer than 1024 characters.",
    Code.EXPRESSION_TOO_DEEP.reason_code: "The expression is nested more than 32 levels deep.",
}

#: Every reason code, in the spec's order.
REASON_CODES: tuple[str, ...] = tuple(MESSAGES)

#: Every reason math.calculate may end with, each with its message. The bounds table's first
#: row: the expression-length bound is enforced at step 4 (maxLength in the input schema)
#: *and* by the tokenizer, and both answer expression_too_long.
REASONS: tuple[Reason, ...] = Reason.from_table(
    MESSAGES, *REASON_CODES,
    schema_rules={Code.EXPRESSION_TOO_LONG.reason_code: [SchemaRule("/expression", "maxLength")]},
)
