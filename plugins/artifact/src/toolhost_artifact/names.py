"""The 2.0.0 file name rule: the name text the model wrote is saved under.

A bare file name, because it names a file for the owner rather than a place in a workspace:
no ``/`` or ``\\``; no control character (Unicode Cc: C0, DEL, C1), no format character (Cf:
the bidirectional overrides and zero-width characters that make ``txt.exe`` display as
``exe.txt``), no line or paragraph separator; not ``.`` or ``..`` and not starting with ``.``
(a hidden file on the owner's machine); at least one character and at most 255 bytes of UTF-8
(a file name's limit on common filesystems).

The input schema says as much of this as JSON Schema can (``PATTERN``, and the length in
characters); ``problem`` is the whole rule, and the body applies it whatever the schema let
through (``$`` in a pattern also matches before a final newline).
"""

from __future__ import annotations

import unicodedata

__all__ = ["MAX_NAME_BYTES", "PATTERN", "problem"]

#: A file name's limit in bytes on the common filesystems (NAME_MAX).
MAX_NAME_BYTES = 255

#: The part of the rule a JSON Schema pattern can carry: no leading dot, no slash or
#: backslash, no C0, DEL or C1 control. The same in ECMA 262 and Python's ``re``.
PATTERN = r"^[^./\\\x00-\x1f\x7f-\x9f][^/\\\x00-\x1f\x7f-\x9f]*$"

# Characters a name may not hold, by Unicode category: controls, format characters, and the
# line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def problem(name: str) -> str | None:
    """Why ``name`` breaks the rule (operator detail, never shown to the model), or None."""
    if not name:
        return "empty"
    if name.startswith("."):
        return "starts with a dot"
    if "/" in name or "\\" in name:
        return "contains a slash or backslash"
    if any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in name):
        return "contains a control, format or separator character"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes of UTF-8"
    return None
