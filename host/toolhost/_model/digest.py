"""The argument digest an approval binds to."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from json import encoder as _json_encoder
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
    "shown_text",
]


# One encoder, built once: json.dumps with non-default options builds a new one per call.
# NaN and the infinities are refused (ValueError): they are not JSON, PostgreSQL's jsonb
# refuses them, and the MCP SDK would send them as null (D401).
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False)

# ``JSONEncoder.encode`` still builds a C encoder per call (~0.7 µs of its ~1.4, five times a
# row). One per thread: its circular-reference markers are state a concurrent encode must not
# see, and an encode that raises may leave markers behind, so that thread's is then dropped.
_c_encoders = threading.local()
_make_encoder: Any = getattr(_json_encoder, "c_make_encoder", None)
_encode_str: Callable[[str], str] = _json_encoder.encode_basestring


def _c_encoder() -> Callable[[Any, int], list[str]] | None:
    if _make_encoder is None:  # an interpreter without the C accelerator
        return None
    # JSONEncoder.iterencode's own arguments for _CANONICAL's options.
    encoder: Callable[[Any, int], list[str]] = _make_encoder(
        {}, _CANONICAL.default, _encode_str, None, ":", ",", True, False, False)
    _c_encoders.encoder = encoder
    return encoder


def canonical_text(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, no ASCII escaping: one string per value."""
    if isinstance(value, str):
        return _encode_str(value)  # as JSONEncoder.encode does
    encoder = getattr(_c_encoders, "encoder", None) or _c_encoder()
    if encoder is None:
        return _CANONICAL.encode(value)
    try:
        return "".join(encoder(value, 0))
    except BaseException:
        _c_encoders.encoder = None
        raise


def shown_text(value: Any) -> str:
    """``canonical_text`` of a value read back from a row, to show it: a row stored before
    NaN and the infinities were refused (D401) may hold one, written here as JSON's common
    extension (``NaN``, ``Infinity``) rather than failing the page that shows it."""
    try:
        return canonical_text(value)
    except ValueError:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_json(value: Any) -> bytes:
    """``canonical_text`` as UTF-8 bytes."""
    return canonical_text(value).encode("utf-8")


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


def argument_digest(name: str, version: str, arguments: Mapping[str, Any],
                    definition: str | None = None) -> str:
    """Over the tool identity and the validated arguments (defaults applied), so an approval
    authorizes exactly one tool version with exactly these arguments; and over the tool's
    ``definition`` when its version does not pin it (an upstream MCP server's tool, D441)."""
    # ``canonical_json`` of {"tool", "version", "arguments"[, "definition"]}, its keys sorted:
    # "arguments" comes first, so the text is the arguments' between a constant head and the
    # tool's constant rest, encoded once per tool (``_identity_tail``).
    return sha256_digest(
        f'{{"arguments":{canonical_text(arguments)}{_identity_tail(name, version, definition)}'
        .encode())


@functools.lru_cache(maxsize=1024)
def _identity_tail(name: str, version: str, definition: str | None) -> str:
    """What follows the arguments in ``argument_digest``'s canonical text: ``,`` and the rest
    of the identity object's members, its closing brace included."""
    rest: dict[str, Any] = {"tool": name, "version": version}
    if definition is not None:
        rest["definition"] = definition
    return "," + canonical_text(rest)[1:]
