"""The subscription census: the cache's list mail grouped per (account, list), with what
one-click unsubscription would act on.

A subscription is keyed by its list identifier (RFC 2919: the angle-bracketed part of List-Id,
never its free description) together with the From domain, else by its sender's address:
List-Id is not authenticated, so a stranger naming a bank's List-Id forms a subscription of
its own and never becomes the bank list's evidence. The evidence is the latest message carrying
List-Unsubscribe whose sender domain the owner's receiving server recorded a dkim=pass for
(``authres``), else (not one-click) the latest carrying List-Unsubscribe. "Latest" is D160's
(``latest``), for the evidence and for the order of the list alike: a Date more than a day in
the future counts as older than any plausible one, so a forged date cannot stay "latest" nor
hold the top of the list. That message's first ``https`` URI (as
httpx parses it: the request is sent with httpx) is the destination, and one-click applies
only when the same message says ``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` exactly.
The evidence digest binds a request to exactly that evidence, so a newer message that changes
it makes an old pair stale.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx

from toolhost_email import latest
from toolhost_email.authres import dkim_pass_for
from toolhost_email.reader import connection_of, mail_where
from toolhost_email.wire import MAX_LIST_ID, list_identifier

if TYPE_CHECKING:
    from toolhost_email.reader import MailCacheReader

__all__ = ["MAX_LIST_ID", "ONE_CLICK", "Subscription", "census", "list_identifier",
           "one_click_destination"]

#: RFC 8058's List-Unsubscribe-Post value, and the POST body, byte for byte.
ONE_CLICK: Final = "List-Unsubscribe=One-Click"
_MAX_URI: Final = 2048
_BRACKETED = re.compile(r"<([^<>]*)>")


@attrs.frozen
class Subscription:
    subscription_id: str
    account: str
    sender: str
    list_id: str | None
    message_count: int
    last_seen: _dt.datetime | None
    one_click: bool
    evidence_digest: str
    #: Server-side only: never in a result.
    destination: str | None = attrs.field(repr=False)


def _https_uri(list_unsubscribe: str | None) -> str | None:
    """The first https URI of List-Unsubscribe, when it is one a request may go to: a host, no
    credentials in it, bounded length."""
    for candidate in _BRACKETED.findall(list_unsubscribe or ""):
        uri = "".join(candidate.split())
        if not uri.lower().startswith("https:"):
            continue
        if len(uri) > _MAX_URI:
            return None
        try:
            # httpx's reading, not urlsplit's: it is the one the request is built with, and
            # it refuses hosts urlsplit passes (octal IPv4, names that are no IDNA).
            url = httpx.URL(uri)
            url.raw_host.decode("ascii")
        except (httpx.InvalidURL, ValueError, UnicodeError):
            return None
        if url.scheme != "https" or not url.raw_host or url.userinfo:
            return None
        return uri
    return None


def one_click_destination(list_unsubscribe: str | None, post: str | None,
                          auth_results: list[str], sender_domain: str,
                          authserv_id: str | None) -> str | None:
    """The destination when one-click applies to this message, else None."""
    if post is None or post.strip() != ONE_CLICK:
        return None
    uri = _https_uri(list_unsubscribe)
    if uri is None or not dkim_pass_for(auth_results, authserv_id, sender_domain):
        return None
    return uri


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def _group_key(row: tuple[Any, ...]) -> str:
    """What the census groups a list message under (see the module docstring)."""
    senders = json.loads(row[4])
    address = str(senders[0][1]) if senders else ""
    identifier = list_identifier(row[5])
    if identifier is not None:
        return json.dumps(["list", identifier, address.rpartition("@")[2]])
    return json.dumps(["from", address])


def _domain_of(row: tuple[Any, ...]) -> str:
    senders = json.loads(row[4])
    return str(senders[0][1]).rpartition("@")[2] if senders else ""


def census(reader: MailCacheReader, authserv_id: str | None,
           account: str | None = None, *,
           now: _dt.datetime | None = None) -> list[Subscription]:
    """Every subscription of the accounts ``reader`` reads (of ``account`` when given), latest
    seen first. ``now`` (the tools pass their clock's): a message dated more than a day after
    it counts as older than every plausibly dated one; None trusts every date."""
    conn = connection_of(reader)
    if conn is None:
        return []
    mine, values = mail_where(reader)
    where = f"list_key IS NOT NULL AND {mine}" + (" AND account = ?" if account else "")
    rows = conn.execute(
        "SELECT account, list_key, message_key, date_ts, sender, list_id, list_unsubscribe, "
        f"list_unsubscribe_post, auth_results FROM messages WHERE {where}",
        (*values, account) if account else values).fetchall()
    groups: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault((row[0], _group_key(row)), []).append(row)
    horizon = None if now is None else latest.horizon(now)

    def recency(row: tuple[Any, ...]) -> tuple[int, int, str]:
        return (*latest.rank(row[3], horizon), row[2])

    # Each with the rank of its latest message: the list's order, latest seen first.
    found: list[tuple[tuple[int, int, str], Subscription]] = []
    for (owner, key), group in groups.items():
        group.sort(key=recency)
        last = group[-1]
        carrying = [r for r in group if r[6] is not None]
        evidence = next(
            (r for r in reversed(carrying)
             if dkim_pass_for(json.loads(r[8] or "[]"), authserv_id, _domain_of(r))),
            carrying[-1] if carrying else None)
        subscription_id = "s_" + _digest(owner, key)[:24]
        senders = json.loads(last[4])
        destination = None
        if evidence is not None:
            destination = one_click_destination(
                evidence[6], evidence[7], json.loads(evidence[8] or "[]"), _domain_of(evidence),
                authserv_id)
        found.append((recency(last), Subscription(
            subscription_id=subscription_id,
            account=owner,
            sender=senders[0][1] if senders else "",
            list_id=list_identifier(last[5]),
            message_count=len(group),
            last_seen=None if last[3] is None else _dt.datetime.fromtimestamp(
                last[3], _dt.UTC),
            one_click=destination is not None,
            evidence_digest="sha256:" + _digest(
                subscription_id, None if evidence is None else evidence[2], destination),
            destination=destination,
        )))
    found.sort(key=lambda ranked: (-ranked[0][0], -ranked[0][1], ranked[1].subscription_id))
    return [subscription for _, subscription in found]
