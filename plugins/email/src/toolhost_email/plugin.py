"""The toolhost plugin: the entry point ``email = "toolhost_email.plugin"`` names this module.

Both pairs of tools are conditional (the seed's Milestones 26 and 31): AGENT_EMAIL_MODE_ENABLED
registers email.context and email.feedback, AGENT_EMAIL_UNSUBSCRIBE_ENABLED registers
email.subscriptions and email.unsubscribe. Without them this plugin adds nothing to a roster,
and costs nothing at start: a pair's modules (httpx among them) are imported only when its
flag is set.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_email.config import MODE_FLAG, UNSUBSCRIBE_FLAG

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_tools"]

DOMAIN = Domain(
    "email",
    "The owner's cached mail (imported by the operator): threads, feedback, subscriptions.",
)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    tools: list[Tool] = []
    if settings.flag(MODE_FLAG):
        from toolhost_email import context_tool, feedback_tool
        from toolhost_email.messages import CONTEXT_REASONS, FEEDBACK_REASONS

        tools += [
            Tool(context_tool.SPEC, build=context_tool.build, reasons=CONTEXT_REASONS),
            Tool(feedback_tool.SPEC, build=feedback_tool.build, reasons=FEEDBACK_REASONS),
        ]
    if settings.flag(UNSUBSCRIBE_FLAG):
        from toolhost_email import subscriptions_tool, unsubscribe_tool
        from toolhost_email.messages import SUBSCRIPTIONS_REASONS, UNSUBSCRIBE_REASONS

        tools += [
            Tool(subscriptions_tool.SPEC, build=subscriptions_tool.build,
                 reasons=SUBSCRIPTIONS_REASONS),
            Tool(unsubscribe_tool.SPEC, build=unsubscribe_tool.build,
                 reasons=UNSUBSCRIBE_REASONS),
        ]
    return tools
