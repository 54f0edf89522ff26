"""Text from elsewhere (an upstream, a tool, a person's data) shown on a terminal, in a log or
to a model: what does not print never arrives as itself.

Python's ``str.isprintable`` draws most of the line: every character of Unicode's "Other"
(control, format such as direction marks and zero-width characters, private-use, surrogate,
unassigned) and "Separator" categories but the ASCII space does not print. So does every
character Unicode calls default-ignorable, which Python counts as printable though a renderer
shows nothing for it: the variation selectors (after one emoji, 256 of them spell any bytes),
the combining grapheme joiner, the Hangul fillers (D465); so do the two printable characters
drawn blank that Unicode calls neither ignorable nor a space; and so does each combining mark
past ``MARKS_IN_A_ROW`` in a row, which stacks into a smear over the lines above and below.
Two ways to show them: ``escaped`` keeps the text exact (a JSON escape per character, so JSON
stays JSON), and ``one_line`` keeps prose readable (each becomes a space).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator

__all__ = ["MARKS_IN_A_ROW", "SHOWS_NOTHING", "escaped", "not_utf8", "one_line", "prints"]

#: How many combining marks (Mn, Me) in a row show as themselves; each one past it is escaped.
#: Scripts stay under it (Vietnamese 2, pointed Biblical Hebrew 5, Tibetan's tallest stack, the
#: Kalachakra monogram, 7); UAX #15's 30 bounds a normaliser's buffer, not a line's height.
MARKS_IN_A_ROW = 8

#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.1), each of which
#: shows as nothing, and the printable characters drawn blank that Unicode calls neither
#: ignorable nor a space: U+2800 BRAILLE PATTERN BLANK, U+1D159 MUSICAL SYMBOL NULL NOTEHEAD
#: (the rest of the usual lists of invisible characters are ignorable or do not print).
#: ``isprintable`` refuses the format characters among them, not the others.
_NOTHING_BMP = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8")
_NOTHING_ASTRAL = "\U0001bca0-\U0001bca3\U0001d159\U0001d173-\U0001d17a\U000e0000-\U000e0fff"

#: Unicode's Mn and Me (17.0, and Python 3.11's 14.0) as ranges, with the code points between
#: two marks that never print as themselves (unassigned, format, ignorable) folded in.
_MARKS_BMP = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7-\u05c9"
    "\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed"
    "\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3\u07fd\u0816-\u0819\u081b-\u0823"
    "\u0825-\u0827\u0829-\u082d\u0859-\u085b\u0897-\u089f\u08ca-\u0902\u093a\u093c"
    "\u0941-\u0948\u094d\u0951-\u0957\u0962\u0963\u0981\u09bc\u09c1-\u09c4\u09cd"
    "\u09e2\u09e3\u09fe-\u0a02\u0a3c\u0a41-\u0a51\u0a70\u0a71\u0a75\u0a81\u0a82\u0abc"
    "\u0ac1-\u0ac8\u0acd\u0ae2\u0ae3\u0afa-\u0b01\u0b3c\u0b3f\u0b41-\u0b44\u0b4d-\u0b56"
    "\u0b62\u0b63\u0b82\u0bc0\u0bcd\u0c00\u0c04\u0c3c\u0c3e-\u0c40\u0c46-\u0c56\u0c62\u0c63"
    "\u0c81\u0cbc\u0cbf\u0cc6\u0ccc\u0ccd\u0ce2\u0ce3\u0d00\u0d01\u0d3b\u0d3c\u0d41-\u0d44"
    "\u0d4d\u0d62\u0d63\u0d81\u0dca\u0dd2-\u0dd6\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1"
    "\u0eb4-\u0ebc\u0ec8-\u0ece\u0f18\u0f19\u0f35\u0f37\u0f39\u0f71-\u0f7e\u0f80-\u0f84"
    "\u0f86\u0f87\u0f8d-\u0fbc\u0fc6\u102d-\u1030\u1032-\u1037\u1039\u103a\u103d\u103e"
    "\u1058\u1059\u105e-\u1060\u1071-\u1074\u1082\u1085\u1086\u108d\u109d\u135d-\u135f"
    "\u1712-\u1714\u1732\u1733\u1752\u1753\u1772\u1773\u17b4\u17b5\u17b7-\u17bd\u17c6"
    "\u17c9-\u17d3\u17dd\u180b-\u180f\u1885\u1886\u18a9\u1920-\u1922\u1927\u1928\u1932"
    "\u1939-\u193b\u1a17\u1a18\u1a1b\u1a56\u1a58-\u1a60\u1a62\u1a65-\u1a6c\u1a73-\u1a7f"
    "\u1ab0-\u1b03\u1b34\u1b36-\u1b3a\u1b3c\u1b42\u1b6b-\u1b73\u1b80\u1b81\u1ba2-\u1ba5"
    "\u1ba8\u1ba9\u1bab-\u1bad\u1be6\u1be8\u1be9\u1bed\u1bef-\u1bf1\u1c2c-\u1c33"
    "\u1c36\u1c37\u1cd0-\u1cd2\u1cd4-\u1ce0\u1ce2-\u1ce8\u1ced\u1cf4\u1cf8\u1cf9"
    "\u1dc0-\u1dff\u20d0-\u20f0\u2cef-\u2cf1\u2d7f\u2de0-\u2dff\u302a-\u302d\u3099\u309a"
    "\ua66f-\ua672\ua674-\ua67d\ua69e\ua69f\ua6f0\ua6f1\ua802\ua806\ua80b\ua825\ua826\ua82c"
    "\ua8c4\ua8c5\ua8e0-\ua8f1\ua8ff\ua926-\ua92d\ua947-\ua951\ua980-\ua982\ua9b3"
    "\ua9b6-\ua9b9\ua9bc\ua9bd\ua9e5\uaa29-\uaa2e\uaa31\uaa32\uaa35\uaa36\uaa43\uaa4c\uaa7c"
    "\uaab0\uaab2-\uaab4\uaab7\uaab8\uaabe\uaabf\uaac1\uaaec\uaaed\uaaf6\uabe5\uabe8\uabed"
    "\ufb1e\ufe00-\ufe0f\ufe20-\ufe2f")
_MARKS_ASTRAL = (
    "\U000101fd\U000102e0\U00010376-\U0001037a\U00010a01-\U00010a0f\U00010a38-\U00010a3f"
    "\U00010ae5\U00010ae6\U00010d24-\U00010d27\U00010d69-\U00010d6d\U00010eab\U00010eac"
    "\U00010ecb-\U00010ecf\U00010ef0-\U00010eff\U00010f46-\U00010f50\U00010f82-\U00010f85"
    "\U00011001\U00011038-\U00011046\U00011070\U00011073\U00011074\U0001107f-\U00011081"
    "\U000110b3-\U000110b6\U000110b9\U000110ba\U000110c2\U00011100-\U00011102"
    "\U00011127-\U0001112b\U0001112d-\U00011134\U00011173\U00011180\U00011181"
    "\U000111b6-\U000111be\U000111c9-\U000111cc\U000111cf\U0001122f-\U00011231\U00011234"
    "\U00011236\U00011237\U0001123e\U00011241\U000112df\U000112e3-\U000112ea"
    "\U00011300\U00011301\U0001133b\U0001133c\U00011340\U00011366-\U00011374"
    "\U000113bb-\U000113c0\U000113ce\U000113d0\U000113d2\U000113e1\U000113e2"
    "\U00011438-\U0001143f\U00011442-\U00011444\U00011446\U0001145e\U000114b3-\U000114b8"
    "\U000114ba\U000114bf\U000114c0\U000114c2\U000114c3\U000115b2-\U000115b5"
    "\U000115bc\U000115bd\U000115bf\U000115c0\U000115dc\U000115dd\U00011633-\U0001163a"
    "\U0001163d\U0001163f\U00011640\U000116ab\U000116ad\U000116b0-\U000116b5\U000116b7"
    "\U0001171d-\U0001171f\U00011722-\U00011725\U00011727-\U0001172b\U0001182f-\U00011837"
    "\U00011839\U0001183a\U0001193b\U0001193c\U0001193e\U00011943\U000119d4-\U000119db"
    "\U000119e0\U00011a01-\U00011a0a\U00011a33-\U00011a38\U00011a3b-\U00011a3e\U00011a47"
    "\U00011a51-\U00011a56\U00011a59-\U00011a5b\U00011a8a-\U00011a96\U00011a98\U00011a99"
    "\U00011b60\U00011b62-\U00011b64\U00011b66\U00011c30-\U00011c3d\U00011c3f"
    "\U00011c92-\U00011ca7\U00011caa-\U00011cb0\U00011cb2\U00011cb3\U00011cb5\U00011cb6"
    "\U00011d31-\U00011d45\U00011d47\U00011d90\U00011d91\U00011d95\U00011d97\U00011df0"
    "\U00011ef3\U00011ef4\U00011f00\U00011f01\U00011f36-\U00011f3a\U00011f40\U00011f42"
    "\U00011f5a\U00013440\U00013447-\U00013455\U0001611e-\U00016129\U0001612d-\U0001612f"
    "\U00016af0-\U00016af4\U00016b30-\U00016b36\U00016f4f\U00016f8f-\U00016f92\U00016fe4"
    "\U0001bc9d\U0001bc9e\U0001cf00-\U0001cf46\U0001d127\U0001d128\U0001d167-\U0001d169"
    "\U0001d17b-\U0001d182\U0001d185-\U0001d18b\U0001d1aa-\U0001d1ad\U0001d242-\U0001d244"
    "\U0001d25b\U0001d25c\U0001da00-\U0001da36\U0001da3b-\U0001da6c\U0001da75\U0001da84"
    "\U0001da9b-\U0001daaf\U0001e000-\U0001e02a\U0001e08f\U0001e130-\U0001e136\U0001e2ae"
    "\U0001e2ec-\U0001e2ef\U0001e4ec-\U0001e4ef\U0001e5ee\U0001e5ef\U0001e6e3\U0001e6e6"
    "\U0001e6ee\U0001e6ef\U0001e6f5\U0001e8d0-\U0001e8d6\U0001e944-\U0001e94a"
    "\U000e0100-\U000e01ef")
#: A superset of ``_NOTHING_ASTRAL`` and ``_MARKS_ASTRAL`` in three ranges. ``re`` tests a
#: character against a class's code points past U+FFFF one range at a time: the patterns below
#: test this rough class first, and only a character in it pays for the exact one.
_ASTRAL_ROUGHLY = "\U000101fd-\U0001e8d6\U0001e944-\U0001e94a\U000e0000-\U000e0fff"

#: Every character that shows as nothing (``_NOTHING_BMP`` and ``_NOTHING_ASTRAL``) as the
#: body of a regular expression's class (``f"[{SHOWS_NOTHING}]"``): registration's text
#: rule refuses the very characters the displays escape here as showing nothing (D557).
SHOWS_NOTHING = f"{_NOTHING_BMP}{_NOTHING_ASTRAL}"
_MARKS = f"{_MARKS_BMP}{_MARKS_ASTRAL}"
_MARKS_ROUGHLY = f"{_MARKS_BMP}{_ASTRAL_ROUGHLY}"

@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(one mark; what does not show as itself though ``isprintable`` passes it: a character
    that shows as nothing, or a run of more than ``MARKS_IN_A_ROW`` marks). Compiled at first
    use, not at import: ~2 ms of every command's start that prints only ASCII. The leading
    class lets ``re`` skip ahead in C."""
    mark = re.compile(f"(?=[{_MARKS_ROUGHLY}])[{_MARKS}]")
    hidden = re.compile(
        f"[{_NOTHING_BMP}{_MARKS_ROUGHLY}]"
        f"(?:(?<=[{SHOWS_NOTHING}])|(?=[{_MARKS_ROUGHLY}]{{{MARKS_IN_A_ROW}}})"
        f"(?<=[{_MARKS}])[{_MARKS}]{{{MARKS_IN_A_ROW}}})")
    return mark, hidden


def prints(text: str) -> bool:
    """Whether every character of ``text`` shows as itself (nothing to escape)."""
    if text.isascii():  # a flag CPython keeps: no ASCII character is ignorable, blank or a mark
        return text.isprintable()
    return text.isprintable() and _patterns()[1].search(text) is None


def _shown(text: str, instead: Callable[[str], str], kept: str) -> Iterator[str]:
    """Each character of ``text``, or ``instead(ch)`` for one that does not show as itself
    (but those in ``kept``): alone, or as a mark past ``MARKS_IN_A_ROW`` in a row."""
    mark = _patterns()[0].match
    marks = 0  # the marks in a row so far, each stacked on the one before
    for ch in text:
        if not prints(ch) and ch not in kept:
            marks = 0  # its replacement is no mark: the next marks stack on that afresh
            yield instead(ch)
        elif mark(ch):
            marks += 1
            yield ch if marks <= MARKS_IN_A_ROW else instead(ch)
        else:
            marks = 0
            yield ch


def _json_escape(ch: str) -> str:
    return json.dumps(ch)[1:-1]


def escaped(text: str, *, one_line: bool = True) -> str:
    """``text`` with every character that does not print as its JSON escape (``\\u202e``,
    ``\\u001b``, ``\\ufe0f``, a surrogate pair past U+FFFF, each mark of a run past
    ``MARKS_IN_A_ROW``); with ``one_line`` False, line breaks kept."""
    if prints(text):  # nearly every text: two passes in C, not a generator per character
        return text
    return "".join(_shown(text, _json_escape, "" if one_line else "\n"))


def one_line(text: str, limit: int) -> str:
    """``text`` as prose on one line of at most ``limit`` characters: what does not print
    (control characters, line breaks, direction marks, a smear's marks) becomes a space and runs
    of spaces one, so nothing in it can move a cursor, reorder the line or forge a line of its
    own."""
    flat = " ".join("".join(_shown(text, lambda ch: " ", "")).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def not_utf8(value: str) -> str | None:
    """None when ``value`` is UTF-8 text; else what the operator typed, shown as the bytes it
    came from (``b'\\xff'``), for a one-line refusal. Bytes that are not UTF-8 reach a
    command's arguments and the environment as lone surrogates (PEP 383), which no stored row,
    id or name can hold (D341). Public as ``toolhost.not_utf8`` (plugin API 1.9)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:  # the bytes the operator typed
            return repr(value.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:  # a surrogate no bytes decode to: given in-process
            return ascii(value)
    return None
