"""A batch of raw messages to the cache's rows: what a worker process of the import runs.

Apart from the importer so that a worker loads the parsing side alone (``parse``, the standard
``email`` package), not the cache, the census or the HTTP client.
"""

from __future__ import annotations

from collections.abc import Iterable
from json.encoder import encode_basestring

from toolhost_email.cache_model import MailAddress
from toolhost_email.parse import Malformed, ParsedMessage, parse_message
from toolhost_email.wire import list_identifier

__all__ = ["Parsed", "parse_batch"]

#: Each message's row, or the reason it is skipped (``parse.SKIP_REASONS``).
Parsed = list[tuple[object, ...] | str]



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


def _row(m: ParsedMessage) -> tuple[object, ...]:
    return (
        m.message_key, m.account, m.thread_id, m.message_id,
        None if m.date is None else int(m.date.timestamp()),
        m.subject, _addrs(m.sender), _addrs(m.to), _addrs(m.cc), _addrs(m.reply_to),
        m.direction, _pairs(m.headers), m.text, int(m.truncated),
        _list_key(m), m.list_id, m.list_unsubscribe, m.list_unsubscribe_post,
        _strings(m.auth_results),
    )


def parse_batch(account: str, batch: list[tuple[str, bytes]]) -> Parsed:
    """Each (message key, raw message)'s row, or the reason it is skipped."""
    out: Parsed = []
    for key, raw in batch:
        parsed = parse_message(account, raw, key=key)
        out.append(parsed.reason if isinstance(parsed, Malformed) else _row(parsed))
    return out
