"""``toolhost-email import`` is often a fresh data directory's first command: the directories
it makes are private (0700) as the host's own are, whatever the umask, since the host never
changes a data directory that exists (D254)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from mail_support import OWNER, mail, write_mbox


def _directory_modes(root: Path) -> dict[str, str]:
    """The octal mode of ``root`` and of every directory under it, by path from ``root``'s
    parent."""
    return {p.relative_to(root.parent).as_posix(): f"{stat.S_IMODE(p.stat().st_mode):o}"
            for p in (root, *root.rglob("*")) if p.is_dir()}


def test_import_into_a_fresh_data_directory_makes_every_directory_private(
        tmp_path: Path) -> None:
    root = tmp_path / "data"
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    script = Path(sys.executable).with_name("toolhost-email")
    # 022, the usual umask: mkdir(parents=True) under it left the owner's mail cache 0755.
    done = subprocess.run([str(script), "import", "--account", OWNER, str(src)],
                          env={**os.environ, "TOOLHOST_DATA_DIR": str(root)}, umask=0o022,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert _directory_modes(root) == {"data": "700", "data/plugins": "700",
                                      "data/plugins/toolhost-email": "700"}
