"""The toolhost plugin: the entry point ``workspace = "toolhost_workspace.plugin"`` names this
module. Two hooks, both pure: the workspace domain, and the three tools with their reasons.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_workspace.messages import (
    LIST_FILES_REASONS,
    READ_TEXT_REASONS,
    WRITE_TEXT_REASONS,
)
from toolhost_workspace.specs import LIST_FILES_SPEC, READ_TEXT_SPEC, WRITE_TEXT_SPEC

__all__ = [
    "DOMAIN",
    "toolhost_domains",
    "toolhost_tools",
]

DOMAIN = Domain(
    "workspace",
    "UTF-8 text files in the run's workspace, a cache discarded when the run finishes or pauses "
    "(a call left waiting for an operator's approval).",
)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # the three tools are unconditional
    return [
        # By reference: each body is imported at its first call, and uses no service.
        Tool(READ_TEXT_SPEC, call="toolhost_workspace.read_text:read_text",
             reasons=READ_TEXT_REASONS),
        Tool(WRITE_TEXT_SPEC, call="toolhost_workspace.write_text:write_text",
             reasons=WRITE_TEXT_REASONS),
        # Not offered by default (list_files.py says why); enabled_tools may still name it.
        Tool(LIST_FILES_SPEC, call="toolhost_workspace.list_files:list_files",
             reasons=LIST_FILES_REASONS, default_enabled=False),
    ]
