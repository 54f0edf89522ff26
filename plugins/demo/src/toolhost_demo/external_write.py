"""demo.external_write: records what would have been written somewhere, and sends nothing.

It exists to be paused, approved and denied. EXTERNAL_WRITE puts it in the one row of the policy
matrix that requires approval at every risk, so under the default policy every call pauses.

The destination is a string recorded verbatim: never resolved, parsed, connected to or checked,
because a URL parser reachable by a model that was just told this operation needs approval is a
strange thing to build for a fixture. The record is the structured result, which pipeline
step 13 persists on the call's tool_invocations row beside its arguments (where the content
is); there is no side table, and the body writes nothing anywhere.

The body has no failures: it reaches no network, filesystem, clock or parser. What can stop a
call is upstream of it (schema validation at step 4, policy at steps 5-7), and a denial is a
PolicyDecision, not a ToolResult.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolhost import ToolExecutionContext, ToolOutput, sha256_checksum
from toolhost_demo.specs import DESCRIPTION, INPUT_SCHEMA, OUTPUT_SCHEMA, SPEC

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "external_write"]


def external_write(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: hash the content and return the record. Nothing else happens."""
    del context  # it touches nothing the context could give it
    destination = arguments["destination"]
    data = arguments["content"].encode("utf-8")
    checksum = sha256_checksum(data)
    noun = "byte" if len(data) == 1 else "bytes"
    return ToolOutput(
        # No timestamp: the invocation row carries the timing. No content: the row's
        # arguments hold it, and the model already has it.
        structured={
            "recorded": True,
            "destination": destination,
            "byte_count": len(data),
            "checksum": checksum,
        },
        content=(f"Recorded {len(data)} {noun} for {json.dumps(destination, ensure_ascii=False)}"
                 f" ({checksum}). Nothing was sent: this demo tool only records."),
    )

