"""The toolhost plugin: the entry point ``workspace = "toolhost_workspace.plugin"`` names this
module. Two hooks, both pure: the workspace domain, and the three tools with their reasons.
"""

from __future__ import annotations

from toolhost import Domain, Services, Settings, Tool, ToolCallable, hookimpl
from toolhost_workspace.messages import (
    LIST_FILES_REASONS,
    READ_TEXT_REASONS,
    WRITE_TEXT_REASONS,
)
from toolhost_workspace.specs import LIST_FILES_SPEC, READ_TEXT_SPEC, WRITE_TEXT_SPEC

__all__ = [
    "DOMAIN",
    "build_list_files",
    "build_read_text",
    "build_write_text",
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
        Tool(READ_TEXT_SPEC, build=build_read_text, reasons=READ_TEXT_REASONS),
        Tool(WRITE_TEXT_SPEC, build=build_write_text, reasons=WRITE_TEXT_REASONS),
        # Registered, not advertised by default (ADR-0124); enabled_tools may still name it.
        Tool(LIST_FILES_SPEC, build=build_list_files, reasons=LIST_FILES_REASONS,
             default_enabled=False),
    ]


# Each body is imported when the host first builds its tool: registration and ``toolhost
# check`` need only the specs. The bodies use no service.


def build_read_text(services: Services) -> ToolCallable:
    del services
    from toolhost_workspace.read_text import read_text

    return read_text


def build_write_text(services: Services) -> ToolCallable:
    del services
    from toolhost_workspace.write_text import write_text

    return write_text


def build_list_files(services: Services) -> ToolCallable:
    del services
    from toolhost_workspace.list_files import list_files

    return list_files
