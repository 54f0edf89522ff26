"""The steps the email tool bodies share around their own work: reading the account argument
as the cache keys accounts, reading the cache for one call as its principal reads it (the
accounts it owns: ``owners``), answering with a result as JSON.

Kept in one place so the tools cannot drift apart: email.unsubscribe re-derives the census
email.subscriptions listed, and only the same authserv-id and clock give the same evidence
digests (any other reading would make every pair it is handed stale)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from toolhost import Services, ToolOutput
from toolhost_email import wire
from toolhost_email.config import AUTHSERV_SETTING, open_reader

if TYPE_CHECKING:
    from toolhost_email.census import Subscription
    from toolhost_email.reader import MailCacheReader

__all__ = ["account_argument", "cache_reader", "census_now", "json_output"]


def account_argument(arguments: Mapping[str, Any]) -> str | None:
    """The ``account`` argument as the cache stores accounts (trimmed, lower-cased, as the
    importer wrote them), or None when the call names no account."""
    account = arguments.get("account")
    return None if account is None else account.strip().lower()


@contextmanager
def cache_reader(services: Services, principal: str) -> Iterator[MailCacheReader]:
    """The cache as ``principal`` reads it, for one call, in one snapshot (every statement of
    the call sees the same owners and mail), closed when the block ends; a cache that cannot
    be read fails the call as CACHE_UNAVAILABLE."""
    with open_reader(services, principal) as reader, reader.snapshot():
        yield reader


def census_now(services: Services, principal: str,
               account: str | None = None) -> list[Subscription]:
    """The census as a call sees it: the caller's accounts, the owner's server's authserv-id,
    the host's clock."""
    # Imported here: the census imports httpx, which email.context and email.feedback never use.
    from toolhost_email.census import census

    with cache_reader(services, principal) as reader:
        return census(reader, services.settings.get(AUTHSERV_SETTING), account,
                      now=services.clock.now())


def json_output(structured: Mapping[str, Any]) -> ToolOutput:
    """The result, its text the structured value as JSON (``wire.render``): every string
    from mail stays a quoted string."""
    return ToolOutput(structured=structured, content=wire.render(structured))
