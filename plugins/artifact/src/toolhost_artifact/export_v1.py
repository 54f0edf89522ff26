"""artifact.export 1.0.0: a workspace file, exported to the owner as an artifact.

Classification exactly as the specification's table: WORKSPACE_READ, LOW, IDEMPOTENT,
INTERNAL_TOOL, ``artifact.write``, 30 s, 4096 bytes, not parallel, in_process. IDEMPOTENT is
made true by the run-bound writer: the same file exported twice in a run is one artifact.

The result's trust is the artifact's: a file this run's tools did not write has a name an
outsider chose, and the result shows that name to the model, so it is not platform text (as
workspace.list_files lowers a listing of such names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import (
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    ToolExecutionContext,
    ToolOutput,
    ToolSpec,
    Trust,
)
from toolhost_artifact.export_file import export_file
from toolhost_artifact.result import OUTPUT_SCHEMA, exported_line, structured

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "SPEC", "export"]

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # The workspace tools' bound: the handle refuses a longer path anyway.
        "path": {"type": "string", "maxLength": 4096},
    },
    "required": ["path"],
    "additionalProperties": False,
}

# The lifetime sentence is why this tool exists: nothing in the workspace outlives a pause.
DESCRIPTION = (
    "Export a file from this run's workspace to the owner: its bytes (any file, binary "
    "included, at most 64 MiB) are saved as an artifact named after the file. path is relative "
    "to the workspace root (no leading /, no . or .. components, no symlinks). The media type "
    "comes from the file name's extension. Returns the artifact reference: id, name, "
    "media_type, byte_count and checksum (sha256: followed by the lowercase hex SHA-256 of the "
    "bytes). Exporting the same unchanged file again returns the same reference. The workspace "
    "is a cache, discarded when the run finishes or pauses (for example to wait for an "
    "approval), and this tool is the only way a file reaches the owner: export it before then."
)

SPEC = ToolSpec(
    name="artifact.export",
    version="1.0.0",
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.WORKSPACE_READ,
    risk=Risk.LOW,
    idempotency=Idempotency.IDEMPOTENT,
    # Declared INTERNAL_TOOL and lowered per call for a file this run's tools did not write.
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("artifact.write",),
    timeout_s=30,
    maximum_output_bytes=4096,
    allow_parallel=False,
    deprecated=False,
)


def export(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: export the file, return its ref at the artifact's trust."""
    exported = export_file(arguments["path"], context)
    return ToolOutput(
        structured=structured(exported.ref),
        content=exported_line(exported.ref),
        output_trust=exported.trust,
    )
