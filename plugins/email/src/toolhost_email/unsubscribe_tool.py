"""email.unsubscribe 1.0.0: send the RFC 8058 one-click request for 1 to 25 subscriptions.

The input names (subscription_id, evidence_digest) pairs only; the destination is derived here
from the census, never from arguments. Each pair ends in one closed outcome code and nothing
of the remote answer is returned. EXTERNAL_WRITE, so the default policy always asks for
approval; IDEMPOTENT because the request is a constant whose repetition changes nothing, which
is what lets recovery run an approved call again.

``describe`` is what a person approving reads beside those opaque pairs: per pair, the list,
its sender, the account it came to and where the request would go, from the same census the
call reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final, Literal

import httpx

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolOutput
from toolhost_email.census import Subscription
from toolhost_email.config import ALLOW_PRIVATE_SETTING, request_seconds
from toolhost_email.oneclick import send_one_click
from toolhost_email.specs import MAX_REQUESTS, OUTCOMES
from toolhost_email.specs import UNSUBSCRIBE_DESCRIPTION as DESCRIPTION
from toolhost_email.specs import UNSUBSCRIBE_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_email.specs import UNSUBSCRIBE_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_email.specs import UNSUBSCRIBE_SPEC as SPEC
from toolhost_email.tool_call import census_now, json_output

__all__ = ["CONCURRENCY", "DESCRIPTION", "INPUT_SCHEMA", "MAX_REQUESTS", "OUTCOMES",
           "OUTPUT_SCHEMA", "ROUNDS", "SPEC", "build", "describe"]

#: At most this many requests in flight at once.
CONCURRENCY: Final = 5
#: Rounds of CONCURRENCY requests a full call takes: times the per-request bound
#: (config.MAX_REQUEST_S), it stays below SPEC.timeout_s, so the call answers with every
#: outcome before the host's deadline would discard them all.
ROUNDS: Final = -(-MAX_REQUESTS // CONCURRENCY)

#: specs.OUTCOMES, as a type (the tests hold the two equal).
Outcome = Literal["requested", "not_one_click", "evidence_stale", "unknown_subscription",
                  "rejected", "unreachable", "refused_destination"]


def _checked(pair: Mapping[str, str], known: Mapping[str, Subscription]) -> Outcome | None:
    """The outcome decided without the network, or None when the request is to be sent."""
    found = known.get(pair["subscription_id"])
    if found is None:
        return "unknown_subscription"
    if found.evidence_digest != pair["evidence_digest"]:
        return "evidence_stale"
    if not found.one_click or found.destination is None:
        return "not_one_click"
    return None


#: What the call does with a pair ``_checked`` decides without the network.
_NOTHING_SENT: Final[Mapping[str, str]] = {
    "not_one_click": "it offers no one-click unsubscribe, so the call sends nothing for it",
    "evidence_stale": "it changed since it was listed, so the call sends nothing for it "
                      "(list the subscriptions again)",
}


def describe(arguments: Mapping[str, Any], services: Services,
             principal_id: str) -> list[str]:
    """One line per requested pair: what the call, made for ``principal_id``, will do with
    it, read from the census the call itself reads (its accounts, authserv-id and clock), so
    the line and the outcome agree. Only the destination's host is shown: its path may carry
    the list's token for the owner."""
    known = {s.subscription_id: s for s in census_now(services, principal_id)}
    return [_described(pair, known) for pair in arguments["requests"]]


def _described(pair: Mapping[str, str], known: Mapping[str, Subscription]) -> str:
    subscription_id = pair["subscription_id"]
    decided = _checked(pair, known)
    if decided == "unknown_subscription":
        return f"{subscription_id}: not in the mail cache (the call will refuse it)"
    found = known[subscription_id]
    what = _NOTHING_SENT[decided] if decided is not None else (
        f"one-click POST to {_site(found.destination or '')}")
    # What is sent and where first, the sender's own words (List-Id, From) last and short:
    # a long list name once pushed the destination past the host's cut of the line.
    named = f"list {_short(found.list_id)}" if found.list_id else "no List-Id"
    return (f"{subscription_id}: {what}; {named}, from {_short(found.sender or 'no sender')}, "
            f"received on {found.account}")


def _short(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def _site(destination: str) -> str:
    """``https://host[:port]/…``: the host as the request connects to it (its ASCII form, so
    a look-alike Unicode name shows as the punycode it is)."""
    url = httpx.URL(destination)
    host = url.raw_host.decode("ascii")
    host = f"[{host}]" if ":" in host else host
    return f"https://{host}{f':{url.port}' if url.port is not None else ''}/…"


def build(services: Services) -> ToolCallable:
    settings = services.settings
    seconds = request_seconds(settings)
    allow_private = settings.flag(ALLOW_PRIVATE_SETTING)

    def client_for(timeout: float) -> httpx.AsyncClient:
        return services.async_http(timeout=timeout)

    async def unsubscribe(arguments: Mapping[str, Any],
                          context: ToolExecutionContext) -> ToolOutput:
        # (The pipeline cancels this task at the deadline.) Only the caller's accounts: the
        # pair of a subscription of another person's is unknown_subscription.
        pairs: list[Mapping[str, str]] = arguments["requests"]
        known = {s.subscription_id: s for s in census_now(services, context.principal.id)}
        decided: list[Outcome | None] = [_checked(p, known) for p in pairs]
        # One request per subscription, however often a call names it.
        to_send = {p["subscription_id"] for p, d in zip(pairs, decided, strict=True)
                   if d is None}
        gate = asyncio.Semaphore(CONCURRENCY)

        async def send(subscription_id: str) -> tuple[str, Outcome]:
            destination = known[subscription_id].destination
            assert destination is not None
            async with gate:
                try:
                    outcome = await send_one_click(destination, client_for, seconds=seconds,
                                                   allow_private=allow_private)
                except Exception:  # one pair's failure must never cost the others their outcome
                    outcome = "unreachable"
            return subscription_id, outcome

        sent = dict(await asyncio.gather(*(send(s) for s in sorted(to_send))))
        results = [{"subscription_id": p["subscription_id"],
                    "outcome": d if d is not None else sent[p["subscription_id"]]}
                   for p, d in zip(pairs, decided, strict=True)]
        return json_output({"results": results})

    return unsubscribe
