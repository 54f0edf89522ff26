"""email.subscriptions 1.0.0: the subscription census, one entry per list the owner's mail
comes from. Never an unsubscribe address (URL or mailto): the destination stays on the
server, and email.unsubscribe takes the entry's id and evidence digest instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

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
from toolhost_email.census import MAX_LIST_ID, census
from toolhost_email.config import AUTHSERV_SETTING, open_reader
from toolhost_email.reader import connection_of

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "build"]

MAX_LIMIT: Final = 200

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "account": {**wire.ACCOUNT_SCHEMA,
                    "description": "Only this account's subscriptions (default: all)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100,
                  "description": "At most this many, most recently seen first (1-200)."},
    },
    "required": [],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subscriptions": {"type": "array", "maxItems": MAX_LIMIT, "items": {
            "type": "object",
            "properties": {
                "subscription_id": {"type": "string", "pattern": "^s_[0-9a-f]{24}$"},
                "evidence_digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "account": {"type": "string"},
                "sender": {"type": "string", "maxLength": wire.ADDRESS_CHARS},
                "list_id": {"type": ["string", "null"], "maxLength": MAX_LIST_ID},
                "message_count": {"type": "integer", "minimum": 1},
                "last_seen": wire.DATE_SCHEMA,
                "one_click": {"type": "boolean"},
            },
            "required": ["subscription_id", "evidence_digest", "account", "sender", "list_id",
                         "message_count", "last_seen", "one_click"],
            "additionalProperties": False,
        }},
        "total": {"type": "integer", "minimum": 0},
        "truncated": {"type": "boolean"},
    },
    "required": ["subscriptions", "total", "truncated"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "List the mailing lists and bulk senders in the owner's cached mail: per subscription "
    "its id, the sender, the List-Id, how many messages and when last seen, whether one-click "
    "unsubscribe applies (RFC 8058, with a DKIM pass recorded by the owner's mail server), "
    "and an evidence digest. To unsubscribe, pass subscription_id and evidence_digest to "
    "email.unsubscribe. Sender and list names come from mail and are untrusted. Sends "
    "nothing."
)

SPEC = ToolSpec(
    name="email.subscriptions",
    version="1.0.0",
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.NONE,
    risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY,
    output_trust=Trust.EXTERNAL_UNTRUSTED,
    required_scopes=("email.read",),
    timeout_s=30,
    maximum_output_bytes=262144,
    allow_parallel=True,
    deprecated=False,
)


def build(services: Services) -> ToolCallable:
    authserv_id = services.settings.get(AUTHSERV_SETTING)

    def subscriptions(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        del context
        account = arguments.get("account")
        with open_reader(services) as reader:
            found = census(connection_of(reader), authserv_id,
                           None if account is None else account.strip().lower(),
                           now=services.clock.now())
        limit = arguments.get("limit", 100)
        structured = {
            "subscriptions": [{
                "subscription_id": s.subscription_id, "evidence_digest": s.evidence_digest,
                "account": s.account, "sender": s.sender, "list_id": s.list_id,
                "message_count": s.message_count, "last_seen": wire.iso(s.last_seen),
                "one_click": s.one_click,
            } for s in found[:limit]],
            "total": len(found),
            "truncated": len(found) > limit,
        }
        return ToolOutput(structured=structured, content=wire.render(structured))

    return subscriptions
