"""The file name rule: whether a person may be handed a file under a name a model or a plugin
chose (public as ``toolhost.file_name_problem``).

One rule for every place that hands a file over: ``artifact.export`` applies it to the names
it stores, and the MCP front end (a resource's name, the inbox's download) applies it again to
whatever name a record holds, so a name stored before the rule, or by a plugin that never
asked, is not handed over either.

A bare file name, because it names a file for the owner rather than a place in a workspace
(D93): no ``/`` or ``\\``; no control character (Unicode Cc: C0, DEL, C1), no format
character (Cf: the bidirectional overrides and zero-width characters that make ``txt.exe``
display as ``exe.txt``), no line or paragraph separator; not ``.`` or ``..`` and not starting
with ``.`` (a hidden file on the owner's machine); at least one character and at most 255
bytes of UTF-8 (a file name's limit on common filesystems).

And what would hide the name's real extension from the owner or not survive the save on their
machine (D361): no space but the plain one (U+0020; the other Zs and the Hangul fillers, which
draw as blanks, pad ``invoice.pdf`` so far from a final ``.exe`` that a file dialog cuts it
off), and no two plain spaces in a row, which pad as well; no ``<>:"|?*`` (refused by
Windows); no trailing dot or space (Windows drops them, so the saved file is not the name
shown); not a Windows device name (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``-``COM9``,
``LPT1``-``LPT9``, in any case, with or without an extension), which opens a device rather
than saves a file there.
"""

from __future__ import annotations

import unicodedata

__all__ = ["MAX_FILE_NAME_BYTES", "file_name_problem"]

#: A file name's limit in bytes on the common filesystems (NAME_MAX).
MAX_FILE_NAME_BYTES = 255

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


def file_name_problem(name: str) -> str | None:
    """Why a person may not be handed a file named ``name`` (operator detail, never shown to
    the model), or None when the name is safe to hand over as it is."""
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
    # Anywhere, not only before the last dot: "r.pdf" + spaces + "x.exe" hides .exe as well.
    if "  " in name:
        return "contains two or more spaces in a row"
    if name.split(".", 1)[0].rstrip(" ").upper() in _DEVICES:
        return "is a Windows device name"
    if len(name.encode("utf-8")) > MAX_FILE_NAME_BYTES:
        return f"longer than {MAX_FILE_NAME_BYTES} bytes of UTF-8"
    return None

