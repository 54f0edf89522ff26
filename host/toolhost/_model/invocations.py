"""The ``tool_invocations`` row as a value: its states and its record."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "InvocationNotFound",
    "InvocationRecord",
    "InvocationState",
]


class InvocationState(enum.Enum):
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in _FINAL


_FINAL = frozenset({InvocationState.DENIED, InvocationState.SUCCEEDED, InvocationState.FAILED})


class InvocationNotFound(LookupError):
    """No invocation has this id."""


@attrs.frozen(kw_only=True)
class InvocationRecord:
    """One ``tool_invocations`` row. Timestamps are aware UTC datetimes from the Clock."""

    id: str
    run_id: str
    principal_id: str
    scopes: tuple[str, ...]
    conversation_id: str | None = None
    tool_name: str
    tool_version: str | None
    arguments: Any
    argument_digest: str | None
    state: InvocationState
    policy: Mapping[str, str] | None = None
    approver: str | None = None
    denial_reason: str | None = None
    result_structured: Mapping[str, Any] | None = None
    result_content: str | None = None
    output_trust: str | None = None
    failure_kind: str | None = None
    reason_code: str | None = None
    retryable: bool | None = None
    failure_detail: Mapping[str, Any] | None = None
    artifact_refs: tuple[Mapping[str, Any], ...] = ()
    created_at: dt.datetime
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    decided_at: dt.datetime | None = None

