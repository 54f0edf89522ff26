"""The toolhost-system plugin: its domain, and its tool with its one reason."""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_system import current_time


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("system", "Facts about the host the model may ask for, such as the time.")]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # system.current_time is unconditional
    return [Tool(current_time.SPEC, build=current_time.build, reasons=current_time.REASONS)]
