"""The toolhost plugin: the entry point ``math = "toolhost_math.plugin"`` names this module.

Three hooks, all pure: the math domain, the one tool, and its eight static messages.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_math import tool
from toolhost_math.messages import MESSAGES, REASON_CODES

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_messages", "toolhost_tools"]

DOMAIN = Domain("math", "Exact decimal arithmetic over a closed expression grammar.")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # math.calculate is unconditional
    return [Tool(spec=tool.SPEC, build=tool.build, reason_codes=REASON_CODES)]


@hookimpl
def toolhost_messages() -> dict[str, str]:
    return dict(MESSAGES)
