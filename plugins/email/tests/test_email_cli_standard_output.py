"""``toolhost-email`` whose standard output fails, as the host's commands answer it (D338): a
full disk is one line and exit 1 after the change was made, never a traceback; a closed one is
refused before anything is done, never exit 0 with the listing lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mail_support import OWNER, mail, write_mbox

SCRIPT = str(Path(sys.executable).with_name("toolhost-email"))


def _cli(tmp_path: Path, redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``toolhost-email ARGS`` with its standard output redirected as ``redirect`` says."""
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", SCRIPT, *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def _owners(tmp_path: Path) -> str:
    return _cli(tmp_path, "", "owners").stdout


def test_a_full_disk_after_an_import_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # Regression: an OSError traceback after the import was stored.
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    done = _cli(tmp_path, ">/dev/full", "import", "--account", OWNER, str(src))
    assert (done.returncode, done.stderr) == (
        1, "toolhost-email: cannot write standard output: No space left on device\n")
    assert _owners(tmp_path) == f"{OWNER} (no owner)\n"  # the import was made all the same


def test_a_full_disk_after_owners_set_is_one_line_and_exit_1(tmp_path: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    assert _cli(tmp_path, "", "import", "--account", OWNER, str(src)).returncode == 0
    done = _cli(tmp_path, ">/dev/full", "owners", "set", OWNER, "bob")
    assert (done.returncode, done.stderr) == (
        1, "toolhost-email: cannot write standard output: No space left on device\n")
    assert _owners(tmp_path) == f"{OWNER} bob\n"


def test_a_closed_standard_output_is_refused_and_exit_1(tmp_path: Path) -> None:
    # Regression: `owners >&-` exited 0 with its listing lost, as an empty one would.
    done = _cli(tmp_path, ">&-", "owners")
    assert (done.returncode, done.stderr) == (
        1, "toolhost-email: cannot write standard output: it is closed\n")
    assert not (tmp_path / "data").exists()  # refused before anything was opened
