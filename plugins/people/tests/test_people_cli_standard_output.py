"""``toolhost-people`` whose standard output fails, as the host's commands answer it (D338):
a full disk is one line saying so, exit 1, not the data directory blamed for it after the
change was made; a closed one is refused before anything is done, never exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from people_support import people_command

SCRIPT = str(Path(sys.executable).with_name("toolhost-people"))


def _redirected(data_dir: Path, redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_dir)}
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", SCRIPT, *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_full_disk_after_me_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # Regression: "cannot use the data directory ...: OSError: [Errno 28]", the alias stored.
    done = _redirected(tmp_path, ">/dev/full", "me", "alias@example.com")
    assert (done.returncode, done.stderr) == (
        1, "toolhost-people: cannot write standard output: No space left on device\n")
    assert people_command(tmp_path, "me").stdout == "alias@example.com\n"


def test_a_closed_standard_output_is_refused_and_exit_1(tmp_path: Path) -> None:
    # Regression: `me >&-` exited 0 with its listing lost, as an empty one would.
    done = _redirected(tmp_path, ">&-", "me")
    assert (done.returncode, done.stderr) == (
        1, "toolhost-people: cannot write standard output: it is closed\n")
