"""The tool specification model: the classification enums, ToolSpec, Domain and Tool.

Every field of ToolSpec is required (the spec has no optional fields); registration step 6
refuses a spec whose classification fields are strings rather than enum members.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from toolhost._services import Services, ToolCallable

__all__ = [
    "Domain",
    "Idempotency",
    "Kind",
    "Risk",
    "SideEffect",
    "Source",
    "TargetKind",
    "Tool",
    "ToolSpec",
    "Trust",
]


class Kind(enum.Enum):
    CAPABILITY = "CAPABILITY"
    CONTROL = "CONTROL"


class Source(enum.Enum):
    BUILTIN = "BUILTIN"
    MCP = "MCP"
    DEVICE = "DEVICE"


class TargetKind(enum.Enum):
    IN_PROCESS = "in_process"
    SANDBOX = "sandbox"
    DEVICE = "device"


class SideEffect(enum.Enum):
    NONE = "NONE"
    WORKSPACE_READ = "WORKSPACE_READ"
    WORKSPACE_WRITE = "WORKSPACE_WRITE"
    CODE_EXECUTION = "CODE_EXECUTION"
    EXTERNAL_WRITE = "EXTERNAL_WRITE"


class Risk(enum.Enum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"


class Idempotency(enum.Enum):
    READ_ONLY = "READ_ONLY"
    IDEMPOTENT = "IDEMPOTENT"
    CONDITIONALLY_IDEMPOTENT = "CONDITIONALLY_IDEMPOTENT"
    NON_IDEMPOTENT = "NON_IDEMPOTENT"


class Trust(enum.Enum):
    """Output trust. ``rank`` orders them: USER > INTERNAL_TOOL > MEMORY > EXTERNAL_UNTRUSTED."""

    USER = "USER"
    INTERNAL_TOOL = "INTERNAL_TOOL"
    MEMORY = "MEMORY"
    EXTERNAL_UNTRUSTED = "EXTERNAL_UNTRUSTED"

    @property
    def rank(self) -> int:
        return _TRUST_RANK[self]

    @staticmethod
    def lower(a: Trust, b: Trust) -> Trust:
        """The less trusted of the two (trust may only be lowered, never raised)."""
        return a if a.rank <= b.rank else b


_TRUST_RANK = {
    Trust.EXTERNAL_UNTRUSTED: 0,
    Trust.MEMORY: 1,
    Trust.INTERNAL_TOOL: 2,
    Trust.USER: 3,
}


@attrs.frozen(kw_only=True)
class ToolSpec:
    """One registered (name, version): what the model sees and what policy sorts on.

    Fields are deliberately not validated here: registration (``toolhost._registration``)
    is the one place that refuses a bad spec, so that the refusal names the step, the tool
    and the distribution rather than surfacing as a constructor error at import time.
    """

    name: str
    version: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    kind: Kind
    source: Source
    target_kind: TargetKind
    server_id: str | None
    side_effect: SideEffect
    risk: Risk
    idempotency: Idempotency
    output_trust: Trust
    required_scopes: tuple[str, ...]
    timeout_s: float
    maximum_output_bytes: int
    allow_parallel: bool
    deprecated: bool

    @property
    def domain(self) -> str:
        """The namespace before the first dot: ``math`` for ``math.calculate``."""
        return self.name.split(".", 1)[0]

    @property
    def identity(self) -> str:
        """``name@version``, the form every refusal and log line uses."""
        return f"{self.name}@{self.version}"


@attrs.frozen
class Domain:
    """A namespace a plugin owns. Each domain has exactly one owning distribution."""

    name: str
    description: str = ""


@attrs.frozen(kw_only=True)
class Tool:
    """What ``toolhost_tools`` returns: the spec, the factory that builds the callable, and
    every reason code the callable may raise (each must have a static message).

    ``build(services)`` is called once, after registration has passed, never before.
    ``default_enabled`` False keeps a registered tool out of the default roster (a run's
    explicit ``enabled_tools`` may still name it), as ADR-0124 does for workspace.list_files.
    """

    spec: ToolSpec
    build: Callable[[Services], ToolCallable]
    reason_codes: tuple[str, ...] = ()
    default_enabled: bool = True
