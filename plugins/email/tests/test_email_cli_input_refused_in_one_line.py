"""``toolhost-email`` refuses a value that is not UTF-8 text and a path it cannot even look
at as it refuses a missing path: one line on stderr, exit 2, never a traceback (D341)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mail_support import OWNER, mail, write_mbox

#: The byte 0xff on the command line, as Python hands it over (a lone surrogate).
NOT_UTF8 = "\udcff"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "toolhost_email.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(("args", "name"), [
    (("erase", "--account", NOT_UTF8), "--account"),
    (("erase", "--thread", NOT_UTF8), "--thread"),
    (("erase", "--message", NOT_UTF8), "--message"),
    (("erase", "--owner", NOT_UTF8), "--owner"),
    (("feedback", "undo", NOT_UTF8), "ID"),
    (("owners", "set", OWNER, NOT_UTF8), "PRINCIPAL"),
    (("owners", "set", "--unowned", NOT_UTF8), "PRINCIPAL"),
])
def test_a_value_that_is_not_utf8_is_one_line_and_exit_2(
        tmp_path: Path, args: tuple[str, ...], name: str) -> None:
    # Regression: a UnicodeEncodeError traceback at the database, exit 1.
    done = _cli(tmp_path, *args)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"toolhost-email: argument {name}: b'\\xff' is not UTF-8 text\n")


def test_an_owner_that_is_not_utf8_is_refused_before_the_import(tmp_path: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail()])
    done = _cli(tmp_path, "import", "--account", OWNER, "--owner", NOT_UTF8, str(src))
    assert (done.returncode, done.stderr) == (
        2, "toolhost-email: argument --owner: b'\\xff' is not UTF-8 text\n")
    assert not (tmp_path / "data").exists()  # nothing was opened, let alone imported


def test_a_path_name_too_long_is_one_line_and_exit_2(tmp_path: Path) -> None:
    # Regression: is_dir() raised OSError (ENAMETOOLONG), a traceback and exit 1.
    too_long = tmp_path / ("A" * 300)
    done = _cli(tmp_path, "import", "--account", OWNER, str(too_long))
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"toolhost-email: {too_long} could not be read (OSError); nothing of it was "
               "imported\n")
