"""A batch of raw messages to the cache's rows: what a worker process of the import runs.

Apart from the importer so that a worker loads the parsing side alone (``parse``, the standard
``email`` package), not the cache, the census or the HTTP client.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from json.encoder import encode_basestring
from typing import Final

from toolhost_email.cache_model import MailAddress
from toolhost_email.parse import (
    MAX_ADDRESSES,
    MAX_TEXT_CHARS,
    Malformed,
    ParsedMessage,
    parse_message,
)
from toolhost_email.wire import list_identifier

__all__ = ["Parsed", "parse_batch", "row_bound", "rows_weight"]

#: Each message's row, or the reason it is skipped (``parse.SKIP_REASONS``).
Parsed = list[tuple[object, ...] | str]

#: C0 controls but tab and line breaks: JSON writes most as six characters (``\u0001``).
_CONTROLS: Final = [c for c in range(0x20) if chr(c) not in "\t\n\r"]
#: How ``encode_basestring`` writes each of them: ``\u00XX``, ``\b`` or ``\f``.
_ESCAPED_CONTROL: Final = re.compile(r"\\(?:u00|[bf])")
#: The headers of record drop them (a ``str.translate`` table), as a shown header does
#: (toolhost-people's ``shown``).
_UNSHOWN: Final = dict.fromkeys(_CONTROLS)
#: An Authentication-Results value keeps each as one character of the same kind to
#: ``authres``'s tokenizer: white space (``str.isspace``) as a space, any other as U+FFFD, so
#: no word is joined or split that the server's text did not join or split.
_HELD: Final = {c: " " if chr(c).isspace() else "\ufffd" for c in _CONTROLS}
#: A row's characters per byte of its message's header section, at most: a value is stored
#: in the headers and at most once more (an Authentication-Results, a subject, an address
#: list), each JSON-escaped to at most twice its length (``"``, ``\``); an address list is
#: written again (quoted names) and each of its first addresses as a JSON pair of its own.
#: The worst shapes found hold under 5 (the tests hold a set of them under this).
ROW_CHARS_PER_HEADER_BYTE: Final = 8
#: A row's characters that no byte of its message pays for: its keys, account and date, the
#: JSON's brackets, a header's date written out in full; and the JSON of up to MAX_ADDRESSES
#: addresses in each of its four address lists, ten characters each (``["", ""], ``), which
#: take as few as two bytes each (``a,``).
ROW_FIXED_CHARS: Final = 1024 + 4 * MAX_ADDRESSES * 10
#: Where a header section ends: its first empty line, whatever ends the lines (the parser
#: ends a line at CRLF, CR or LF).
_EMPTY_LINE: Final = re.compile(rb"\n[\r\n]|\r\r")


def _strings(values: Iterable[str]) -> str:
    """``json.dumps(list(values), ensure_ascii=False)``: the encoder's set-up costs more than
    writing these few strings (``encode_basestring`` is what it writes a str with)."""
    return "[" + ", ".join(map(encode_basestring, values)) + "]"


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """``json.dumps([[a, b], ...], ensure_ascii=False)``, as ``_strings``."""
    return "[" + ", ".join(f"[{encode_basestring(a)}, {encode_basestring(b)}]"
                           for a, b in pairs) + "]"


def _addrs(addrs: tuple[MailAddress, ...]) -> str:
    return _pairs((a.name, a.address) for a in addrs)


def _list_key(m: ParsedMessage) -> str | None:
    """Marks a list message (the census groups them itself): its list identifier and From
    domain, else its sender."""
    if m.list_unsubscribe is None and m.list_id is None:
        return None
    address = m.sender[0].address if m.sender else ""
    identifier = list_identifier(m.list_id)
    if identifier is not None:
        return f"list:{identifier}@{address.rpartition('@')[2]}"
    return "from:" + address


def _escaped_controls(json: str) -> bool:
    """Whether ``json`` may hold one of ``_CONTROLS`` (or text that reads as one escaped):
    nearly all mail holds no backslash, found fastest."""
    return "\\" in json and _ESCAPED_CONTROL.search(json) is not None


def _shown(headers: tuple[tuple[str, str], ...]) -> str:
    """The headers of record as JSON, without the controls a shown header drops."""
    written = _pairs(headers)
    if not _escaped_controls(written):  # nearly all mail: written once
        return written
    return _pairs((name, value.translate(_UNSHOWN)) for name, value in headers)


def _auth_results(values: tuple[str, ...]) -> str:
    """The Authentication-Results values (unfolded) as JSON, each control one character in its
    place: ``authres`` reads a value of MAX_STORED_CHARS as cut, so none may shorten."""
    written = _strings(values)
    if not _escaped_controls(written):
        return written
    return _strings(value.translate(_HELD) for value in values)


def _row(m: ParsedMessage) -> tuple[object, ...]:
    return (
        m.message_key, m.account, m.thread_id, m.message_id,
        None if m.date is None else int(m.date.timestamp()),
        m.subject, _addrs(m.sender), _addrs(m.to), _addrs(m.cc), _addrs(m.reply_to),
        m.direction, _shown(m.headers), m.text, int(m.truncated),
        _list_key(m), m.list_id, m.list_unsubscribe, m.list_unsubscribe_post,
        _auth_results(m.auth_results),
    )


def parse_batch(account: str, batch: list[tuple[str, bytes]]) -> Parsed:
    """Each (message key, raw message)'s row, or the reason it is skipped."""
    out: Parsed = []
    for key, raw in batch:
        parsed = parse_message(account, raw, key=key)
        out.append(parsed.reason if isinstance(parsed, Malformed) else _row(parsed))
    return out


def rows_weight(parsed: Parsed) -> int:
    """The bytes a parsed batch's rows hold (each value's ``sys.getsizeof``): a string's are
    a character each, or 2 or 4 each in one holding a character past U+00FF or U+FFFF."""
    return sum(sum(map(sys.getsizeof, row)) for row in parsed if not isinstance(row, str))


def row_bound(raw: bytes) -> int:
    """The most characters the row of the message ``raw`` can hold, known before it is
    parsed: its header section's bytes each ``ROW_CHARS_PER_HEADER_BYTE``, its body's one each
    up to MAX_TEXT_CHARS (the text is stored once, unescaped, and decoding never makes more
    characters than bytes), and ``ROW_FIXED_CHARS``. (Characters, not bytes: a bound in
    bytes would weigh every message as if its strings were of 4-byte characters.)"""
    head = _header_section(raw)
    return (ROW_FIXED_CHARS + ROW_CHARS_PER_HEADER_BYTE * head
            + min(len(raw) - head, MAX_TEXT_CHARS))


def _header_section(raw: bytes) -> int:
    """How long the header section of ``raw`` is at most: up to its first empty line."""
    end = raw.find(b"\n\n")
    end = len(raw) if end < 0 else end
    if raw.find(b"\r", 0, end) < 0:  # LF line ends (the usual case): found without a regex
        return end
    match = _EMPTY_LINE.search(raw, 0, end + 2)
    return end if match is None else match.start()
