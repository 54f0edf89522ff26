"""The toolhost plugin: the entry point ``math = "toolhost_math.plugin"`` names this module.

Two hooks, both pure: the math domain, and the one tool with its eight reasons. Loading it
imports the spec and the reasons only; the evaluator (and ``decimal``) load when the host
first builds the tool.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_math.messages import REASONS
from toolhost_math.specs import SPEC

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_tools"]

DOMAIN = Domain("math", "Exact decimal arithmetic over a closed expression grammar.")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # math.calculate is unconditional
    # By reference: the body (a pure function, no host service) is imported at the first call.
    return [Tool(SPEC, call="toolhost_math.tool:calculate_tool", reasons=REASONS)]
