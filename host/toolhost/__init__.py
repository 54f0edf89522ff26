"""toolhost: a plugin-based tool host for LLM agents.

The public plugin API. Importing this package loads no plugin; ``toolhost._host.load_host()``
does, when a command needs it.
"""

from toolhost._clock import Clock, FixedClock, ScriptedClock, SystemClock
from toolhost._outcome import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    ToolFailureKind,
    ToolOutput,
    ToolValidationError,
)
from toolhost._services import Principal, Services, ToolCallable, ToolExecutionContext
from toolhost._settings import Settings
from toolhost._spec import (
    Domain,
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
)
from toolhost.hookspecs import hookimpl

__all__ = [
    "Clock",
    "Domain",
    "FailureInfo",
    "FixedClock",
    "Idempotency",
    "Kind",
    "Outcome",
    "OutcomeStatus",
    "Principal",
    "Risk",
    "ScriptedClock",
    "Services",
    "Settings",
    "SideEffect",
    "Source",
    "SystemClock",
    "TargetKind",
    "Tool",
    "ToolCallable",
    "ToolExecutionContext",
    "ToolFailure",
    "ToolFailureKind",
    "ToolOutput",
    "ToolSpec",
    "ToolValidationError",
    "Trust",
    "hookimpl",
]

__version__ = "0.1.0"
