"""The argument digest an approval binds to."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "argument_digest",
    "canonical_json",
    "canonical_text",
    "sha256_checksum",
    "sha256_digest",
]


# One encoder, built once: json.dumps with non-default options builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_text(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, no ASCII escaping: one string per value."""
    return _CANONICAL.encode(value)


def canonical_json(value: Any) -> bytes:
    """``canonical_text`` as UTF-8 bytes."""
    return _CANONICAL.encode(value).encode("utf-8")


def sha256_digest(data: bytes) -> str:
    """``sha256:`` + lowercase hex, the one checksum form toolhost writes anywhere."""
    return sha256_checksum(hashlib.sha256(data))


def sha256_checksum(hasher: Any) -> str:
    """The same form for a ``hashlib.sha256()`` fed incrementally (a chunked read)."""
    return "sha256:" + str(hasher.hexdigest())


def argument_digest(name: str, version: str, arguments: Mapping[str, Any]) -> str:
    """Over the tool identity and the validated arguments (defaults applied), so an approval
    authorizes exactly one tool version with exactly these arguments."""
    return sha256_digest(canonical_json({"tool": name, "version": version, "arguments": arguments}))
