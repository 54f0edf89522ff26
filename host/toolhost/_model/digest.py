"""The argument digest an approval binds to."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Protocol


class _Hasher(Protocol):
    @property
    def name(self) -> str: ...

    def hexdigest(self) -> str: ...

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
    """``sha256:`` + lowercase hex of ``data``: the one checksum form toolhost writes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_checksum(data: bytes | bytearray | memoryview | _Hasher) -> str:
    """The ``sha256:`` checksum of bytes, or of a ``hashlib.sha256()`` already fed (a chunked
    read hashes as it goes): ``sha256:`` followed by 64 lowercase hex digits."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return "sha256:" + hashlib.sha256(data).hexdigest()
    if getattr(data, "name", None) != "sha256":
        raise TypeError("sha256_checksum takes bytes or a hashlib.sha256() object")
    return "sha256:" + data.hexdigest()


def argument_digest(name: str, version: str, arguments: Mapping[str, Any]) -> str:
    """Over the tool identity and the validated arguments (defaults applied), so an approval
    authorizes exactly one tool version with exactly these arguments."""
    return sha256_digest(canonical_json({"tool": name, "version": version, "arguments": arguments}))
