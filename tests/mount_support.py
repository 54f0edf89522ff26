"""What the tests of sized workspaces share: the mounts under a directory."""

from __future__ import annotations

from pathlib import Path


def mounts_under(path: Path) -> list[str]:
    """The mount points at or under ``path``, as this process's mount table lists them."""
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(path))]

