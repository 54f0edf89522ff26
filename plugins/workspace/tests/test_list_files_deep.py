"""workspace.list_files over trees a command can make: deeper than the process has file
descriptors to spare, and names that look like the handle's own temp files."""

from __future__ import annotations

import os
from pathlib import Path

from toolhost.testing import open_file_limit
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
