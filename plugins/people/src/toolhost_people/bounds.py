"""What a people result holds at most: text cut to a stated length, and the bytes a closed
output schema allows in the worst case, which each tool's maximum_output_bytes covers.

The host measures a result as canonical JSON in UTF-8 (and the text the model reads, which
is the same JSON). A character takes at most four bytes there, except a C0 control character
JSON escapes as ``\\u00XX`` (six): ``shown`` drops those (tab, line feed and carriage return
stay, escaped in two), so every string costs at most 2 + 4 x its maxLength bytes and a
result within its schema is never cut to an excerpt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["BYTES_PER_CHARACTER", "shown", "worst_case_bytes"]

BYTES_PER_CHARACTER = 4
#: Bytes of the longest integer a people result holds (a count, at most 64-bit).
_INTEGER = 20

_ESCAPED_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def shown(text: str, limit: int) -> tuple[str, bool]:
    """``text`` as a result shows it: C0 controls other than tab and line breaks dropped, at
    most ``limit`` characters; and whether anything was cut."""
    cleaned = _ESCAPED_CONTROLS.sub("", text)
    return cleaned[:limit], len(cleaned) > limit


def worst_case_bytes(schema: Mapping[str, Any]) -> int:
    """The most bytes a value valid under ``schema`` (as people's schemas are written: every
    string with maxLength, every array with maxItems) takes as compact JSON, every property
    present. Raises ValueError for a string or array without a bound."""
    if "enum" in schema:
        return max(len(json.dumps(v, ensure_ascii=False).encode()) for v in schema["enum"])
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return max(worst_case_bytes({**schema, "type": k}) for k in kinds)
    if kinds == "string":
        if "maxLength" not in schema:
            raise ValueError(f"a string without maxLength: {schema}")
        return 2 + BYTES_PER_CHARACTER * int(schema["maxLength"])
    if kinds == "integer":
        return _INTEGER
    if kinds == "boolean":
        return len("false")
    if kinds == "null":
        return len("null")
    if kinds == "array":
        if "maxItems" not in schema:
            raise ValueError(f"an array without maxItems: {schema}")
        items = int(schema["maxItems"])
        return 2 + items * worst_case_bytes(schema["items"]) + max(items - 1, 0)
    if kinds == "object":
        properties: Mapping[str, Any] = schema.get("properties", {})
        members = [len(json.dumps(k).encode()) + 1 + worst_case_bytes(v)
                   for k, v in properties.items()]
        return 2 + sum(members) + max(len(members) - 1, 0)
    raise ValueError(f"a schema people does not bound: {schema}")
