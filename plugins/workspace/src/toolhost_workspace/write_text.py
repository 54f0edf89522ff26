"""workspace.write_text: write a UTF-8 text file in the run's workspace, whole, and say what
was written.

The path goes to ``context.workspace`` as the caller wrote it; this module resolves nothing
and opens nothing (hard gate 10). The handle makes the write atomic, creates missing parent
directories inside the root, and records TOOL_WRITTEN provenance in the same operation, which
is what later lets workspace.read_text keep INTERNAL_TOOL trust for this file.

The content is encoded strictly as UTF-8 and nothing is normalized: no BOM, no line-ending
translation, no trailing newline the model did not write. The checksum is taken over exactly
those encoded bytes, not a re-read, so it is independent of the filesystem and equal to what
workspace.read_text reports for the same file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolhost import (
    Idempotency,
    Kind,
    Provenance,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
    WorkspaceIsDirectory,
    WorkspaceNotFound,
    sha256_checksum,
)
from toolhost_workspace.messages import NO_SUCH_PATH, NOT_A_FILE

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "write_text"]

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": 4096},
        # The reader's maximum_output_bytes, so a write and a read of one file are symmetric;
        # over-long content fails at step 4 and never reaches the tool.
        "content": {"type": "string", "maxLength": 1048576},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "byte_count": {"type": "integer"},
        "checksum": {"type": "string"},
        "created": {"type": "boolean"},
    },
    "required": ["path", "byte_count", "checksum", "created"],
    "additionalProperties": False,
}

# The lifetime sentence is the point of this description: a model that writes notes.md, waits
# for an approval and reads it back gets no_such_path, and this text is the only place that
# outcome can be prevented.
DESCRIPTION = (
    "Write a UTF-8 text file in this run's workspace, creating it or replacing it whole; "
    "missing parent directories are created. path is relative to the workspace root (no "
    "leading /, no . or .. components, no symlinks). content is written exactly as given: no "
    "BOM, no newline translation, no newline added; at most 1048576 characters. Returns path, "
    "byte_count, checksum (sha256: followed by the lowercase hex SHA-256 of the bytes written) "
    "and created (true only when the path did not exist before). The workspace is a cache: it "
    "is discarded when the run finishes or pauses (for example to wait for an approval), so a "
    "file written before a pause is gone after it. artifact.export is the only way a file "
    "reaches the owner."
)

SPEC = ToolSpec(
    name="workspace.write_text",
    version="1.0.0",
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.WORKSPACE_WRITE,
    risk=Risk.MEDIUM,
    # IDEMPOTENT, not CONDITIONALLY_: the same bytes to the same path leave the same state,
    # and the result is metadata and a checksum, not an offset that depends on a first call.
    idempotency=Idempotency.IDEMPOTENT,
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("workspace.write",),
    timeout_s=10,
    maximum_output_bytes=4096,
    # A writer is serialized: a step containing it is never a parallel batch.
    allow_parallel=False,
    deprecated=False,
)


def write_text(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: encode strictly, hand the bytes to the handle, report what was written."""
    path = arguments["path"]
    # Strict, and "utf-8" never writes a BOM. Step 4 already refused a lone surrogate (it has
    # no UTF-8 form), so this cannot fail.
    data = arguments["content"].encode("utf-8")
    workspace = context.workspace
    try:
        written = workspace.write(path, data, provenance=Provenance.TOOL_WRITTEN)
    except WorkspaceIsDirectory:
        raise ToolFailure(NOT_A_FILE) from None
    except WorkspaceNotFound:  # a parent removed while the handle was creating it
        raise ToolFailure(NO_SUCH_PATH) from None
    checksum = sha256_checksum(data)
    verb = "Created" if written.created else "Replaced"
    noun = "byte" if written.byte_count == 1 else "bytes"
    return ToolOutput(
        structured={
            "path": path,
            "byte_count": written.byte_count,
            "checksum": checksum,
            "created": written.created,
        },
        content=(f"{verb} {json.dumps(path, ensure_ascii=False)}: {written.byte_count} {noun}, "
                 f"{checksum}."),
    )

