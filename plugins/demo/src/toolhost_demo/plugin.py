"""The toolhost plugin: the entry point ``demo = "toolhost_demo.plugin"`` names this module.

Two hooks, both pure: the demo domain, and its one tool with no reasons, because the tool's
body has no failures (every way a call can stop is the host's, with the host's messages).
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_demo.specs import EXTERNAL_WRITE

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_tools"]

DOMAIN = Domain("demo", "Fixtures for the approval path: tools that record and send nothing.")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # demo.external_write is unconditional
    return [EXTERNAL_WRITE]
