"""email.subscriptions 1.0.0: the subscription census, one entry per list the owner's mail
comes from. Never an unsubscribe address (URL or mailto): the destination stays on the
server, and email.unsubscribe takes the entry's id and evidence digest instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolOutput
from toolhost_email import wire
from toolhost_email.specs import SUBSCRIPTIONS_DESCRIPTION as DESCRIPTION
from toolhost_email.specs import SUBSCRIPTIONS_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_email.specs import SUBSCRIPTIONS_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_email.specs import SUBSCRIPTIONS_SPEC as SPEC
from toolhost_email.tool_call import account_argument, census_now, json_output

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "build"]


def build(services: Services) -> ToolCallable:
    def subscriptions(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        found = census_now(services, context.principal.id, account_argument(arguments))
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
        return json_output(structured)

    return subscriptions
