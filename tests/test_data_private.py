"""The data directory and its databases are this user's alone (issue #26: the record and its
WAL were 0644 in a 0755 directory); one made before, or opened up by hand, is left as it is,
and `toolhost check` (and `serve`, at its start) says so."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from toolhost.testing import run_toolhost

CALL = ["call", "math.calculate", "--args", '{"expression": "6 * 7"}']


def _toolhost(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data_dir, plugins="toolhost-math")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_directory_and_its_databases_are_private(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    done = _toolhost(data, *CALL)
    assert (done.returncode, done.stdout, done.stderr) == (0, "42\n", "")
    assert _mode(data) == 0o700
    databases = sorted(data.glob("toolhost.sqlite3*"))
    assert databases and {_mode(p) for p in databases} == {0o600}


def test_an_existing_wider_one_is_left_as_it_is_and_check_says_so(tmp_path: Path) -> None:
    data = tmp_path / "shared"
    data.mkdir()
    os.chmod(data, 0o755)  # made before toolhost made it private, whatever the umask
    done = _toolhost(data, *CALL)
    assert (done.returncode, done.stdout, done.stderr) == (0, "42\n", "")
    os.chmod(data / "toolhost.sqlite3", 0o644)
    checked = _toolhost(data, "check")
    assert checked.returncode == 0, checked.stderr
    assert [line for line in checked.stdout.splitlines() if line.startswith("not private")] == [
        f"not private: {data} is 755, readable by other users (chmod 700 {data})",
        f"not private: {data / 'toolhost.sqlite3'} is 644, readable by other users "
        f"(chmod 600 {data / 'toolhost.sqlite3'})"]
    assert _mode(data) == 0o755  # the operator's to change: it may be shared on purpose
    os.chmod(data, 0o700)
    os.chmod(data / "toolhost.sqlite3", 0o600)
    assert "not private" not in _toolhost(data, "check").stdout
