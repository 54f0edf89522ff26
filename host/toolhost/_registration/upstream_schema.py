"""An upstream MCP server's input schema, reviewed before it becomes a tool's (D281).

The schema is the upstream's words twice over: the model reads it (its descriptions, titles,
property names, enum values), and the host runs it (every argument is validated against it on
the event loop, before policy). So, beyond registration's closed-schema rules (step 5):

- no regular expression of the upstream's runs here (``pattern``, ``patternProperties``): a
  backtracking pattern such as ``^(a+)+$`` held the loop for 14 s on 28 characters, before
  any approval; a remote ``$ref`` is not fetched;
- its size and depth are bounded, so a listing cannot make every start slow;
- what a model reads is prose on one line: ``description`` and ``title`` are flattened and cut
  like the tool's description; ``$comment`` and ``examples`` are dropped; any other text
  (a property name, an enum member, a default) that is not one short printable line leaves
  the tool out, since changing it would change what the schema accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolhost._model.printable import one_line, prints

__all__ = ["MAX_DEPTH", "MAX_SCHEMA_BYTES", "MAX_TEXT", "one_line", "reviewed_schema"]

#: The largest input schema taken from an upstream, as JSON.
MAX_SCHEMA_BYTES = 64 * 1024
#: The deepest nesting of objects and arrays in it.
MAX_DEPTH = 16
#: The longest annotation (a description, a title) kept, and the longest other text allowed.
MAX_TEXT = 256
#: Keywords whose value is a regular expression the validator would run.
_REGEX_KEYWORDS = ("pattern", "patternProperties")
#: Keywords only for people reading the schema: flattened, or dropped.
_PROSE = ("description", "title")
_DROPPED = ("$comment", "examples")


class _Refused(Exception):
    pass


def reviewed_schema(schema: Mapping[str, Any]) -> Mapping[str, Any] | str:
    """The schema a gateway tool declares for ``schema``, or why the tool is left out."""
    try:
        size = len(json.dumps(schema, ensure_ascii=False, allow_nan=False)
                   .encode("utf-8", "replace"))
    except (TypeError, ValueError):
        return "its input schema is not JSON"
    if size > MAX_SCHEMA_BYTES:
        return f"its input schema is {size} bytes, more than {MAX_SCHEMA_BYTES}"
    try:
        reviewed = _review(schema, depth=0)
    except _Refused as refused:
        return str(refused)
    assert isinstance(reviewed, dict)
    return reviewed


def _review(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _Refused(f"its input schema nests deeper than {MAX_DEPTH}")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            _plain(key, "a property or keyword name")
            if key in _REGEX_KEYWORDS:
                raise _Refused(f"its input schema has a regular expression ({key}), which the "
                               "host does not run for an upstream")
            if key == "$ref" and not (isinstance(item, str) and item.startswith("#")):
                raise _Refused("its input schema refers outside itself ($ref)")
            if key in _DROPPED:
                continue
            if key in _PROSE and isinstance(item, str):
                out[key] = one_line(item, MAX_TEXT)
                continue
            out[key] = _review(item, depth + 1)
        return out
    if isinstance(value, list):
        return [_review(item, depth + 1) for item in value]
    if isinstance(value, str):
        _plain(value, "a value")
    return value


def _plain(text: str, what: str) -> None:
    if len(text) > MAX_TEXT or not prints(text):
        raise _Refused(f"its input schema has {what} that is not one printable line of at "
                       f"most {MAX_TEXT} characters")


