"""The toolhost plugin: the entry point ``workspace = "toolhost_workspace.plugin"`` names this
module. Two hooks, both pure: the workspace domain, and the three tools with their reasons.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_workspace import list_files, read_text, write_text
from toolhost_workspace.messages import (
    LIST_FILES_REASONS,
    READ_TEXT_REASONS,
    WRITE_TEXT_REASONS,
)

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_tools"]

DOMAIN = Domain(
    "workspace",
    "UTF-8 text files in the run's workspace, a cache discarded when the run finishes or pauses.",
)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # the three tools are unconditional
    return [
        Tool(read_text.SPEC, call=read_text.read_text, reasons=READ_TEXT_REASONS),
        Tool(write_text.SPEC, call=write_text.write_text, reasons=WRITE_TEXT_REASONS),
        # Registered, not advertised by default (ADR-0124); enabled_tools may still name it.
        Tool(list_files.SPEC, call=list_files.list_files, reasons=LIST_FILES_REASONS,
             default_enabled=False),
    ]
