"""A command started on a full disk: SQLite reports the ENOSPC of sizing the -shm or the -wal
as an I/O error (SQLITE_IOERR_SHMSIZE, _WRITE, _TRUNCATE), not SQLITE_FULL, so the one line
must tell a full disk from a failing one by the free space, and say what to do either way.

The full disk is a real one: a 300 KiB tmpfs mounted in a mount namespace of the command's
own (``unshare``, unprivileged where user namespaces are allowed), filled, the record on it.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from toolhost._adapters.sqlite_db import DATABASE_NAME, unusable_database
from toolhost.testing import run_toolhost, toolhost_command

CALL = ("call", "math.calculate", "--args", '{"expression": "1+2"}')

#: Mounts a small tmpfs at $1, records one call on it, fills it, then runs the call again.
_ON_A_FULL_DISK = """
mount -t tmpfs -o size=300k tmpfs "$1" || exit 99
shift
"$@" >/dev/null 2>&1 || exit 98
cat /dev/zero > "$TOOLHOST_DATA_DIR/../filler" 2>/dev/null
exec "$@"
"""


def _unshare() -> list[str]:
    command = ["unshare", "--map-root-user", "--mount"]
    try:
        works = subprocess.run([*command, "true"], capture_output=True, check=False).returncode
    except OSError:
        works = 1
    if works != 0:
        pytest.skip("no mount namespace for this user (unshare --map-root-user --mount)")
    return command


def test_a_full_disk_at_start_is_said_to_be_full(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    data = mount / "d"
    result = run_toolhost(
        *CALL, data_dir=data, plugins="toolhost-math",
        command=[*_unshare(), "sh", "-c", _ON_A_FULL_DISK, "sh", str(mount),
                 *toolhost_command()])
    assert result.returncode != 99, "mount failed: " + result.stderr
    assert result.returncode != 98, "the first call failed"
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", f"toolhost: cannot write the database {data / DATABASE_NAME}: the disk is "
        "full; free space, or set TOOLHOST_DATA_DIR to another directory\n")


def test_an_io_error_with_space_left_says_the_disk_failed(tmp_path: Path) -> None:
    # A failing disk (EIO) is not made on demand: SQLite's own error, as it raises it.
    failed = sqlite3.OperationalError("disk I/O error")
    failed.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE
    failed.sqlite_errorname = "SQLITE_IOERR_WRITE"
    database = tmp_path / DATABASE_NAME
    assert str(unusable_database(database, failed)) == (
        f"cannot write the database {database}: the disk under it failed (SQLITE_IOERR_WRITE); "
        "check the disk, or set TOOLHOST_DATA_DIR to another directory")
