"""The artifact domain's two hooks: artifact.export 1.0.0 and 2.0.0, both registered.

2.0.0 (D90, D93) is the latest, so an unversioned call gets it; a run pinned to 1.0.0 keeps
1.0.0's contract (its schema, its result text). Each version declares its own reasons.
"""

from __future__ import annotations

from toolhost import Domain, Settings, Tool, hookimpl
from toolhost_artifact.messages import V2_REASONS
from toolhost_artifact.specs import EXPORT_V1, V2_SPEC

__all__ = ["DOMAIN", "toolhost_domains", "toolhost_tools"]

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
        # Each body is imported at its first call (1.0.0's by its typed function, 2.0.0's by
        # reference), and uses no service.
        EXPORT_V1,
        Tool(V2_SPEC, call="toolhost_artifact.export_v2:export", reasons=V2_REASONS),
    ]
