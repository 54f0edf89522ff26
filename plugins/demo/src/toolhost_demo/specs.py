"""demo.external_write's registration: the typed tool, without its body.

The plugin imports only this at load (``toolhost check`` reads specs and domains); the body,
with the digest it computes, is imported at the tool's first call. The schemas are derived
from the signature and ``Record`` (``toolhost.tool``) and are the seed's exactly:
tests/test_first_party_catalog.py holds them byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import attrs

from toolhost import Idempotency, MaxLen, Risk, SideEffect, Trust, tool

__all__ = ["DESCRIPTION", "EXTERNAL_WRITE", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "Record"]


@attrs.frozen
class Record:
    """The result. No timestamp: the invocation row carries the timing. No content: the row's
    arguments hold it, and the model already has it."""

    #: A constant, not a status: there is no second value, and no failure branch.
    recorded: Literal[True]
    destination: str
    byte_count: int
    checksum: str

    def __str__(self) -> str:
        noun = "byte" if self.byte_count == 1 else "bytes"
        return (f"Recorded {self.byte_count} {noun} for "
                f"{json.dumps(self.destination, ensure_ascii=False)} ({self.checksum}). "
                "Nothing was sent: this demo tool only records.")


@tool("demo.external_write", "1.0.0", side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.HIGH,
      idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
      required_scopes=("demo.write",), timeout_s=10, maximum_output_bytes=4096, reasons=(),
      always_requires_approval=True)  # the spec's "always requires approval" (D430)
def EXTERNAL_WRITE(  # noqa: N802 - the decorator makes a Tool, named as a constant
    destination: Annotated[str, MaxLen(256)], content: Annotated[str, MaxLen(4096)],
) -> Record:
    """Demonstrates an external write: every call needs an operator's approval before it
    runs. It records what would have been written and sends nothing anywhere. destination
    (at most 256 characters) is recorded exactly as given and is never parsed or contacted;
    content is at most 4096 characters. Returns recorded (always true), destination,
    byte_count (of content in UTF-8) and checksum (sha256: followed by the lowercase hex
    SHA-256 of content in UTF-8).
    """
    from toolhost_demo.external_write import external_write  # the body, at the first call

    return external_write(destination, content)


SPEC = EXTERNAL_WRITE.spec
DESCRIPTION = SPEC.description
INPUT_SCHEMA: Mapping[str, Any] = SPEC.input_schema
OUTPUT_SCHEMA: Mapping[str, Any] = SPEC.output_schema
