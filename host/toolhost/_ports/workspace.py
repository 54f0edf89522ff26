"""The Workspace port: the run's workspace as a tool sees it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

__all__ = [
    "ProvenancedChunks",
    "RunBoundWorkspace",
    "SandboxWorkspace",
    "Workspace",
]

if TYPE_CHECKING:

    from toolhost._model.workspace import Listing, Provenance, WorkspaceUsage, WriteResult

class Workspace(Protocol):
    """The run's workspace. Containment lives here, never in a tool: hand it the caller's
    path string as given. A rejected path raises ``WorkspaceEscape``, which tools do not
    catch (the pipeline turns it into the host's validation failure)."""

    def read(self, path: str) -> bytes:
        """The whole file. Raises WorkspaceEscape, WorkspaceNotFound, WorkspaceIsDirectory."""
        ...

    def read_chunks(self, path: str, chunk_size: int = ...) -> Iterator[bytes]:
        """The file's bytes in chunks, from one descriptor opened and type-checked once. The
        host's handle returns a ``ProvenancedChunks``: after the last chunk it says whose
        bytes were read."""
        ...

    def write(self, path: str, data: bytes, *, provenance: Provenance = ...) -> WriteResult:
        """Write atomically, creating parent directories, and record ``provenance``."""
        ...

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        """Entries in bytewise order of their relative path, at most ``limit``."""
        ...

    def provenance(self, path: str) -> Provenance:
        """TOOL_WRITTEN or SANDBOX_WRITTEN while the file is still the one written; else
        UNKNOWN."""
        ...


class SandboxWorkspace(Workspace, Protocol):
    """A Workspace a sandbox can run over: the host's handle is one. Separate from
    ``Workspace`` so that the public Protocol keeps its five members (D104) and
    a plugin's own test fake of it stays complete; a sandboxed tool checks for
    ``sandbox_root`` and fails closed without it."""

    def sandbox_root(self) -> AbstractContextManager[int]:
        """For a sandbox that runs code in the workspace: ``with workspace.sandbox_root() as
        fd`` gives a directory fd of the root, valid for the block only, to bind as the
        sandbox's one writable directory (``bwrap --bind-fd``; no path string crosses). When
        the block ends, every regular file created or changed during it is recorded
        SANDBOX_WRITTEN (a TOOL_WRITTEN file it replaced included) and set-id bits are
        cleared. End every process that can write there before the block ends."""
        ...

    def usage(self, *, max_bytes: int, max_entries: int, max_depth: int) -> WorkspaceUsage:
        """What the workspace holds now: disk blocks in bytes (each inode once), entries,
        deepest level, measured by the same bounded walk as ``sandbox_root``'s. It stops as
        soon as one figure passes its ``max_*`` (the result is then incomplete). Callable
        from another thread while a ``sandbox_root`` block runs, to enforce a quota."""
        ...


class RunBoundWorkspace(Workspace, Protocol):
    """A run's workspace that knows whether its run is still live: the host's own
    (``RunWorkspace``). Optional, as ``SandboxWorkspace`` is: a workspace without a run (a
    test's handle, a plugin's fake) has no ``check_live``, and ``run_check`` gives a check
    that passes in its place."""

    def check_live(self) -> None:
        """Raise ``RunEnded`` once the run this workspace started in has ended, here or in
        another process: a late call publishes nothing as the ended run's (D529)."""
        ...


@runtime_checkable
class ProvenancedChunks(Protocol):
    """The chunks of one read (``Workspace.read_chunks`` of the host's handle) that can say
    whose bytes they were: ``provenance()`` compares the descriptor actually read with what
    the host's last write (or sandbox) left at the path. ``provenance(path)`` asked before
    and after a read cannot do that: a directory swapped for an outsider's during the read
    and swapped back leaves the path looking like the run's own file.

    A tool that hands on bytes with a trust (``artifact.export``) asks this one, after the
    last chunk, and treats chunks that are not a ``ProvenancedChunks`` as UNKNOWN."""

    def __iter__(self) -> Iterator[bytes]: ...

    def __next__(self) -> bytes: ...

    def provenance(self) -> Provenance:
        """TOOL_WRITTEN or SANDBOX_WRITTEN only if the bytes read came from the file the host
        stamped at the path and it did not change while being read; else UNKNOWN (also
        before the first chunk, and once the chunks were closed before the last)."""
        ...
