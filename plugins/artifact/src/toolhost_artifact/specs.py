"""artifact.export 1.0.0 and 2.0.0's registration: their specs, without their bodies.

The plugin imports only this and ``messages`` at load (``toolhost check`` reads specs, reasons
and domains); each version's body is imported at its first call, and re-exports its names from
here (``export_v1.SPEC`` is ``V1_SPEC``). 1.0.0 is a typed tool (``toolhost.tool``); 2.0.0 keeps
a hand-written spec because its ``content`` and ``name`` are optional with no default, which no
typed parameter declares (one with a default states it in the schema, one without is required).
tests/test_first_party_catalog.py pins both byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from toolhost import (
    ArtifactRef,
    Idempotency,
    MaxLen,
    Risk,
    SideEffect,
    ToolExecutionContext,
    ToolOutput,
    ToolSpec,
    Trust,
    tool,
)
from toolhost_artifact import names
from toolhost_artifact.messages import V1_REASONS

__all__ = [
    "CONTENT_LIMIT",
    "EXPORT_V1",
    "OUTPUT_SCHEMA",
    "V1_DESCRIPTION",
    "V1_INPUT_SCHEMA",
    "V1_SPEC",
    "V2_DESCRIPTION",
    "V2_INPUT_SCHEMA",
    "V2_SPEC",
]

#: The ref, as every tool that returns one states it.
OUTPUT_SCHEMA: dict[str, Any] = ArtifactRef.json_schema()

# The lifetime sentence is why this tool exists: nothing in the workspace outlives a pause.
# Declared INTERNAL_TOOL and lowered per call for a file this run's tools did not write; not
# parallel, as allow_parallel follows READ_ONLY.
@tool("artifact.export", "1.0.0", side_effect=SideEffect.WORKSPACE_READ, risk=Risk.LOW,
      idempotency=Idempotency.IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
      required_scopes=("artifact.write",), timeout_s=30, maximum_output_bytes=4096,
      reasons=V1_REASONS, output_schema=OUTPUT_SCHEMA)
def EXPORT_V1(  # noqa: N802 - the decorator makes a Tool, named as a constant
    context: ToolExecutionContext,
    # The workspace tools' bound: the handle refuses a longer path anyway.
    path: Annotated[str, MaxLen(4096)],
) -> ToolOutput:
    """Export a file from this run's workspace to the owner: its bytes (any file, binary
    included, at most 64 MiB) are saved as an artifact named after the file. path is relative
    to the workspace root (no leading /, no . or .. components, no symlinks). The media type
    comes from the file name's extension. Returns the artifact reference: id, name,
    media_type, byte_count and checksum (sha256: followed by the lowercase hex SHA-256 of the
    bytes). Exporting the same unchanged file again returns the same reference. The workspace
    is a cache, discarded when the run finishes or pauses (a call left waiting for an
    operator's approval), and this tool is the only way a file reaches the owner: export it
    before then.
    """
    from toolhost_artifact.export_v1 import export  # the body, at the first call

    return export(context, path)


V1_SPEC = EXPORT_V1.spec
V1_INPUT_SCHEMA: Mapping[str, Any] = V1_SPEC.input_schema
V1_DESCRIPTION = V1_SPEC.description


#: 1 MiB: the most UTF-8 bytes ``content`` may encode to (and the schema's maxLength, in
#: characters, which is never fewer than the bytes).
CONTENT_LIMIT = 1048576

V2_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string", "maxLength": 4096, "default": "",
            "description": "A file in the workspace to export. Leave it empty when giving "
            "content.",
        },
        "content": {
            "type": "string", "maxLength": CONTENT_LIMIT,
            "description": "Text to save as a UTF-8 file instead of exporting a workspace "
            "file: at most 1 MiB (1048576 bytes of UTF-8).",
        },
        "name": {
            "type": "string", "minLength": 1, "maxLength": names.MAX_NAME_BYTES,
            "pattern": names.PATTERN,
            "description": "The file name content is saved under (default export.txt): a bare "
            "file name with a text extension. Only with content.",
        },
    },
    "required": [],
    "additionalProperties": False,
}

# What the reply carries follows toolhost.MAX_ATTACHED_BYTES (D364): a client fetches 32 MiB.
V2_DESCRIPTION = (
    "Export a file to the owner: it is attached to your reply when it is at most 32 MiB; a "
    "larger one is stored, and the result says how the person can get it. Give exactly one "
    "of path and content. path is a file in this run's workspace, relative to its root (no "
    "leading /, no . or .. components, no symlinks): any file, binary included, at most 64 "
    "MiB, saved under its own name. content is text you wrote, at most 1 MiB of UTF-8, saved "
    "as a UTF-8 text file under name (default export.txt): a bare file name, no / or \\, not "
    "starting with a dot, with a text extension such as .txt, .md, .csv, .json or .html; "
    "name is not allowed with path. The media type comes from the name's extension. Returns "
    "the artifact reference: id, name, media_type, byte_count and checksum (sha256: followed "
    "by the lowercase hex SHA-256 of the bytes). Exporting the same file or text again "
    "returns the same reference. The workspace is a cache, discarded when the run finishes "
    "or pauses (a call left waiting for an operator's approval), and this tool is the only "
    "way a file reaches the owner: export it before then."
)

V2_SPEC = ToolSpec.builtin(
    name="artifact.export",
    version="2.0.0",
    description=V2_DESCRIPTION,
    input_schema=V2_INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    side_effect=SideEffect.WORKSPACE_READ,
    risk=Risk.LOW,
    idempotency=Idempotency.IDEMPOTENT,
    # Lowered per call for a path export of a file this run's tools did not write.
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("artifact.write",),
    timeout_s=30,
    maximum_output_bytes=4096,
)
