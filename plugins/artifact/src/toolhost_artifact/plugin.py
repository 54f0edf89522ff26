"""The artifact domain's two hooks: artifact.export 1.0.0 and 2.0.0, both registered.

2.0.0 (ADR-0122) is the latest, so an unversioned call gets it; a run pinned to 1.0.0 keeps
1.0.0's contract (its schema, its result text). Each version declares its own reasons.
"""

from __future__ import annotations

from toolhost import Domain, Services, Settings, Tool, ToolCallable, hookimpl
from toolhost_artifact.messages import V1_REASONS, V2_REASONS
from toolhost_artifact.specs import V1_SPEC, V2_SPEC

__all__ = ["DOMAIN", "build_export_v1", "build_export_v2", "toolhost_domains", "toolhost_tools"]

DOMAIN = Domain(
    "artifact",
    "Files handed to the owner: exported from the run's workspace, or text the model wrote.",
)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [DOMAIN]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    del settings  # both versions are unconditional
    return [
        Tool(V1_SPEC, build=build_export_v1, reasons=V1_REASONS),
        Tool(V2_SPEC, build=build_export_v2, reasons=V2_REASONS),
    ]


# Each version's body is imported when the host first builds it: registration and ``toolhost
# check`` need only the specs. The bodies use no service.


def build_export_v1(services: Services) -> ToolCallable:
    del services
    from toolhost_artifact.export_v1 import export

    return export


def build_export_v2(services: Services) -> ToolCallable:
    del services
    from toolhost_artifact.export_v2 import export

    return export
