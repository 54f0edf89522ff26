"""The toolhost plugin: the entry point ``workspace = "toolhost_workspace.plugin"`` names this
module. Three hooks, all pure: the workspace domain, the three tools, their four messages.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_workspace import list_files, read_text, write_text
from toolhost_workspace.messages import (
    LIST_FILES_CODES,
    MESSAGES,
    READ_TEXT_CODES,
    WRITE_TEXT_CODES,
)

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_messages", "toolhost_tools"]

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
        Tool(spec=read_text.SPEC, build=read_text.build, reason_codes=READ_TEXT_CODES),
        Tool(spec=write_text.SPEC, build=write_text.build, reason_codes=WRITE_TEXT_CODES),
        # Registered, not advertised by default (ADR-0124); enabled_tools may still name it.
        Tool(spec=list_files.SPEC, build=list_files.build, reason_codes=LIST_FILES_CODES,
             default_enabled=False),
    ]


@hookimpl
def toolhost_messages() -> dict[str, str]:
    return dict(MESSAGES)
