"""Shapes the email tools share: the source wrapper, an address, a date, a bounded text, a
list identifier."""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    # Annotation only: the specs read this module's schemas at load, never the cache's types.
    from toolhost_email.cache_model import MailAddress

__all__ = [
    "ACCOUNT_SCHEMA",
    "ADDRESSES_MAX",
    "ADDRESSES_SCHEMA",
    "ADDRESS_CHARS",
    "DATE_SCHEMA",
    "MAX_LIST_ID",
    "NAME_CHARS",
    "SOURCE_SCHEMA",
    "SUBJECT_CHARS",
    "SUBJECT_SCHEMA",
    "THREAD_ID_SCHEMA",
    "addresses",
    "bounded",
    "iso",
    "list_identifier",
    "render",
    "source",
]

#: What a result carries of one message's headers (the cache keeps more, parse.MAX_*): a
#: subject, each display name, and the first addresses of a list.
SUBJECT_CHARS: Final = 300
NAME_CHARS: Final = 100
ADDRESSES_MAX: Final = 10
ADDRESS_CHARS: Final = 320
#: RFC 2919 §2: a list-id is at most 255 characters (the census refuses longer ones).
MAX_LIST_ID: Final = 255
_BRACKETED: Final = re.compile(r"<([^<>]*)>")
_LIST_ID: Final = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+")

ACCOUNT_SCHEMA: Final[dict[str, Any]] = {
    "type": "string", "minLength": 3, "maxLength": 320,
    "description": "An account address as a source wrapper names it.",
}
THREAD_ID_SCHEMA: Final[dict[str, Any]] = {
    "type": "string", "pattern": "^t_[0-9a-f]{32}$",
    "description": "A thread_id exactly as a source wrapper returned it.",
}
SOURCE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "account": {"type": "string"},
        "thread_id": {"type": "string"},
        "message_key": {"type": "string"},
    },
    "required": ["account", "thread_id", "message_key"],
    "additionalProperties": False,
}
SUBJECT_SCHEMA: Final[dict[str, Any]] = {"type": "string", "maxLength": SUBJECT_CHARS}
ADDRESSES_SCHEMA: Final[dict[str, Any]] = {
    "type": "array",
    "maxItems": ADDRESSES_MAX,
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": NAME_CHARS},
                       "address": {"type": "string", "maxLength": ADDRESS_CHARS}},
        "required": ["name", "address"],
        "additionalProperties": False,
    },
}
DATE_SCHEMA: Final[dict[str, Any]] = {"type": ["string", "null"]}


def source(account: str, thread_id: str, message_key: str) -> dict[str, str]:
    """The server-authored wrapper naming where an item came from (selective erasure)."""
    return {"account": account, "thread_id": thread_id, "message_key": message_key}


def addresses(found: tuple[MailAddress, ...]) -> list[dict[str, str]]:
    """The first ADDRESSES_MAX, names cut to NAME_CHARS (the cache bounds addresses)."""
    return [{"name": a.name[:NAME_CHARS], "address": a.address[:ADDRESS_CHARS]}
            for a in found[:ADDRESSES_MAX]]


def iso(when: _dt.datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def bounded(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def render(structured: object) -> str:
    return json.dumps(structured, ensure_ascii=False, sort_keys=True)


def list_identifier(list_id: str | None) -> str | None:
    """The list identifier of a List-Id value (RFC 2919): its bracketed dot-atom, lower-cased;
    a bare dot-atom value is taken as it is; anything else is no identifier."""
    if not list_id:
        return None
    bracketed = _BRACKETED.findall(list_id)
    candidate = (bracketed[-1] if bracketed else list_id).strip().lower()
    if not candidate or len(candidate) > MAX_LIST_ID or not _LIST_ID.fullmatch(candidate):
        return None
    return candidate
