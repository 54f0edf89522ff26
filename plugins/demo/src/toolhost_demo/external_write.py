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

from toolhost import sha256_checksum
from toolhost_demo.specs import DESCRIPTION, INPUT_SCHEMA, OUTPUT_SCHEMA, SPEC, Record

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "external_write"]


def external_write(destination: str, content: str) -> Record:
    """The tool body: hash the content and return the record. Nothing else happens."""
    data = content.encode("utf-8")
    return Record(recorded=True, destination=destination, byte_count=len(data),
                  checksum=sha256_checksum(data))
