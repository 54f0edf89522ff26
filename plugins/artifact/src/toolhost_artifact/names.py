"""The 2.0.0 file name rule: the name text the model wrote is saved under.

A bare file name, because it names a file for the owner rather than a place in a workspace:
no ``/`` or ``\\``; no control character (Unicode Cc: C0, DEL, C1), no format character (Cf:
the bidirectional overrides and zero-width characters that make ``txt.exe`` display as
``exe.txt``), no line or paragraph separator; not ``.`` or ``..`` and not starting with ``.``
(a hidden file on the owner's machine); at least one character and at most 255 bytes of UTF-8
(a file name's limit on common filesystems).

And what would hide the name's real extension from the owner or not survive the save on their
machine (D361): no space but the plain one (U+0020; the other Zs and the Hangul fillers, which
draw as blanks, pad ``invoice.pdf`` so far from a final ``.exe`` that a file dialog cuts it
off); no ``<>:"|?*`` (refused by Windows); no trailing dot or space (Windows drops them, so the
saved file is not the name shown); not a Windows device name (``CON``, ``PRN``, ``AUX``,
``NUL``, ``COM1``-``COM9``, ``LPT1``-``LPT9``, in any case, with or without an extension),
which opens a device rather than saves a file there.

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
# Letters (Lo) that draw as nothing: the Hangul fillers.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
# What Windows refuses in a file name (the slashes and controls are refused above).
_WINDOWS_REFUSED = frozenset('<>:"|?*')
# The names Windows keeps for devices, whatever follows the first dot.
_DEVICES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                      *(f"LPT{i}" for i in range(1, 10))})


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
    if any(c in _BLANK_LETTERS or (c != " " and unicodedata.category(c) == "Zs")
           for c in name):
        return "contains a space other than U+0020 or a blank filler"
    if any(c in _WINDOWS_REFUSED for c in name):
        return 'contains one of <>:"|?*'
    if name.endswith((".", " ")):
        return "ends with a dot or a space"
    if name.split(".", 1)[0].rstrip(" ").upper() in _DEVICES:
        return "is a Windows device name"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes of UTF-8"
    return None
