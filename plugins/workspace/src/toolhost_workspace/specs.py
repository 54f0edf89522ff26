"""The three tools' registration: their specs, without their bodies.

The plugin imports only this and ``messages`` at load (``toolhost check`` reads specs, reasons
and domains); each body module is imported when the host first builds its tool, and re-exports
its own names from here (``read_text.SPEC`` is ``READ_TEXT_SPEC``).
"""

from __future__ import annotations

from typing import Any

from toolhost import Idempotency, Risk, SideEffect, ToolSpec, Trust

__all__ = [
    "LIST_FILES_DESCRIPTION",
    "LIST_FILES_INPUT_SCHEMA",
    "LIST_FILES_OUTPUT_SCHEMA",
    "LIST_FILES_SPEC",
    "READ_TEXT_DESCRIPTION",
    "READ_TEXT_INPUT_SCHEMA",
    "READ_TEXT_OUTPUT_SCHEMA",
    "READ_TEXT_SPEC",
    "WRITE_TEXT_DESCRIPTION",
    "WRITE_TEXT_INPUT_SCHEMA",
    "WRITE_TEXT_OUTPUT_SCHEMA",
    "WRITE_TEXT_SPEC",
]

READ_TEXT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": 4096},
    },
    "required": ["path"],
    "additionalProperties": False,
}

READ_TEXT_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "byte_count": {"type": "integer"},
        "checksum": {"type": "string"},
    },
    "required": ["path", "content", "byte_count", "checksum"],
    "additionalProperties": False,
}

READ_TEXT_DESCRIPTION = (
    "Read a UTF-8 text file from this run's workspace. path is relative to the workspace root "
    "(no leading /, no . or .. components, no symlinks). Returns the file's text exactly as "
    "stored (content), byte_count, and checksum: sha256: followed by the lowercase hex SHA-256 "
    "of the bytes read, the same form workspace.write_text returns, so the two can be "
    "compared. A file containing a NUL byte or bytes that are not valid UTF-8 is refused as "
    "not text, with no partial content. A very large file is returned as an excerpt."
)

READ_TEXT_SPEC = ToolSpec.builtin(
    name="workspace.read_text",
    version="1.0.0",
    description=READ_TEXT_DESCRIPTION,
    input_schema=READ_TEXT_INPUT_SCHEMA,
    output_schema=READ_TEXT_OUTPUT_SCHEMA,
    side_effect=SideEffect.WORKSPACE_READ,
    risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY,
    # Declared INTERNAL_TOOL and lowered per call: only a file this run's tools wrote keeps it.
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("workspace.read",),
    timeout_s=10,
    maximum_output_bytes=1048576,
)


WRITE_TEXT_INPUT_SCHEMA: dict[str, Any] = {
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

WRITE_TEXT_OUTPUT_SCHEMA: dict[str, Any] = {
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
WRITE_TEXT_DESCRIPTION = (
    "Write a UTF-8 text file in this run's workspace, creating it or replacing it whole; "
    "missing parent directories are created. path is relative to the workspace root (no "
    "leading /, no . or .. components, no symlinks). content is written exactly as given: no "
    "BOM, no newline translation, no newline added; at most 1048576 characters. Returns path, "
    "byte_count, checksum (sha256: followed by the lowercase hex SHA-256 of the bytes written) "
    "and created (true only when the path did not exist before). The workspace is a cache: it "
    "is kept while the run goes on (an approval the user gives in the conversation included), "
    "and discarded when the run finishes or pauses (a call left waiting for an operator's "
    "approval), so a file written before a pause is gone after it. artifact.export is the "
    "only way a file reaches the owner."
)

WRITE_TEXT_SPEC = ToolSpec.builtin(
    name="workspace.write_text",
    version="1.0.0",
    description=WRITE_TEXT_DESCRIPTION,
    input_schema=WRITE_TEXT_INPUT_SCHEMA,
    output_schema=WRITE_TEXT_OUTPUT_SCHEMA,
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
)


LIST_FILES_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": 4096, "default": ""},
        "recursive": {"type": "boolean", "default": False},
    },
    "required": [],
    "additionalProperties": False,
}

LIST_FILES_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "entries": {
            "type": "array",
            "maxItems": 1000,
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "kind": {"enum": ["file", "directory"]},
                    "byte_count": {"type": "integer"},
                },
                "required": ["path", "kind", "byte_count"],
                "additionalProperties": False,
            },
        },
        "truncated": {"type": "boolean"},
    },
    "required": ["path", "entries", "truncated"],
    "additionalProperties": False,
}

LIST_FILES_DESCRIPTION = (
    "List the files and directories under a directory of this run's workspace. path is "
    "relative to the workspace root (default \"\", the root itself); recursive (default false) "
    "descends into subdirectories. Each entry has path (relative to the workspace root), kind "
    "(file or directory) and byte_count (0 for a directory). Entries are in bytewise ascending "
    "order of path. At most 1000 are returned; truncated is true when there are more, and the "
    "entries returned are then the first 1000 in that order, so list a subdirectory to see the "
    "rest. Symlinks are not listed."
)

LIST_FILES_SPEC = ToolSpec.builtin(
    name="workspace.list_files",
    version="1.0.0",
    description=LIST_FILES_DESCRIPTION,
    input_schema=LIST_FILES_INPUT_SCHEMA,
    output_schema=LIST_FILES_OUTPUT_SCHEMA,
    side_effect=SideEffect.WORKSPACE_READ,
    risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY,
    # Lowered per call: a filename is attacker-controlled whenever the file is.
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("workspace.read",),
    timeout_s=10,
    maximum_output_bytes=262144,
)
