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

from toolhost import (
    Idempotency,
    Kind,
    Risk,
    Services,
    SideEffect,
    Source,
    TargetKind,
    ToolCallable,
    ToolExecutionContext,
    ToolOutput,
    ToolSpec,
    Trust,
)
from toolhost_email import wire
from toolhost_email.census import Subscription, census
from toolhost_email.config import (
    ALLOW_PRIVATE_SETTING,
    AUTHSERV_SETTING,
    open_reader,
    request_seconds,
)
from toolhost_email.oneclick import send_one_click
from toolhost_email.reader import connection_of

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTCOMES", "OUTPUT_SCHEMA", "SPEC", "build"]

MAX_REQUESTS: Final = 25
#: At most this many requests in flight at once.
CONCURRENCY: Final = 5
#: Rounds of CONCURRENCY requests a full call takes: times the per-request bound
#: (config.MAX_REQUEST_S), it stays below SPEC.timeout_s, so the call answers with every
#: outcome before the host's deadline would discard them all.
ROUNDS: Final = -(-MAX_REQUESTS // CONCURRENCY)

Outcome = Literal["requested", "not_one_click", "evidence_stale", "unknown_subscription",
                  "rejected", "unreachable", "refused_destination"]
OUTCOMES: Final = ("requested", "not_one_click", "evidence_stale", "unknown_subscription",
                   "rejected", "unreachable", "refused_destination")

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "requests": {
            "type": "array", "minItems": 1, "maxItems": MAX_REQUESTS,
            "description": "1 to 25 subscriptions, each as email.subscriptions returned it.",
            "items": {
                "type": "object",
                "properties": {
                    "subscription_id": {"type": "string", "pattern": "^s_[0-9a-f]{24}$"},
                    "evidence_digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                },
                "required": ["subscription_id", "evidence_digest"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["requests"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "results": {"type": "array", "minItems": 1, "maxItems": MAX_REQUESTS, "items": {
            "type": "object",
            "properties": {
                "subscription_id": {"type": "string"},
                "outcome": {"enum": list(OUTCOMES)},
            },
            "required": ["subscription_id", "outcome"],
            "additionalProperties": False,
        }},
    },
    "required": ["results"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Unsubscribe the owner from 1 to 25 mailing lists with the RFC 8058 one-click request. "
    "Give each subscription's subscription_id and evidence_digest exactly as "
    "email.subscriptions returned them; only subscriptions whose one_click is true can be "
    "sent. Every call waits for the owner's approval. Returns one outcome per subscription: "
    "requested (the sender accepted the request), not_one_click, evidence_stale (newer mail "
    "changed it: list the subscriptions again), unknown_subscription, rejected (the sender "
    "refused or redirected), unreachable, or refused_destination (not a public address). "
    "Nothing the sender answers is returned."
)

SPEC = ToolSpec(
    name="email.unsubscribe",
    version="1.0.0",
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.EXTERNAL_WRITE,
    risk=Risk.MEDIUM,
    idempotency=Idempotency.IDEMPOTENT,
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("email.read", "email.write"),
    timeout_s=120,
    maximum_output_bytes=8192,
    allow_parallel=False,
    deprecated=False,
)


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
        del context  # the pipeline cancels this task at the deadline
        pairs: list[Mapping[str, str]] = arguments["requests"]
        with open_reader(services) as reader:
            known = {s.subscription_id: s
                     for s in census(connection_of(reader), settings.get(AUTHSERV_SETTING),
                                     now=services.clock.now())}
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
        structured = {"results": results}
        return ToolOutput(structured=structured, content=wire.render(structured))

    return unsubscribe
