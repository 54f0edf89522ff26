"""The quota's usage walk leaves the access times of the directories it lists alone (D414).

On a relatime file system a listing sets a directory's atime when it is older than its mtime:
a sandboxed command that had just changed a directory could poll its atime and learn the
moment the walk passed it, the clock a trap needs to move data out of each listing just as it
happens (D398). The walk opens each directory with O_NOATIME where the kernel allows it (the
owner, or root). Real files on the test's file system; the check is skipped where the mount
never updates an atime on a listing (noatime), since nothing could then fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolhost._adapters.fs_workspace import WorkspaceHandle

OLD = 1_000_000_000  # 2001: older than any mtime the test makes


def _stale_atimes(root: Path) -> list[Path]:
    """Directories under ``root`` (and itself) whose atime is older than their mtime."""
    dirs = [root, *(p for p in sorted(root.rglob("*")) if p.is_dir())]
    for d in dirs:
        os.utime(d, (OLD, d.stat().st_mtime))
    return dirs


def _listing_sets_atimes(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "f").write_bytes(b"")
    _stale_atimes(probe)
    os.listdir(probe)
    return probe.stat().st_atime != OLD


def test_the_usage_walk_leaves_each_listed_directorys_atime_alone(tmp_path: Path) -> None:
    if not _listing_sets_atimes(tmp_path):
        pytest.skip("this file system never sets an atime on a listing")
    root = tmp_path / "ws"
    for path in ("a/b/c", "a/d", "e"):
        (root / path).mkdir(parents=True)
        (root / path / "data").write_bytes(b"x" * 4096)
    dirs = _stale_atimes(root)
    with WorkspaceHandle(root) as handle:
        usage = handle.usage(max_bytes=1 << 30, max_entries=1000, max_depth=100)
    assert usage.complete and usage.entries == 8
    assert {str(d.relative_to(tmp_path)): d.stat().st_atime for d in dirs} == {
        str(d.relative_to(tmp_path)): OLD for d in dirs}
