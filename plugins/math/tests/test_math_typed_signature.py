"""math.calculate keeps its hand-written spec: its body is the pipeline benchmark's hot path
(``tool.calculate_tool``, async, one dict in and one ToolOutput out), and a typed body would
add the decorator's per-call structuring and unstructuring to it. The seed's schemas are
nevertheless exactly what ``toolhost.tool`` derives from the typed signature below, so
converting it later changes no byte of the spec: this test holds both to each other.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from toolhost import Doc, Idempotency, MaxLen, MinLen, Risk, SideEffect, Tool, Trust, tool
from toolhost_math.messages import REASONS
from toolhost_math.specs import DESCRIPTION, SPEC


@attrs.frozen
class Result:
    result: str
    result_exact: bool
    expression: str


def calculate(
    expression: Annotated[str, MinLen(1), MaxLen(1024),
                          Doc("A mathematical expression, e.g. 17 * 23")],
) -> Result:
    """Unused: the signature is what is compared."""
    raise NotImplementedError


def test_the_typed_signature_derives_the_pinned_spec_exactly() -> None:
    derived: Tool = tool(
        "math.calculate", "1.0.0", side_effect=SideEffect.NONE, risk=Risk.LOW,
        idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL, required_scopes=(),
        timeout_s=2, maximum_output_bytes=4096, reasons=REASONS, description=DESCRIPTION,
    )(calculate)
    assert derived.spec == SPEC
