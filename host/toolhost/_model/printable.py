"""Text from elsewhere (an upstream, a tool, a person's data) shown on a terminal, in a log or
to a model: what does not print never arrives as itself.

Python's ``str.isprintable`` draws the line: every character of Unicode's "Other" (control,
format such as direction marks and zero-width characters, private-use, surrogate, unassigned)
and "Separator" categories but the ASCII space does not print. Two ways to show them:
``escaped`` keeps the text exact (a JSON escape per character, so JSON stays JSON), and
``one_line`` keeps prose readable (each becomes a space).
"""

from __future__ import annotations

import json

__all__ = ["escaped", "one_line"]


def escaped(text: str, *, one_line: bool = True) -> str:
    """``text`` with every character that does not print as its JSON escape (``\\u202e``,
    ``\\u001b``, a surrogate pair past U+FFFF); with ``one_line`` False, line breaks kept."""
    if text.isprintable():  # nearly every text: one pass in C, not a generator per character
        return text
    return "".join(
        ch if ch.isprintable() or (ch == "\n" and not one_line) else json.dumps(ch)[1:-1]
        for ch in text
    )


def one_line(text: str, limit: int) -> str:
    """``text`` as prose on one line of at most ``limit`` characters: what does not print
    (control characters, line breaks, direction marks) becomes a space and runs of spaces one,
    so nothing in it can move a cursor, reorder the line or forge a line of its own."""
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
