"""The people domain's two hooks: with AGENT_PEOPLE_ENABLED=1, people.search and
people.context 1.0.0 and people.history 1.0.0 and 1.1.0; without it, nothing at all.

1.1.0 is history's latest, so an unversioned call gets it; a chat pinned to 1.0.0 keeps
1.0.0's contract. Nothing is opened here: each tool opens the cache, the links and the index at
its first call, and keeps them open for the next (``sessions``).
"""

from __future__ import annotations

from toolhost import Domain, Settings, SettingSpec, Tool, hookimpl

__all__ = ["DOMAIN", "FLAG", "toolhost_domains", "toolhost_settings", "toolhost_tools"]

FLAG = "AGENT_PEOPLE_ENABLED"

DOMAIN = Domain(
    "people",
    "The owner's correspondents, derived from the cached email: who they are, and the "
    "messages exchanged with them.",
)


@hookimpl
def toolhost_settings() -> list[SettingSpec]:
    return [SettingSpec(name=FLAG, key="enabled", type="flag", default="off",
                        description="register people.search, people.context and "
                                    "people.history (over toolhost-email's mail cache)",
                        activates=("people.search", "people.context", "people.history"))]


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    if not settings.flag(FLAG):
        return []
    # Imported only with the flag: without it, people costs a start nothing.
    from toolhost_people import context, history, search
    from toolhost_people.messages import (
        CONTEXT_REASONS,
        HISTORY_V1_0_REASONS,
        HISTORY_V1_1_REASONS,
        SEARCH_REASONS,
    )

    return [
        Tool(search.SPEC, build=search.build, reasons=SEARCH_REASONS),
        Tool(context.SPEC, build=context.build, reasons=CONTEXT_REASONS),
        Tool(history.SPEC_V1_0, build=history.build_v1_0, reasons=HISTORY_V1_0_REASONS),
        Tool(history.SPEC_V1_1, build=history.build_v1_1, reasons=HISTORY_V1_1_REASONS,
             checked_scopes=(history.SOURCE_READ_SCOPE,)),
    ]
