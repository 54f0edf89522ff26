"""Helpers the workspace tests share (a module with a name of its own: two plugins' test
directories each have a conftest, so importing from "conftest" is ambiguous)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from toolhost import Outcome
from toolhost._host import Host
from toolhost.testing import host_for
from toolhost_workspace import plugin

ALL_TOOLS = ("workspace.read_text", "workspace.write_text", "workspace.list_files")
SECRET = b"outside the root\n"

Call = Callable[..., Outcome]


def make_host(data_dir: Path) -> Host:
    return host_for({"toolhost-workspace": plugin}, data_dir=data_dir)


def remove_tree(path: Path) -> None:
    """Remove a directory tree of any depth, never following a symlink.

    Iterative on purpose: write_text may create a path of 4096 characters, about 2000
    directories deep, and ``shutil.rmtree`` (and so the host's ``WorkspaceHandle.discard`` and
    pytest's own temporary-directory cleanup) recurses once a level and raises RecursionError
    on such a tree on Python 3.11. The tests remove what they create with this instead.
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
