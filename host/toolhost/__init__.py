"""toolhost: a plugin-based tool host for LLM agents.

The public plugin API, version 1.0: everything a plugin needs is importable from here, and
everything its tests need from ``toolhost.testing``. Every other module is private. Importing
this package loads no plugin.
"""

from toolhost._model.artifacts import (
    ArtifactOrigin,
    ArtifactRef,
    ArtifactTooLarge,
    ArtifactUnavailable,
)
from toolhost._model.context import Principal, Services, ToolCallable, ToolExecutionContext
from toolhost._model.digest import sha256_checksum
from toolhost._model.outcome import (
    HARD_OUTPUT_CEILING,
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    ToolFailureKind,
    ToolOutput,
    ToolValidationError,
)
from toolhost._model.secrets import Secret
from toolhost._model.settings import Settings
from toolhost._model.spec import (
    Domain,
    Idempotency,
    Kind,
    Reason,
    Risk,
    SchemaRule,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
)
from toolhost._model.workspace import (
    ListedEntry,
    Listing,
    Provenance,
    WorkspaceEscape,
    WorkspaceIsDirectory,
    WorkspaceNotDirectory,
    WorkspaceNotFound,
    WorkspaceUnavailable,
    WriteResult,
)
from toolhost._ports.cancellation import Cancellation
from toolhost._ports.clock import Clock
from toolhost._ports.tool_artifacts import ArtifactReader, ArtifactStream, ArtifactWriter
from toolhost._ports.workspace import Workspace
from toolhost.hookspecs import hookimpl

__all__ = [
    "HARD_OUTPUT_CEILING",
    "ArtifactOrigin",
    "ArtifactReader",
    "ArtifactRef",
    "ArtifactStream",
    "ArtifactTooLarge",
    "ArtifactUnavailable",
    "ArtifactWriter",
    "Cancellation",
    "Clock",
    "Domain",
    "FailureInfo",
    "Idempotency",
    "Kind",
    "ListedEntry",
    "Listing",
    "Outcome",
    "OutcomeStatus",
    "Principal",
    "Provenance",
    "Reason",
    "Risk",
    "SchemaRule",
    "Secret",
    "Services",
    "Settings",
    "SideEffect",
    "Source",
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
    "Workspace",
    "WorkspaceEscape",
    "WorkspaceIsDirectory",
    "WorkspaceNotDirectory",
    "WorkspaceNotFound",
    "WorkspaceUnavailable",
    "WriteResult",
    "hookimpl",
    "sha256_checksum",
]

#: The plugin API version this host implements (``hookspecs`` documents what changed).
PLUGIN_API_VERSION = "1.0"

__version__ = "0.2.0"
