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
    Settings,
    SettingSpec,
    Tool,
    UserWords,
    hookimpl,
)
from toolhost_email.config import MODE_FLAG, SETTINGS, UNSUBSCRIBE_FLAG

__all__ = [
    "DOMAIN",
    "FEEDBACK_WORDS",
    "toolhost_domains",
    "toolhost_settings",
    "toolhost_tools",
]

#: email.feedback stores the owner's words: where the run has no user turn, the host asks the
#: owner for them, and their answer is the feedback, its quote and the turn.
FEEDBACK_WORDS = UserWords(
    # The person's text is the quote too: it must pass feedback_tool.quoted_in's minimum.
    "It asks to remember this feedback on how your email is handled. Write at least two words "
    "(four characters in a script written without spaces).",
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
            Tool(CONTEXT_SPEC, build="toolhost_email.context_tool:build",
                 reasons=CONTEXT_REASONS),
            Tool(FEEDBACK_SPEC, build="toolhost_email.feedback_tool:build",
                 reasons=FEEDBACK_REASONS,
                 user_words=FEEDBACK_WORDS),
        ]
    if settings.flag(UNSUBSCRIBE_FLAG):
        tools += [
            Tool(SUBSCRIPTIONS_SPEC, build="toolhost_email.subscriptions_tool:build",
                 reasons=SUBSCRIPTIONS_REASONS),
            # "It always requires approval": no loosened policy cell reaches it (D430); the
            # person approving reads what each opaque pair stands for (describe).
            Tool(UNSUBSCRIBE_SPEC, build="toolhost_email.unsubscribe_tool:build",
                 reasons=UNSUBSCRIBE_REASONS, always_requires_approval=True,
                 describe="toolhost_email.unsubscribe_tool:describe"),
        ]
    # By reference: each body's module is imported when the host first builds its tool.
    return tools
