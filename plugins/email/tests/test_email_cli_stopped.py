"""``toolhost-email`` stopped by Ctrl-C, SIGTERM or SIGHUP mid-import: one line and exit
128 + the signal's number, as the host's commands, never a traceback or a death by the
signal; and nothing of the source stored (D153), so importing it again adds all of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import OWNER, mail, write_mbox
from toolhost_email import open_mail_cache

#: ``toolhost-email`` that sends itself SEND_SIGNAL once the import has stored rows in its
#: transaction: the moment an operator's Ctrl-C could land.
SIGNALLED = textwrap.dedent("""\
    import os, sys, time
    from toolhost_email import importer
    from toolhost_email.cli import main

    add = importer._Batches.add

    def stored_then_stopped(self, *args, **kwargs):
        add(self, *args, **kwargs)
        self.finish()
        assert self.added, "nothing stored yet: the signal would prove nothing"
        os.kill(os.getpid(), int(os.environ["SEND_SIGNAL"]))
        time.sleep(30)

    importer._Batches.add = stored_then_stopped
    raise SystemExit(main(sys.argv[1:]))
    """)


def _default_signals() -> None:  # as a terminal's process has them, whoever runs pytest
    for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, signal.SIG_DFL)


def _import(data_root: Path, source: Path, script: list[str],
            **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *script, "import", "--account", OWNER, str(source)],
        env={**os.environ, "TOOLHOST_DATA_DIR": str(data_root), "TOOLHOST_CONFIG": "", **env},
        capture_output=True, text=True, timeout=60, check=False, preexec_fn=_default_signals)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_import_is_one_line_its_exit_code_and_nothing_stored(
    tmp_path: Path, signum: signal.Signals,
) -> None:
    # Regression: Ctrl-C printed a 20-line traceback and the process died by SIGINT;
    # SIGTERM and SIGHUP killed it where it stood.
    root = tmp_path / "data"
    source = write_mbox(tmp_path / "in.mbox", [mail(message_id=f"<m{n}@example.org>",
                                                    subject=f"message {n}")
                                               for n in range(3)])
    stopped = _import(root, source, ["-c", SIGNALLED], SEND_SIGNAL=str(int(signum)))
    assert (stopped.returncode, stopped.stdout) == (128 + signum, "")
    assert stopped.stderr == (
        f"toolhost-email: stopped by {signum.name}: nothing was left half-done (an import "
        "stores all of a source or none of it: run the command again)\n")
    with open_mail_cache(cache_dir(root)) as cache:
        assert list(cache.messages()) == []
    again = _import(root, source, ["-m", "toolhost_email.cli"])
    assert (again.returncode, again.stderr) == (0, "")
    assert ": 3 read, 3 added, 0 already cached" in again.stdout
