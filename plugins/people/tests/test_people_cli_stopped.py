"""``toolhost-people`` stopped by Ctrl-C, SIGTERM or SIGHUP mid-change: one line and exit
128 + the signal's number, as the host's commands, never a traceback or a death by the
signal; and the change rolled back whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from people_support import people_command

#: ``toolhost-people`` that sends itself SEND_SIGNAL once ``link`` has written the merged
#: group in its transaction: the moment an operator's Ctrl-C could land.
SIGNALLED = textwrap.dedent("""\
    import os, sys, time
    from toolhost_people import links
    from toolhost_people.cli import main

    store = links._store

    def stored_then_stopped(conn, merged):
        store(conn, merged)
        os.kill(os.getpid(), int(os.environ["SEND_SIGNAL"]))
        time.sleep(30)

    links._store = stored_then_stopped
    raise SystemExit(main(sys.argv[1:]))
    """)


def _default_signals() -> None:  # as a terminal's process has them, whoever runs pytest
    for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_link_is_one_line_its_exit_code_and_nothing_linked(
    tmp_path: Path, signum: signal.Signals,
) -> None:
    # Regression: Ctrl-C was a traceback and a death by SIGINT; SIGTERM and SIGHUP killed it
    # where it stood.
    data = tmp_path / "data"
    stopped = subprocess.run(
        [sys.executable, "-c", SIGNALLED, "link", "a@example.org", "b@example.org"],
        env={**os.environ, "TOOLHOST_DATA_DIR": str(data), "TOOLHOST_CONFIG": "",
             "SEND_SIGNAL": str(int(signum))},
        capture_output=True, text=True, timeout=60, check=False, preexec_fn=_default_signals)
    assert (stopped.returncode, stopped.stdout) == (128 + signum, "")
    assert stopped.stderr == (
        f"toolhost-people: stopped by {signum.name}: nothing was left half-done (each change "
        "is one transaction: run the command again)\n")
    assert people_command(data, "links").stdout == ""
    again = people_command(data, "link", "a@example.org", "b@example.org")
    assert (again.returncode, again.stdout) == (0, "linked: a@example.org b@example.org\n")
