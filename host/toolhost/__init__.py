"""toolhost: a plugin-based tool host for LLM agents.

The public plugin API, version 1.9: everything a plugin needs is importable from here, and
everything its tests need from ``toolhost.testing``. Every other module is private. Importing
this package loads no plugin.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolhost._cli.common import stoppable
    from toolhost._cli.progress_line import ProgressLine
    from toolhost._model.artifacts import (
        MAX_ATTACHED_BYTES,
        ArtifactOrigin,
        ArtifactRef,
        ArtifactTooLarge,
        ArtifactUnavailable,
    )
    from toolhost._model.context import Principal, Services, ToolCallable, ToolExecutionContext
    from toolhost._model.data_layout import make_private_dirs
    from toolhost._model.digest import sha256_checksum
    from toolhost._model.file_names import MAX_FILE_NAME_BYTES, file_name_problem
    from toolhost._model.media_types import MediaType, media_type_for
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
    from toolhost._model.printable import escaped, not_utf8
    from toolhost._model.secrets import Secret
    from toolhost._model.setting_spec import SettingSpec
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
        UserWords,
    )
    from toolhost._model.typed import tool
    from toolhost._model.typed_schema import Doc, MaxLen, MinLen, Pattern, Range
    from toolhost._model.workspace import (
        ListedEntry,
        Listing,
        Provenance,
        WorkspaceEscape,
        WorkspaceIsDirectory,
        WorkspaceNotDirectory,
        WorkspaceNotFound,
        WorkspaceUnavailable,
        WorkspaceUsage,
        WriteResult,
        provenance_of,
    )
    from toolhost._ports.cancellation import Cancellation
    from toolhost._ports.clock import Clock
    from toolhost._ports.tool_artifacts import ArtifactReader, ArtifactStream, ArtifactWriter
    from toolhost._ports.workspace import ProvenancedChunks, SandboxWorkspace, Workspace
    from toolhost.hookspecs import hookimpl

__all__ = [
    "HARD_OUTPUT_CEILING",
    "MAX_ATTACHED_BYTES",
    "MAX_FILE_NAME_BYTES",
    "ArtifactOrigin",
    "ArtifactReader",
    "ArtifactRef",
    "ArtifactStream",
    "ArtifactTooLarge",
    "ArtifactUnavailable",
    "ArtifactWriter",
    "Cancellation",
    "Clock",
    "Doc",
    "Domain",
    "FailureInfo",
    "Idempotency",
    "Kind",
    "ListedEntry",
    "Listing",
    "MaxLen",
    "MediaType",
    "MinLen",
    "Outcome",
    "OutcomeStatus",
    "Pattern",
    "Principal",
    "ProgressLine",
    "Provenance",
    "ProvenancedChunks",
    "Range",
    "Reason",
    "Risk",
    "SandboxWorkspace",
    "SchemaRule",
    "Secret",
    "Services",
    "SettingSpec",
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
    "UserWords",
    "Workspace",
    "WorkspaceEscape",
    "WorkspaceIsDirectory",
    "WorkspaceNotDirectory",
    "WorkspaceNotFound",
    "WorkspaceUnavailable",
    "WorkspaceUsage",
    "WriteResult",
    "escaped",
    "file_name_problem",
    "hookimpl",
    "make_private_dirs",
    "media_type_for",
    "not_utf8",
    "provenance_of",
    "sha256_checksum",
    "stoppable",
    "tool",
]

#: The plugin API version this host implements (``hookspecs`` documents what changed).
PLUGIN_API_VERSION = "1.9"

__version__ = "0.5.0"

#: Where each public name lives. The names load on first use (PEP 562), so a command that
#: needs few of them (``toolhost check``, ``--help``) does not import every value module.
_HOME = {
    "ArtifactOrigin": "toolhost._model.artifacts",
    "ArtifactReader": "toolhost._ports.tool_artifacts",
    "ArtifactRef": "toolhost._model.artifacts",
    "ArtifactStream": "toolhost._ports.tool_artifacts",
    "ArtifactTooLarge": "toolhost._model.artifacts",
    "ArtifactUnavailable": "toolhost._model.artifacts",
    "ArtifactWriter": "toolhost._ports.tool_artifacts",
    "Cancellation": "toolhost._ports.cancellation",
    "Clock": "toolhost._ports.clock",
    "Doc": "toolhost._model.typed_schema",
    "Domain": "toolhost._model.spec",
    "FailureInfo": "toolhost._model.outcome",
    "HARD_OUTPUT_CEILING": "toolhost._model.outcome",
    "MAX_ATTACHED_BYTES": "toolhost._model.artifacts",
    "MAX_FILE_NAME_BYTES": "toolhost._model.file_names",
    "Idempotency": "toolhost._model.spec",
    "Kind": "toolhost._model.spec",
    "ListedEntry": "toolhost._model.workspace",
    "MaxLen": "toolhost._model.typed_schema",
    "MinLen": "toolhost._model.typed_schema",
    "MediaType": "toolhost._model.media_types",
    "Listing": "toolhost._model.workspace",
    "Outcome": "toolhost._model.outcome",
    "OutcomeStatus": "toolhost._model.outcome",
    "Pattern": "toolhost._model.typed_schema",
    "Principal": "toolhost._model.context",
    "ProgressLine": "toolhost._cli.progress_line",
    "Provenance": "toolhost._model.workspace",
    "ProvenancedChunks": "toolhost._ports.workspace",
    "Range": "toolhost._model.typed_schema",
    "Reason": "toolhost._model.spec",
    "Risk": "toolhost._model.spec",
    "SandboxWorkspace": "toolhost._ports.workspace",
    "SchemaRule": "toolhost._model.spec",
    "Secret": "toolhost._model.secrets",
    "Services": "toolhost._model.context",
    "SettingSpec": "toolhost._model.setting_spec",
    "Settings": "toolhost._model.settings",
    "SideEffect": "toolhost._model.spec",
    "Source": "toolhost._model.spec",
    "TargetKind": "toolhost._model.spec",
    "Tool": "toolhost._model.spec",
    "UserWords": "toolhost._model.spec",
    "ToolCallable": "toolhost._model.context",
    "ToolExecutionContext": "toolhost._model.context",
    "ToolFailure": "toolhost._model.outcome",
    "ToolFailureKind": "toolhost._model.outcome",
    "ToolOutput": "toolhost._model.outcome",
    "ToolSpec": "toolhost._model.spec",
    "ToolValidationError": "toolhost._model.outcome",
    "Trust": "toolhost._model.spec",
    "Workspace": "toolhost._ports.workspace",
    "WorkspaceEscape": "toolhost._model.workspace",
    "WorkspaceIsDirectory": "toolhost._model.workspace",
    "WorkspaceNotDirectory": "toolhost._model.workspace",
    "WorkspaceNotFound": "toolhost._model.workspace",
    "WorkspaceUnavailable": "toolhost._model.workspace",
    "WorkspaceUsage": "toolhost._model.workspace",
    "WriteResult": "toolhost._model.workspace",
    "escaped": "toolhost._model.printable",
    "file_name_problem": "toolhost._model.file_names",
    "hookimpl": "toolhost.hookspecs",
    "make_private_dirs": "toolhost._model.data_layout",
    "media_type_for": "toolhost._model.media_types",
    "not_utf8": "toolhost._model.printable",
    "provenance_of": "toolhost._model.workspace",
    "sha256_checksum": "toolhost._model.digest",
    "stoppable": "toolhost._cli.common",
    "tool": "toolhost._model.typed",
}


if not TYPE_CHECKING:  # hidden from type checkers: a misspelt name stays an error there

    def __getattr__(name: str) -> object:
        home = _HOME.get(name)
        if home is None:
            raise AttributeError(f"module 'toolhost' has no attribute {name!r}")
        value = getattr(import_module(home), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
