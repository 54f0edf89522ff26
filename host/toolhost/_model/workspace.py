"""Workspace values: what the Workspace port returns and raises, and the null workspace of a
run that has none."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any, NoReturn

import attrs

from toolhost._model.errors import ToolhostError

__all__ = [
    "MAX_PATH_BYTES",
    "NO_WORKSPACE",
    "READ_CHUNK",
    "ListedEntry",
    "Listing",
    "Provenance",
    "RunEnded",
    "WorkspaceEscape",
    "WorkspaceIsDirectory",
    "WorkspaceNotDirectory",
    "WorkspaceNotFound",
    "WorkspaceUnavailable",
    "WorkspaceUsage",
    "WriteResult",
    "provenance_of",
]

MAX_PATH_BYTES = 4096
READ_CHUNK = 64 * 1024

class WorkspaceEscape(ToolhostError):
    """A path that is not a plain relative path to a regular file or directory in the root."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WorkspaceNotFound(ToolhostError):
    """No such path in the workspace."""


class WorkspaceUnavailable(ToolhostError):
    """The workspace cannot be used right now, whatever the path: no space or no file handles
    left, a read-only or failing filesystem, a run directory that cannot be created. Not the
    caller's fault and not the path's (those are ``WorkspaceEscape``); a retry may succeed.
    ``reason`` is one static line for operators."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RunEnded(WorkspaceUnavailable):
    """The run was ended (``toolhost runs end``, D529) after this call started and before it
    reached for the workspace: the run stays ended, so no retry of the call can use it. The
    pipeline ends the call as cancelled with the run, not as a workspace to try again."""


class WorkspaceIsDirectory(ToolhostError):
    """The path names a directory where a file was wanted."""


class WorkspaceNotDirectory(ToolhostError):
    """The path names a file where a directory was wanted."""


class Provenance(enum.Enum):
    """Who produced a workspace file's bytes. Only writes establish it; reads never do."""

    UNKNOWN = "UNKNOWN"
    TOOL_WRITTEN = "TOOL_WRITTEN"
    SANDBOX_WRITTEN = "SANDBOX_WRITTEN"


@attrs.frozen
class WriteResult:
    path: str
    byte_count: int
    created: bool


@attrs.frozen
class ListedEntry:
    path: str
    kind: str  # "file" or "directory"
    byte_count: int


@attrs.frozen
class Listing:
    entries: tuple[ListedEntry, ...]
    truncated: bool


@attrs.frozen
class WorkspaceUsage:
    """One measurement of what a workspace holds (``SandboxWorkspace.usage``): disk blocks in
    bytes, each inode once; entries of any type; ``depth``, how many directory levels below
    the root the walk entered (``a/b`` entered: 2). ``complete`` is False when the walk stopped early (a limit
    passed, a directory moved or unreadable): the figures are then what it counted so far."""

    disk_bytes: int
    entries: int
    depth: int
    complete: bool


class _NoWorkspace:
    """The workspace of a run that has none (a run built by hand): every use is refused the
    way a path outside the root is, so a tool needs no special case for it."""

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise WorkspaceEscape("this run has no workspace")

    read = read_chunks = write = listdir = sandbox_root = usage = _refuse

    def provenance(self, path: str) -> Provenance:
        return Provenance.UNKNOWN


NO_WORKSPACE: Any = _NoWorkspace()


def provenance_of(chunks: Iterator[bytes]) -> Provenance:
    """Whose bytes a read returned (``Workspace.read_chunks``), judged on the descriptor it
    read: the chunks' own ``provenance()`` when they have one (``ProvenancedChunks``: the
    host's handle), UNKNOWN otherwise. Ask it after the last chunk: a tool that hands bytes
    on with a trust takes it from here, never from ``Workspace.provenance(path)`` asked after
    the read, which a directory swapped in for the read and back passes."""
    said = getattr(chunks, "provenance", None)
    found = said() if callable(said) else None
    return found if isinstance(found, Provenance) else Provenance.UNKNOWN
