"""email.unsubscribe 1.0.0: send the RFC 8058 one-click request for 1 to 25 subscriptions.

The input names (subscription_id, evidence_digest) pairs only; the destination is derived here
from the census, never from arguments. Each pair ends in one closed outcome code and nothing
of the remote answer is returned. EXTERNAL_WRITE, so the default policy always asks for
approval; IDEMPOTENT because the request is a constant whose repetition changes nothing, which
is what lets recovery run an approved call again.
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
           "OUTPUT_SCHEMA", "ROUNDS", "SPEC", "build"]

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
