"""The toolhost-system plugin: its domain, and its tool with its one reason."""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_system.specs import CURRENT_TIME


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("system", "Facts about the host the model may ask for, such as the time.")]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # system.current_time is unconditional
    # Its body is built with the host's Clock, at the first call (specs.CURRENT_TIME).
    return [CURRENT_TIME]
