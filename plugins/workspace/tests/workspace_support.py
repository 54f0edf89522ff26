"""Helpers the workspace tests share (a module with a name of its own: two plugins' test
directories each have a conftest, so importing from "conftest" is ambiguous).

The host itself comes from the test kit (``toolhost.testing``): the ``toolhost_host`` fixture,
or ``Harness.over(PLUGINS)`` where a test needs one that outlives a single test.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from toolhost import (
    Listing,
    Outcome,
    Provenance,
    ToolExecutionContext,
    Workspace,
    WorkspaceUnavailable,
    WriteResult,
)
from toolhost.testing import ForwardingWorkspace, Run
from toolhost_workspace import plugin

#: What the kit's host runs: this plugin alone, as an object (not the installed set).
PLUGINS: Mapping[str, object] = {"toolhost-workspace": plugin}
SECRET = b"outside the root\n"

Call = Callable[..., Outcome]


class SpyWorkspace(ForwardingWorkspace):
    """A ``Workspace`` that hands every call to the run's real one and records what the tool
    asked for and the chunks it was given, so a test sees the body's side of the port."""

    def __init__(self, real: Workspace, *, keep_chunks: bool = True) -> None:
        super().__init__(real)
        self.keep_chunks = keep_chunks
        self.chunk_sizes: list[int] = []
        self.chunks: list[bytes] = []
        self.bytes_read = 0

    def read_chunks(self, path: str, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        self.chunk_sizes.append(chunk_size)
        for chunk in self.real.read_chunks(path, chunk_size):
            self.bytes_read += len(chunk)
            if self.keep_chunks:
                self.chunks.append(chunk)
            yield chunk


def with_workspace(context: ToolExecutionContext, workspace: Workspace) -> ToolExecutionContext:
    """``context`` with another workspace in it, every other field kept."""
    return ToolExecutionContext(
        run_id=context.run_id, principal=context.principal, workspace=workspace,
        artifacts=context.artifacts, deadline=context.deadline,
        cancellation=context.cancellation, conversation_id=context.conversation_id,
        user_turn=context.user_turn,
    )


def remove_tree(path: Path) -> None:
    """Remove a directory tree of any depth, never following a symlink.

    Iterative on purpose: write_text may create a path of 4096 characters, about 2000
    directories deep, and ``shutil.rmtree`` (and so pytest's own temporary-directory cleanup)
    recurses once a level and raises RecursionError on such a tree on Python 3.11. The tests
    remove what they create with this instead.
    """
    if not os.path.lexists(path):
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    stack: list[tuple[int, int | None, str]] = [(os.open(path, flags), None, "")]
    while stack:
        fd, parent, name = stack[-1]
        child: tuple[int, int | None, str] | None = None
        with os.scandir(fd) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    child = (os.open(entry.name, flags, dir_fd=fd), fd, entry.name)
                    break
                os.unlink(entry.name, dir_fd=fd)
        if child is not None:
            stack.append(child)
            continue
        stack.pop()
        os.close(fd)
        if parent is not None:
            os.rmdir(name, dir_fd=parent)
    os.rmdir(path)


class UnavailableWorkspace(SpyWorkspace):
    """A workspace whose filesystem has failed (no space, no file handles): every file
    operation raises ``WorkspaceUnavailable`` with the handle's static reason."""

    def __init__(self, real: Workspace, reason: str) -> None:
        super().__init__(real)
        self.reason = reason

    def read_chunks(self, path: str, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        raise WorkspaceUnavailable(self.reason)
        yield b""  # pragma: no cover - a generator, like the handle's

    def write(self, path: str, data: bytes, *,
              provenance: Provenance = Provenance.TOOL_WRITTEN) -> WriteResult:
        raise WorkspaceUnavailable(self.reason)

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        raise WorkspaceUnavailable(self.reason)


def in_run(run: Run, workspace: Workspace) -> Run:
    """``run`` with another workspace, so a call through the real pipeline uses it."""
    return attrs.evolve(run, workspace=workspace)

