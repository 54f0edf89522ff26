"""The mail cache's public value objects: what ``MailCacheReader`` hands a reader.

They are the contract between toolhost-email and the distributions that read its cache
(toolhost-people); every field is documented in the package README's "The mail cache read API".
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal

import attrs

__all__ = ["CachedMessage", "MailAddress", "MessageSource"]


@attrs.frozen
class MailAddress:
    """One mailbox of an address header."""

    #: The display name, RFC 2047 decoded; "" when none.
    name: str
    #: The addr-spec as in the mail, lower-cased (local part and domain), no angle brackets.
    address: str


@attrs.frozen
class CachedMessage:
    """One stored message: its headers of record, never its body (``source`` has that)."""

    message_key: str
    account: str
    thread_id: str
    message_id: str
    date: _dt.datetime | None
    subject: str
    sender: tuple[MailAddress, ...]
    to: tuple[MailAddress, ...]
    cc: tuple[MailAddress, ...]
    reply_to: tuple[MailAddress, ...]
    direction: Literal["sent", "received"]


@attrs.frozen
class MessageSource:
    """The retained original of one message: decoded headers and the bounded plain text."""

    message_key: str
    account: str
    thread_id: str
    headers: tuple[tuple[str, str], ...]
    text: str
    truncated: bool
