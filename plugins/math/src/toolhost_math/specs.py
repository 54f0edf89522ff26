"""math.calculate's ToolSpec and both schemas: all that registration needs.

Kept apart from the body (tool.py) so that loading the plugin, which ``toolhost check`` does
for every plugin, imports neither the evaluator nor ``decimal``: the host builds the body at
the tool's first call (``plugin`` names it by reference). Every classification value is the
classification table's; both schemas are the spec's, exactly.
"""

from __future__ import annotations

from typing import Any

from toolhost import (
    Idempotency,
    Risk,
    SideEffect,
    ToolSpec,
    Trust,
)

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "NAME", "OUTPUT_SCHEMA", "SPEC", "VERSION"]

NAME = "math.calculate"
VERSION = "1.0.0"

DESCRIPTION = (
    "Evaluate an arithmetic expression in decimal arithmetic, e.g. 17 * 23. "
    "Numbers are decimal.Decimal at 50 significant digits (0.1 + 0.2 is exactly 0.3), "
    "rounded ROUND_HALF_EVEN, so round(2.5) is 2, not 3. "
    "Operators: + - * /; // and % floor like Python (-7 // 2 is -4, -7 % 2 is 1); "
    "^ and ** are the same exponentiation operator, right-associative "
    "(2^3^2 is 512, -2^2 is -4). "
    "Functions: abs, ceil, exp, floor, ln, log10, max, min, round(x), round(x, n), sqrt. "
    "Constants: pi, e. No variables, comparisons or trigonometry. "
    "At most 1024 characters, 512 tokens and 32 levels of nesting. "
    "A result too large or too small to represent (about 1e10000 and 1e-10000) is refused, "
    "never rounded to infinity or zero. "
    "Returns the result as a string, and says when it was rounded."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "expression": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1024,
            "description": "A mathematical expression, e.g. 17 * 23",
        }
    },
    "required": ["expression"],
    "additionalProperties": False,
}

# result is a string: a fifty-digit Decimal sent as a JSON number reaches the model as a
# double, rounded to seventeen digits by the transport.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {"type": "string"},
        "result_exact": {"type": "boolean"},
        "expression": {"type": "string"},
    },
    "required": ["result", "result_exact", "expression"],
    "additionalProperties": False,
}

SPEC = ToolSpec.builtin(
    name=NAME,
    version=VERSION,
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    side_effect=SideEffect.NONE,
    risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY,
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(),  # a scope that gates arithmetic would be granted to everyone
    timeout_s=2,
    maximum_output_bytes=4096,
)
