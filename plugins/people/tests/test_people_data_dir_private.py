"""``toolhost-people``'s commands may be a fresh data directory's first: the directories they
make are private (0700) as the host's own are, whatever the umask, since the host never
changes a data directory that exists (D254)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from people_support import people_command


def _directory_modes(root: Path) -> dict[str, str]:
    """The octal mode of ``root`` and of every directory under it, by path from ``root``'s
    parent."""
    return {p.relative_to(root.parent).as_posix(): f"{stat.S_IMODE(p.stat().st_mode):o}"
            for p in (root, *root.rglob("*")) if p.is_dir()}


@pytest.mark.parametrize("args", [
    ("link", "anna@example.org", "bob@example.net"),
    ("me", "anna@example.org"),
    ("links",),
])
def test_a_first_command_makes_every_directory_private(tmp_path: Path,
                                                       args: tuple[str, ...]) -> None:
    root = tmp_path / "data"
    # 022, the usual umask (the script inherits it): mkdir(parents=True) under it left the
    # data directory and the links 0755.
    previous = os.umask(0o022)
    try:
        done = people_command(root, *args)
    finally:
        os.umask(previous)
    assert (done.returncode, done.stderr) == (0, "")
    assert _directory_modes(root) == {"data": "700", "data/plugins": "700",
                                      "data/plugins/toolhost-people": "700"}
