"""people.history's paging cursor: the position of a page's last interaction.

Keyset paging: the next page is every interaction strictly after that position in history's
total order (date, then message key, both descending), so pages never repeat or skip one, and
a cursor stays valid across a rebuild of the index (an erase in between removes interactions,
it never shifts a page boundary). The cursor names its person: one handed out for another
person, or text this tool did not make, is ``bad_cursor``. It is not secret and not signed:
it can only position a read the caller may already make.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["MAX_CURSOR_LENGTH", "PATTERN", "decode", "encode"]

#: Enough for a person id, a timestamp and a message key of 256 characters, base64 encoded.
MAX_CURSOR_LENGTH = 512
#: base64url without padding.
PATTERN = "^[A-Za-z0-9_-]+$"

_SEPARATOR = "\x1f"
#: SQLite's INTEGER range: a position outside it was never handed out (and cannot be bound).
_LOWEST = -(2**63)
_HIGHEST = 2**63 - 1


def encode(person_id: str, ts: int, message_key: str) -> str:
    raw = _SEPARATOR.join((person_id, str(ts), message_key)).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(cursor: str, person_id: str) -> tuple[int, str] | None:
    """The position ``cursor`` holds, or None when it is not a cursor for ``person_id``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    parts = raw.split(_SEPARATOR)
    if len(parts) != 3 or parts[0] != person_id or not parts[2]:
        return None
    ts = parts[1]
    digits = ts[1:] if ts.startswith("-") else ts
    # 19 digits hold every 64-bit integer; the range check then keeps what SQLite can bind.
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
        return None
    position = int(ts)
    if not _LOWEST <= position <= _HIGHEST:
        return None
    return position, parts[2]
