"""toolhost: a plugin-based tool host for LLM agents.

The public plugin API. Importing this package loads no plugin; ``toolhost.host.load_host()``
does, when a command needs it.
"""

from toolhost.clock import Clock, FixedClock, ScriptedClock, SystemClock
from toolhost.hookspecs import hookimpl
from toolhost.outcome import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    ToolFailureKind,
    ToolOutput,
    ToolValidationError,
)
from toolhost.services import Principal, Services, ToolCallable, ToolExecutionContext
from toolhost.settings import Settings
from toolhost.spec import (
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
