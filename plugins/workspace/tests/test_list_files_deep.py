"""workspace.list_files over trees a command can make: deeper than the process has file
descriptors to spare, paths longer than a tool can name, and names that look like the
handle's own temp files."""

from __future__ import annotations

import os
from pathlib import Path

from toolhost.testing import open_file_limit
from toolhost_workspace.list_files import _fitting
from workspace_support import Call, remove_tree


def test_a_tree_deeper_than_the_spare_fds_is_listed(call: Call, root: Path) -> None:
    """The listing held an fd a level: 300 levels with 64 fds to spare failed the call as
    workspace_unavailable ("too many files are open")."""
    depth = 300
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("end.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
    try:
        with open_file_limit() as limit:
            assert limit < depth
            outcome = call("workspace.list_files", recursive=True)
        assert outcome.ok, outcome.to_json()
        assert outcome.structured is not None
        chain = ["/".join(["d"] * level) for level in range(1, depth + 1)]
        assert [e["path"] for e in outcome.structured["entries"]] == [*chain, chain[-1] + "/end.txt"]
    finally:
        remove_tree(root / "d")


def test_a_file_named_like_a_temp_file_is_listed(call: Call, root: Path) -> None:
    """A command can give a file the name the handle gives its temp files; the listing hid
    every such name, so a command could hide a file from the model."""
    name = ".notes.md.0123456789abcdef0123456789abcdef.tmp"
    (root / name).write_bytes(b"read me\n")
    outcome = call("workspace.list_files")
    assert outcome.ok and outcome.structured is not None
    assert outcome.structured["entries"] == [{"path": name, "kind": "file", "byte_count": 8}]


def test_paths_longer_than_a_tool_can_name_give_the_answer_they_gave(
    call: Call, root: Path,
) -> None:
    """The handle keeps at most (LIMIT + 1) paths' worth of 4096 bytes (255-byte names 1,000
    levels deep made a listing hold 246 MiB); the tool's answer, cut to its
    maximum_output_bytes, is still the first entries of the whole listing, as before."""
    name, depth = "n" * 255, 300
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    try:
        outcome = call("workspace.list_files", recursive=True)
        assert outcome.ok, outcome.to_json()
        assert outcome.structured is not None
        whole = [{"path": "/".join([name] * level), "kind": "directory", "byte_count": 0}
                 for level in range(1, depth + 1)]
        fitting = _fitting("", whole)
        assert 0 < fitting < depth
        assert outcome.structured["entries"] == whole[:fitting]
        assert outcome.structured["truncated"] is True
    finally:
        remove_tree(root / name)
