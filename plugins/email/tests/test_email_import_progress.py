"""``toolhost-email import`` shows the messages read as one line on a terminal, rewritten in
place and cleared before the report; on a pipe (a script, a log) it writes nothing more than it
did. Run as the operator runs it: the console script in a subprocess, its stderr a real
pseudo-terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mail_support import OWNER, mail, write_mbox
from toolhost.testing import run_on_a_terminal

REWRITE = "\r\x1b[K"
MESSAGES = 5


def _import(tmp_path: Path, *, on_terminal: bool) -> tuple[int, str, str]:
    source = write_mbox(tmp_path / "in.mbox", [mail(message_id=f"<m{n}@example.org>")
                                              for n in range(MESSAGES)])
    argv = [sys.executable, "-m", "toolhost_email.cli", "import", "--account", OWNER,
            str(source)]
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(tmp_path / "data")}
    if not on_terminal:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        return done.returncode, done.stdout, done.stderr
    return run_on_a_terminal(argv, env)


def test_the_messages_read_on_a_terminal(tmp_path: Path) -> None:
    code, out, err = _import(tmp_path, on_terminal=True)
    assert code == 0, err
    assert out.startswith(f"imported {tmp_path / 'in.mbox'} as {OWNER}: {MESSAGES} read")
    assert err.split(REWRITE) == ["", *(f"toolhost-email import: {n} messages read"
                                        for n in range(1, MESSAGES + 1)), ""]


def test_nothing_more_on_a_pipe(tmp_path: Path) -> None:
    code, out, err = _import(tmp_path, on_terminal=False)
    assert (code, err) == (0, "")
    assert f"{MESSAGES} read, {MESSAGES} added" in out
