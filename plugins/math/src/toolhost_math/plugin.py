"""The toolhost plugin: the entry point ``math = "toolhost_math.plugin"`` names this module.

Two hooks, both pure: the math domain, and the one tool with its eight reasons.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_math import tool
from toolhost_math.messages import REASONS

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_tools"]

DOMAIN = Domain("math", "Exact decimal arithmetic over a closed expression grammar.")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # math.calculate is unconditional
    return [Tool(tool.SPEC, call=tool.calculate_tool, reasons=REASONS)]
