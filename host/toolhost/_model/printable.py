"""Text from elsewhere (an upstream, a tool, a person's data) shown on a terminal, in a log or
to a model: what does not print never arrives as itself.

Python's ``str.isprintable`` draws most of the line: every character of Unicode's "Other"
(control, format such as direction marks and zero-width characters, private-use, surrogate,
unassigned) and "Separator" categories but the ASCII space does not print. So does every
character Unicode calls default-ignorable, which Python counts as printable though a renderer
shows nothing for it: the variation selectors (after one emoji, 256 of them spell any bytes),
the combining grapheme joiner, the Hangul fillers (D465). Two ways to show them: ``escaped``
keeps the text exact (a JSON escape per character, so JSON stays JSON), and ``one_line`` keeps
prose readable (each becomes a space).
"""

from __future__ import annotations

import json
import re

__all__ = ["escaped", "one_line", "prints"]

#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.1): each shows as
#: nothing. ``isprintable`` refuses the format characters among them, not the others.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


def prints(text: str) -> bool:
    """Whether every character of ``text`` shows as itself (nothing to escape)."""
    return text.isprintable() and _IGNORABLE.search(text) is None


def escaped(text: str, *, one_line: bool = True) -> str:
    """``text`` with every character that does not print as its JSON escape (``\\u202e``,
    ``\\u001b``, ``\\ufe0f``, a surrogate pair past U+FFFF); with ``one_line`` False, line
    breaks kept."""
    if prints(text):  # nearly every text: two passes in C, not a generator per character
        return text
    return "".join(
        ch if prints(ch) or (ch == "\n" and not one_line) else json.dumps(ch)[1:-1]
        for ch in text
    )


def one_line(text: str, limit: int) -> str:
    """``text`` as prose on one line of at most ``limit`` characters: what does not print
    (control characters, line breaks, direction marks) becomes a space and runs of spaces one,
    so nothing in it can move a cursor, reorder the line or forge a line of its own."""
    flat = " ".join("".join(ch if prints(ch) else " " for ch in text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
