"""Workspace values: what the Workspace port returns and raises, the null workspace of a
run that has none, and the view of the run's workspace one call's body is given."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard

import attrs

from toolhost._model.errors import ToolhostError

if TYPE_CHECKING:
    from toolhost._ports.workspace import RunBoundWorkspace, SandboxWorkspace, Workspace

__all__ = [
    "MAX_PATH_BYTES",
    "NO_WORKSPACE",
    "READ_CHUNK",
    "CallEnded",
    "CallScope",
    "CallWorkspace",
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
    "call_workspace",
    "provenance_of",
    "run_check",
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


class CallEnded(WorkspaceUnavailable):
    """The call this handle was given to has ended (succeeded, failed, timed out or was
    cancelled): a body still running after it, or a thread it started, is refused its call's
    workspace and artifact writer, whether to write or to read. Its call's answer is given
    already, and a retry may be running in the same workspace."""


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


def _bound_to_run(workspace: object) -> TypeGuard[RunBoundWorkspace]:
    """Whether ``workspace`` knows if its run is still live (``RunBoundWorkspace``, optional
    on the port). Asked of the attribute, never ``isinstance``: a runtime Protocol check
    skips ``__getattr__``, so a delegating wrapper would read as a workspace without it."""
    return callable(getattr(workspace, "check_live", None))


def _always_live() -> None:
    """A workspace without a run (a test's handle, a plugin's fake, none) never ends."""


def run_check(workspace: object) -> Callable[[], None]:
    """What a call checks before it publishes as its run's: the run's workspace's
    ``check_live`` (``RunEnded`` once the run has ended, D529), else a check that passes."""
    return workspace.check_live if _bound_to_run(workspace) else _always_live


_CALL_ENDED = "the call has ended"


class CallScope:
    """How long one call's handles work: from the call's start until the pipeline has its
    outcome (the body returned or raised, its deadline passed, it was cancelled) and calls
    ``end``. ``check`` then refuses, for the call's workspace and artifact writer alike."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = False

    def end(self) -> None:
        self.ended = True

    def check(self) -> None:
        """:raises CallEnded: the call has ended."""
        if self.ended:
            raise CallEnded(_CALL_ENDED)


class CallWorkspace:
    """The run's workspace as one call's body has it (``context.workspace``): each
    operation is handed on while the call runs (``CallScope``) and refused with
    ``CallEnded`` once it has ended. A sync body abandoned at its deadline, or a thread a
    body started, would otherwise go on writing the run's workspace beside the call's
    retry, or reading it, which claims the run a fresh generation after a pause. A read
    already under way (``read_chunks``' chunks) finishes: it holds its own descriptor."""

    __slots__ = ("_scope", "_workspace")

    def __init__(self, workspace: Workspace, scope: CallScope) -> None:
        self._workspace = workspace
        self._scope = scope

    def read(self, path: str) -> bytes:
        self._scope.check()
        return self._workspace.read(path)

    def read_chunks(self, path: str, chunk_size: int = READ_CHUNK) -> Iterator[bytes]:
        self._scope.check()
        return self._workspace.read_chunks(path, chunk_size)

    def write(self, path: str, data: bytes, *,
              provenance: Provenance = Provenance.TOOL_WRITTEN) -> WriteResult:
        self._scope.check()
        return self._workspace.write(path, data, provenance=provenance)

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        self._scope.check()
        return self._workspace.listdir(path, recursive=recursive, limit=limit)

    def provenance(self, path: str) -> Provenance:
        self._scope.check()
        return self._workspace.provenance(path)


class _CallSandboxWorkspace(CallWorkspace):
    """``CallWorkspace`` over a workspace a sandbox can run over. A ``sandbox_root`` block
    entered while the call ran still ends as its own (its files' provenance recorded); a
    sandbox's quota measured after the end is refused, which kills that sandbox."""

    __slots__ = ()
    _workspace: SandboxWorkspace

    def sandbox_root(self) -> AbstractContextManager[int]:
        self._scope.check()
        return self._workspace.sandbox_root()

    def usage(self, *, max_bytes: int, max_entries: int, max_depth: int) -> WorkspaceUsage:
        self._scope.check()
        return self._workspace.usage(max_bytes=max_bytes, max_entries=max_entries,
                                     max_depth=max_depth)


def call_workspace(workspace: Workspace, scope: CallScope) -> CallWorkspace:
    """``workspace`` as a call bound to ``scope`` has it: with ``sandbox_root`` and ``usage``
    exactly when ``workspace`` has them, as a sandboxed tool asks (else it fails closed)."""
    if callable(getattr(workspace, "sandbox_root", None)) and callable(
            getattr(workspace, "usage", None)):
        return _CallSandboxWorkspace(workspace, scope)
    return CallWorkspace(workspace, scope)
