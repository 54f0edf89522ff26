"""The toolhost plugin: the entry point ``sandbox = "toolhost_sandbox.plugin"`` names this
module. The domain, the one tool (registered whether or not isolation works here: it fails
closed), and the readiness ``toolhost check`` reports."""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_sandbox import run_command
from toolhost_sandbox.messages import ISOLATION_UNAVAILABLE, RUN_COMMAND_REASONS

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_readiness", "toolhost_tools"]

DOMAIN = Domain(
    "sandbox",
    "Shell commands in the run's workspace, isolated by bubblewrap: no network, no host files.",
)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # unconditional: without isolation the tool fails closed, it is not removed
    return [Tool(run_command.SPEC, build=run_command.build, reasons=RUN_COMMAND_REASONS)]


@hookimpl
def toolhost_readiness(settings: Settings) -> list[str]:
    problem = run_command.isolation_problem(settings)
    if problem is None:
        return []
    return [f"{run_command.SPEC.name}@{run_command.SPEC.version} has no working isolation "
            f"({problem}): every call fails with {ISOLATION_UNAVAILABLE}"]
