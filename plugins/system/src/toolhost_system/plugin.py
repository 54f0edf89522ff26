"""The toolhost-system plugin: its domain, and its tool with its one reason."""

from __future__ import annotations

from toolhost import Domain, Services, Settings, Tool, ToolCallable, hookimpl
from toolhost_system.specs import REASONS, SPEC


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("system", "Facts about the host the model may ask for, such as the time.")]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # system.current_time is unconditional
    return [Tool(SPEC, build=build_current_time, reasons=REASONS)]


def build_current_time(services: Services) -> ToolCallable:
    """The body, imported here: registration and ``toolhost check`` need only the spec."""
    from toolhost_system import current_time

    return current_time.build(services)
