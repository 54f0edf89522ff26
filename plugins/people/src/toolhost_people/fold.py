"""The one comparison form for names, addresses and queries: NFKC, then casefold.

Fullwidth ``ANNA`` (U+FF21 U+FF2E U+FF2E U+FF21), ``anna`` and ``Anna`` fold alike. The fold is
only for comparing: what people show (names, addresses) is the text the mail gave.

Format characters (soft hyphen, zero-width space and joiners) are invisible, so they are
dropped: ``Anna\u00adlena`` reads "Annalena" and folds to ``annalena``. Control and line or
paragraph separator characters become a space (the index separates fields with one). After
casefold, ``i`` + U+0307 COMBINING DOT ABOVE (what the Turkish capital ``İ`` folds to, and
NFKC cannot compose) becomes ``i``, so ``ilker`` finds ``İlker``. The steps repeat until
nothing changes, so the fold is idempotent (dropping a character can let NFKC compose
the characters either side of it).
"""

from __future__ import annotations

import unicodedata

__all__ = ["fold"]

_BLANKED = frozenset({"Cc", "Zl", "Zp"})
_DROPPED = "Cf"
_DOTTED_I = "i\u0307"


def _once(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    cleaned = "".join(
        "" if (category := unicodedata.category(c)) == _DROPPED
        else " " if category in _BLANKED else c
        for c in folded)
    return " ".join(unicodedata.normalize("NFKC", cleaned.replace(_DOTTED_I, "i")).split())


def fold(text: str) -> str:
    """``text`` in comparison form: NFKC-casefolded, format characters dropped, controls
    blanked, runs of whitespace one space, no leading or trailing space."""
    folded = _once(text)
    while (again := _once(folded)) != folded:  # in practice at most one more pass
        folded = again
    return folded
