"""math.calculate: the ToolSpec, the pure calculation, and the callable the host runs.

Every classification value is the classification table's; both schemas are the spec's,
exactly. ``calculate`` is the tool body without the host types; ``calculate_tool`` is the
body the host runs (``Tool(SPEC, call=calculate_tool)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from toolhost import (
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
)
from toolhost_math.errors import CalculationError
from toolhost_math.evaluator import PRECISION, evaluate
from toolhost_math.parser import parse_in_order
from toolhost_math.render import render
from toolhost_math.tokenizer import tokenize

__all__ = [
    "DESCRIPTION",
    "INEXACT_NOTE",
    "INPUT_SCHEMA",
    "NAME",
    "OUTPUT_SCHEMA",
    "SPEC",
    "VERSION",
    "Calculation",
    "calculate",
    "calculate_tool",
]

NAME = "math.calculate"
VERSION = "1.0.0"

#: The second line of ``content`` when, and only when, the result is not exact.
INEXACT_NOTE = f"rounded to {PRECISION} significant digits"

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

SPEC = ToolSpec(
    name=NAME,
    version=VERSION,
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.NONE,
    risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY,
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(),  # a scope that gates arithmetic would be granted to everyone
    timeout_s=2,
    maximum_output_bytes=4096,
    allow_parallel=True,
    deprecated=False,
)


class Calculation(NamedTuple):
    """A rendered result and whether it is exact."""

    result: str
    exact: bool

    @property
    def content(self) -> str:
        """What the model reads: the rendering, plus one line when it was rounded."""
        return self.result if self.exact else f"{self.result}\n{INEXACT_NOTE}"


def calculate(expression: str) -> Calculation:
    """Tokenize, parse, evaluate and render ``expression``.

    :raises CalculationError: with one of the eight reasons.
    """
    value, exact = evaluate(parse_in_order(tokenize(expression)))
    return Calculation(render(value), exact)


async def calculate_tool(arguments: Mapping[str, Any], context: ToolExecutionContext) -> (
    ToolOutput
):
    """The callable the host runs. Async on purpose, with nothing to await: the body is pure
    CPU work that the spec's bounds (1024 characters, 512 tokens, depth 32, the decimal
    context's magnitude traps) hold to well under a millisecond, so it runs on the event loop
    instead of paying a worker-thread hop (about 100 µs) per call.

    ``calculate`` inlined, without its Calculation: this is the hot path, and a call and a
    tuple are a tenth of the work for ``17 * 23``."""
    # Step 4 guarantees a string of 1 to 1024 characters; the tokenizer still bounds the
    # length itself (the spec's "appears twice on purpose"), for callers outside the pipeline.
    expression: str = arguments["expression"]
    try:
        value, exact = evaluate(parse_in_order(tokenize(expression)))
    except CalculationError as error:
        # Not retryable, exactly: a pure function fails the identical call identically.
        raise ToolFailure(error.reason_code, detail=error.detail, retryable=False) from None
    result = render(value)
    return ToolOutput(
        structured={
            "result": result,
            "result_exact": exact,
            "expression": expression,  # verbatim, not canonicalized
        },
        content=result if exact else f"{result}\n{INEXACT_NOTE}",
    )
