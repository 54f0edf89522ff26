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

__all__ = ["OUTPUT_SCHEMA", "attached_line", "exported_line", "structured"]

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
    your reply.``; past ``MAX_ATTACHED_BYTES``, that it is too large to attach and how the
    person gets it instead (D364)."""
    return (f"Exported {_quoted(ref.name)} ({_size(ref)}, {ref.media_type}). "
            f"{ref.attachment_note()}")
