"""What an export returns: the ArtifactRef as structured output, and the line the model reads.

Both versions return the same closed structured result, the spec's ArtifactRef. The text names
the file JSON-quoted: a name from a workspace file may hold a quote or other characters that,
unquoted, could read as more than a name.
"""

from __future__ import annotations

import json
from typing import Any

from toolhost import ArtifactRef
from toolhost_artifact.specs import OUTPUT_SCHEMA

__all__ = ["ATTACH_LIMIT", "OUTPUT_SCHEMA", "attached_line", "exported_line", "structured"]

#: The largest file a client can fetch whole from the host (MCP ``resources/read``'s bound,
#: D223: one JSON-RPC message holds it as base64). An export between this and the 64 MiB
#: export ceiling is stored, and the operator's ``toolhost artifacts get`` streams it, but no
#: client can open it from the reply, so the text does not say it is attached (D364).
ATTACH_LIMIT = 32 * 1024 * 1024


def structured(ref: ArtifactRef) -> dict[str, Any]:
    """The ref as the structured result ``{id, name, media_type, byte_count, checksum}``."""
    return ref.to_json()


def _size(ref: ArtifactRef) -> str:
    return f"{ref.byte_count} {'byte' if ref.byte_count == 1 else 'bytes'}"


def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def exported_line(ref: ArtifactRef) -> str:
    """1.0.0: ``Exported "report.txt": 1234 bytes, text/plain, artifact <id>.``"""
    return f"Exported {_quoted(ref.name)}: {_size(ref)}, {ref.media_type}, artifact {ref.id}."


def attached_line(ref: ArtifactRef) -> str:
    """2.0.0 (D90): ``Exported "report.txt" (1234 bytes, text/plain). It is attached to
    your reply.``; past ``ATTACH_LIMIT``, that it is too large to attach and how the person
    gets it instead (D364)."""
    exported = f"Exported {_quoted(ref.name)} ({_size(ref)}, {ref.media_type})."
    if ref.byte_count > ATTACH_LIMIT:
        return (f"{exported} It is too large to attach to your reply (over 32 MiB): it is "
                f"stored as artifact {ref.id}, which the person can ask the host's operator "
                f"for (toolhost artifacts get {ref.id}).")
    return f"{exported} It is attached to your reply."
