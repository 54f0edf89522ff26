"""What a tool hands back, and what the host hands back for it.

A tool returns a ``ToolOutput`` or raises ``ToolFailure(reason_code, detail=...)``. It never
writes model-facing failure text: the host renders ``Outcome.message`` from the message table,
and ``detail`` reaches operators (logs, the invocation row), never the model.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

import attrs

from toolhost._model.errors import ToolhostError
from toolhost._model.spec import Trust

__all__ = [
    "HARD_OUTPUT_CEILING",
    "REASON_CODE_PATTERN",
    "FailureInfo",
    "Outcome",
    "OutcomeStatus",
    "ToolFailure",
    "ToolFailureKind",
    "ToolOutput",
    "ToolValidationError",
    "failure_kind_of",
]


#: Global output ceiling: past it a result is OUTPUT_TOO_LARGE (pipeline step 12), and a
#: tool that reads unbounded input (workspace.read_text) stops there.
HARD_OUTPUT_CEILING = 8 * 1024 * 1024


class ToolFailureKind(enum.Enum):
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    NOT_FOUND = "NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    OUTPUT_INVALID = "OUTPUT_INVALID"
    OUTPUT_TOO_LARGE = "OUTPUT_TOO_LARGE"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    UPSTREAM_REJECTED = "UPSTREAM_REJECTED"
    INTERNAL = "INTERNAL"


#: ``tool.<failure kind in lower case>.<code>``, e.g. ``tool.invalid_arguments.syntax``.
REASON_CODE_PATTERN = re.compile(
    r"^tool\.(" + "|".join(k.value.lower() for k in ToolFailureKind) + r")\.[a-z][a-z0-9_]*$"
)


def failure_kind_of(reason_code: str) -> ToolFailureKind:
    """The failure kind a reason code names. Raises ValueError for a malformed code."""
    if not REASON_CODE_PATTERN.fullmatch(reason_code):
        raise ValueError(f"malformed reason code {reason_code!r}")
    return ToolFailureKind(reason_code.split(".")[1].upper())


@attrs.frozen(kw_only=True)
class ToolOutput:
    """A successful tool result.

    ``structured`` is validated against the spec's output_schema; ``content`` is the one text
    part the model reads; ``output_trust`` may only lower the spec's trust (the host clamps).
    """

    structured: Mapping[str, Any]
    content: str
    output_trust: Trust | None = None


class ToolFailure(ToolhostError):
    """Raised by a tool body. Carries a declared reason code and operator-only detail."""

    def __init__(
        self,
        reason_code: str,
        *,
        detail: Mapping[str, Any] | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(reason_code)
        self.reason_code = reason_code
        self.detail: Mapping[str, Any] = dict(detail or {})
        self.retryable = retryable

    @property
    def kind(self) -> ToolFailureKind:
        return failure_kind_of(self.reason_code)

    def __repr__(self) -> str:
        return f"ToolFailure({self.reason_code!r}, detail={dict(self.detail)!r})"


class OutcomeStatus(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    #: A pause, not a result: the row waits for ``approve`` or ``deny``.
    AWAITING_APPROVAL = "awaiting_approval"
    #: A PolicyDecision rendered by the pipeline, not a ToolResult.
    DENIED = "denied"
    #: Approved and executing in another call or process; ask again for the result.
    RUNNING = "running"


@attrs.frozen(kw_only=True)
class FailureInfo:
    """A failure as the host renders it. ``message`` is the static table entry, byte for byte."""

    kind: ToolFailureKind
    reason_code: str
    message: str
    retryable: bool
    detail: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Outcome:
    """The result of one invocation. ``content`` is exactly what the model reads."""

    tool: str
    version: str | None
    status: OutcomeStatus
    content: str
    structured: Mapping[str, Any] | None = None
    output_trust: Trust | None = None
    failure: FailureInfo | None = None
    invocation_id: str | None = None
    #: Artifacts the pipeline wrote for this outcome (the whole of an excerpted output).
    artifacts: tuple[Mapping[str, Any], ...] = ()
    #: True when ``content`` is a head-and-tail excerpt and ``structured`` was withheld.
    truncated: bool = False
    #: The policy decision, as recorded on the row (``{"action": ..., "rule": ...}``).
    decision: Mapping[str, str] | None = None
    #: Files this call exported or generated (``ArtifactRef`` JSON, in the order it made them):
    #: what an MCP answer links as resources. The run's attachments are ``Host.attachments``.
    attachments: tuple[Mapping[str, Any], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.SUCCEEDED

    @property
    def paused(self) -> bool:
        return self.status is OutcomeStatus.AWAITING_APPROVAL

    def to_json(self) -> dict[str, Any]:
        """The model-safe JSON form: never includes operator detail."""
        data: dict[str, Any] = {
            "tool": self.tool,
            "version": self.version,
            "status": self.status.value,
            "content": self.content,
            "structured": dict(self.structured) if self.structured is not None else None,
            "output_trust": self.output_trust.value if self.output_trust else None,
            "invocation_id": self.invocation_id,
        }
        if self.artifacts:
            data["artifacts"] = [dict(a) for a in self.artifacts]
        if self.truncated:
            data["truncated"] = True
        if self.decision is not None:
            data["decision"] = dict(self.decision)
        if self.failure is not None:
            data.update(
                kind=self.failure.kind.value,
                reason_code=self.failure.reason_code,
                message=self.failure.message,
                retryable=self.failure.retryable,
            )
        return data


class ToolValidationError(ToolFailure):
    """Arguments that do not match the input schema. One shape, one static message."""

    REASON_CODE = "tool.invalid_arguments.schema"

    def __init__(self, *, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(self.REASON_CODE, detail=detail, retryable=False)
