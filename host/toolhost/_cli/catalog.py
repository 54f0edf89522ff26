"""The catalog: the enabled tool definitions as a model prompt reads them.

``canonical_catalog`` is byte-stable — sorted by name, then version; keys sorted; no
insignificant whitespace; UTF-8 — because it is serialized into a provider-side prefix cache,
and a byte that moves invalidates every cached prefix. ``to_openai`` and ``to_anthropic`` export
the same definitions in those providers' tool formats. Both forbid dots in names, and our name
grammar forbids hyphens, so ``math.calculate`` exports as ``math-calculate`` and maps back
unambiguously.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from toolhost import ToolSpec
from toolhost._composition import version_key

__all__ = [
    "FORMATS",
    "canonical_catalog",
    "catalog_entries",
    "export",
    "from_export_name",
    "to_anthropic",
    "to_export_name",
    "to_openai",
]

FORMATS = ("canonical", "openai", "anthropic")
# What both providers accept for a tool name.
_EXPORT_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _sorted(specs: Iterable[ToolSpec]) -> list[ToolSpec]:
    return sorted(specs, key=lambda s: (s.name, version_key(s.version)))


def catalog_entries(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """name, version, description, input_schema: the four fields a model is shown."""
    return [
        {
            "name": s.name,
            "version": s.version,
            "description": s.description,
            "input_schema": s.input_schema,
        }
        for s in _sorted(specs)
    ]


def canonical_catalog(specs: Iterable[ToolSpec]) -> bytes:
    """The byte-stable rendering: identical input gives identical bytes on every host."""
    return json.dumps(
        catalog_entries(specs), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")


def to_export_name(name: str) -> str:
    """``math.calculate`` → ``math-calculate``. Reversible: our names never contain ``-``."""
    exported = name.replace(".", "-")
    if not _EXPORT_NAME.fullmatch(exported):
        raise ValueError(f"{name!r} cannot be exported as a provider tool name")
    return exported


def from_export_name(exported: str) -> str:
    """The inverse of ``to_export_name``: a provider's tool call back to our name."""
    if exported.count("-") != 1:
        raise ValueError(f"{exported!r} is not an exported toolhost name")
    return exported.replace("-", ".")


def _one_per_name(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    entries = catalog_entries(specs)
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("a provider catalog holds one version per tool; resolve versions first")
    return entries


def to_openai(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """OpenAI function-tool definitions (``tools=[...]`` of Chat Completions)."""
    return [
        {
            "type": "function",
            "function": {
                "name": to_export_name(e["name"]),
                "description": e["description"],
                "parameters": e["input_schema"],
            },
        }
        for e in _one_per_name(specs)
    ]


def to_anthropic(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Anthropic Messages API tool definitions."""
    return [
        {
            "name": to_export_name(e["name"]),
            "description": e["description"],
            "input_schema": e["input_schema"],
        }
        for e in _one_per_name(specs)
    ]


def export(specs: Iterable[ToolSpec], fmt: str) -> bytes:
    """One of FORMATS, rendered byte-stably."""
    if fmt == "canonical":
        return canonical_catalog(specs)
    data = to_openai(specs) if fmt == "openai" else to_anthropic(specs) if fmt == "anthropic" else None
    if data is None:
        raise ValueError(f"unknown catalog format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
