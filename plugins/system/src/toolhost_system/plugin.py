"""The toolhost-system plugin: its domain, its tool, its messages."""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_system import current_time


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("system", "Facts about the host the model may ask for, such as the time.")]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    return [
        Tool(
            spec=current_time.SPEC,
            build=current_time.build,
            reason_codes=tuple(current_time.MESSAGES),
        )
    ]


@hookimpl
def toolhost_messages() -> dict[str, str]:
    return dict(current_time.MESSAGES)
