"""The toolhost plugin: the entry point ``email = "toolhost_email.plugin"`` names this module.

Both pairs of tools are conditional (the seed's Milestones 26 and 31): AGENT_EMAIL_MODE_ENABLED
registers email.context and email.feedback, AGENT_EMAIL_UNSUBSCRIBE_ENABLED registers
email.subscriptions and email.unsubscribe. Without them this plugin adds nothing to a roster
and imports nothing more. With them, loading it imports the specs and the reasons only (D205):
each body, and the cache, the census and httpx behind it, load when the host first builds that
tool.
"""

from __future__ import annotations

from toolhost import (
    Domain,
    Services,
    Settings,
    SettingSpec,
    Tool,
    ToolCallable,
    UserWords,
    hookimpl,
)
from toolhost_email.config import MODE_FLAG, SETTINGS, UNSUBSCRIBE_FLAG

__all__ = [
    "DOMAIN",
    "FEEDBACK_WORDS",
    "build_context",
    "build_feedback",
    "build_subscriptions",
    "build_unsubscribe",
    "toolhost_domains",
    "toolhost_settings",
    "toolhost_tools",
]

#: email.feedback stores the owner's words: where the run has no user turn, the host asks the
#: owner for them, and their answer is the feedback, its quote and the turn.
FEEDBACK_WORDS = UserWords(
    "It asks to remember this feedback on how your email is handled.",
    arguments=("feedback", "quote"),
)

DOMAIN = Domain(
    "email",
    "The owner's cached mail (imported by the operator): threads, feedback, subscriptions.",
)


@hookimpl
def toolhost_settings() -> list[SettingSpec]:
    return list(SETTINGS)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    tools: list[Tool] = []
    if not (settings.flag(MODE_FLAG) or settings.flag(UNSUBSCRIBE_FLAG)):
        return tools  # the default: nothing more is imported
    from toolhost_email.messages import (
        CONTEXT_REASONS,
        FEEDBACK_REASONS,
        SUBSCRIPTIONS_REASONS,
        UNSUBSCRIBE_REASONS,
    )
    from toolhost_email.specs import (
        CONTEXT_SPEC,
        FEEDBACK_SPEC,
        SUBSCRIPTIONS_SPEC,
        UNSUBSCRIBE_SPEC,
    )

    if settings.flag(MODE_FLAG):
        tools += [
            Tool(CONTEXT_SPEC, build=build_context, reasons=CONTEXT_REASONS),
            Tool(FEEDBACK_SPEC, build=build_feedback, reasons=FEEDBACK_REASONS,
                 user_words=FEEDBACK_WORDS),
        ]
    if settings.flag(UNSUBSCRIBE_FLAG):
        tools += [
            Tool(SUBSCRIPTIONS_SPEC, build=build_subscriptions, reasons=SUBSCRIPTIONS_REASONS),
            Tool(UNSUBSCRIBE_SPEC, build=build_unsubscribe, reasons=UNSUBSCRIBE_REASONS),
        ]
    return tools


# Each body is imported when the host first builds its tool: registration and ``toolhost
# check`` need only the specs.


def build_context(services: Services) -> ToolCallable:
    from toolhost_email.context_tool import build

    return build(services)


def build_feedback(services: Services) -> ToolCallable:
    from toolhost_email.feedback_tool import build

    return build(services)


def build_subscriptions(services: Services) -> ToolCallable:
    from toolhost_email.subscriptions_tool import build

    return build(services)


def build_unsubscribe(services: Services) -> ToolCallable:
    from toolhost_email.unsubscribe_tool import build

    return build(services)
