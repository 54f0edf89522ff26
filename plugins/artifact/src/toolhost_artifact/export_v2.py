"""artifact.export 2.0.0 (ADR-0122): a workspace file, or text the model wrote, exported to the
owner and attached to the reply.

Exactly one of ``path`` (default ``""``) and ``content`` is given; ``name`` names content only.
The input schema does not carry that rule. A given path is a non-empty one (``"path": ""`` is
the default, written out), so ``required`` cannot express it; branches on ``minLength`` would
each have to restate the closed object (registration wants ``additionalProperties: false`` at
every object level); and a top-level ``oneOf`` fails every call that breaks it with one schema
rule at the root, so the model could not be told whether it gave both, neither, or a name with
a path (some model providers also refuse top-level combinators). The descriptions state it, and
the body enforces it with a static failure for each case. ``name`` has no schema default: step
4 would fill it in, and every call would look as if it named its content.

Content is saved as UTF-8 text, at most 1 MiB of it: the schema bounds the characters
(``maxLength`` 1048576, mapped to ``content_too_long``), the body the encoded bytes, with the
same code. Its artifact is INTERNAL_TOOL (the model wrote it), its name follows the 2.0.0 file
name rule (``names``), and its media type is the table's for the name, which must be a text
type, with ``; charset=utf-8``. A path export is 1.0.0's, with 2.0.0's result text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import (
    ArtifactOrigin,
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
    media_type_for,
)
from toolhost_artifact import names
from toolhost_artifact.export_file import export_file
from toolhost_artifact.messages import (
    BOTH_PATH_AND_CONTENT,
    CONTENT_TOO_LONG,
    INVALID_NAME,
    NAME_NOT_TEXT,
    NAME_WITH_PATH,
    NO_PATH_OR_CONTENT,
)
from toolhost_artifact.result import OUTPUT_SCHEMA, attached_line, structured

__all__ = ["CONTENT_LIMIT", "DEFAULT_NAME", "DESCRIPTION", "INPUT_SCHEMA", "SPEC", "export"]

#: 1 MiB: the most UTF-8 bytes ``content`` may encode to (and the schema's maxLength, in
#: characters, which is never fewer than the bytes).
CONTENT_LIMIT = 1048576

#: The name content is saved under when the call gives none.
DEFAULT_NAME = "export.txt"

INPUT_SCHEMA: dict[str, Any] = {
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

DESCRIPTION = (
    "Export a file to the owner: it is attached to your reply. Give exactly one of path and "
    "content. path is a file in this run's workspace, relative to its root (no leading /, no . "
    "or .. components, no symlinks): any file, binary included, at most 64 MiB, saved under "
    "its own name. content is text you wrote, at most 1 MiB of UTF-8, saved as a UTF-8 text "
    "file under name (default export.txt): a bare file name, no / or \\, not starting with a "
    "dot, with a text extension such as .txt, .md, .csv, .json or .html; name is not allowed "
    "with path. The media type comes from the name's extension. Returns the artifact "
    "reference: id, name, media_type, byte_count and checksum (sha256: followed by the "
    "lowercase hex SHA-256 of the bytes). Exporting the same file or text again returns the "
    "same reference. The workspace is a cache, discarded when the run finishes or pauses (for "
    "example to wait for an approval), and this tool is the only way a file reaches the "
    "owner: export it before then."
)

SPEC = ToolSpec(
    name="artifact.export",
    version="2.0.0",
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
    # Lowered per call for a path export of a file this run's tools did not write.
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("artifact.write",),
    timeout_s=30,
    maximum_output_bytes=4096,
    allow_parallel=False,
    deprecated=False,
)


def export(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: check the arguments' shape, then export the file or save the text."""
    path = arguments["path"]  # step 4 applied the default: "" when omitted
    content = arguments.get("content")
    name = arguments.get("name")
    if path:
        if content is not None:
            raise ToolFailure(BOTH_PATH_AND_CONTENT)
        if name is not None:
            raise ToolFailure(NAME_WITH_PATH)
        exported = export_file(path, context)
        return ToolOutput(structured=structured(exported.ref), content=attached_line(exported.ref),
                          output_trust=exported.trust)
    if content is None:
        raise ToolFailure(NO_PATH_OR_CONTENT)
    # Strict UTF-8: step 4 already refused a lone surrogate, so this cannot fail.
    data = content.encode("utf-8")
    if len(data) > CONTENT_LIMIT:
        raise ToolFailure(CONTENT_TOO_LONG, detail={"byte_count": len(data)})
    name = DEFAULT_NAME if name is None else name
    problem = names.problem(name)
    if problem is not None:
        raise ToolFailure(INVALID_NAME, detail={"problem": problem})
    media_type = media_type_for(name)
    if not media_type.textual:
        raise ToolFailure(NAME_NOT_TEXT, detail={"media_type": media_type.name})
    ref = context.artifacts.write(
        origin=ArtifactOrigin.EXPORT, name=name, media_type=media_type.utf8(),
        content=data, trust=Trust.INTERNAL_TOOL,
    )
    return ToolOutput(structured=structured(ref), content=attached_line(ref),
                      output_trust=Trust.INTERNAL_TOOL)
