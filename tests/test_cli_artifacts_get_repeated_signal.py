"""A SIGTERM repeated at once during ``artifacts get -o FILE`` is one request (D513): GNU
``timeout`` sends SIGTERM to its child and then to the child's group microseconds apart, and the
second must not kill the command while it removes its partial temp file. An operator's second
signal later, or another signal, still stops at once (D337). Real processes, a real data
directory, the artifact streamed in several chunks."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from toolhost._cli.common import SAME_REQUEST_S
from toolhost.testing import run_toolhost

#: ``toolhost`` whose get, once its first chunk is written, is sent ``FIRST`` and, ``GAP_S``
#: later, ``SECOND`` (from a thread: both reach the process as a ``kill`` from outside does),
#: and whose removal of the temp file takes ``UNLINK_S``: a slow disk's cleanup, the window a
#: repeated signal lands in.
SIGNALLED_TWICE = textwrap.dedent("""\
    import os, sys, threading, time
    from toolhost._cli import artifacts
    from toolhost._cli.main import main

    unlink, add = os.unlink, artifacts._Shown.add

    def slow_unlink(path, *args, **kwargs):
        if str(path).endswith(".part"):
            time.sleep(float(os.environ["UNLINK_S"]))
        return unlink(path, *args, **kwargs)

    def send_twice():
        os.kill(os.getpid(), int(os.environ["FIRST"]))
        time.sleep(float(os.environ["GAP_S"]))
        os.kill(os.getpid(), int(os.environ["SECOND"]))

    def signalled(self, chunk):
        add(self, chunk)
        artifacts._Shown.add = add
        threading.Thread(target=send_twice, daemon=True).start()
        time.sleep(30)  # the first signal ends this

    os.unlink = slow_unlink
    artifacts._Shown.add = signalled
    raise SystemExit(main(sys.argv[1:]))
    """)


def _get_signalled(tmp_path: Path, first: int, second: int, gap_s: float,
                   unlink_s: float) -> tuple[int, list[str]]:
    """The exit status of ``artifacts get ID -o out/target`` on a 5 MiB artifact, signalled as
    ``SIGNALLED_TWICE`` says, and what is left in ``out``."""
    source, out, data = tmp_path / "big.bin", tmp_path / "out", tmp_path / "d"
    source.write_bytes(os.urandom(5 * 1024 * 1024))
    uploaded = run_toolhost("artifacts", "upload", str(source), "--conversation", "c1",
                            data_dir=data, plugins="")
    assert uploaded.returncode == 0, uploaded.stderr
    out.mkdir()
    got = run_toolhost("artifacts", "get", uploaded.stdout.strip(), "-o", str(out / "target"),
                       data_dir=data, plugins="", env={
                           "FIRST": str(int(first)), "SECOND": str(int(second)),
                           "GAP_S": str(gap_s), "UNLINK_S": str(unlink_s)},
                       command=[sys.executable, "-c", SIGNALLED_TWICE])
    assert "Traceback" not in got.stderr, got.stderr
    return got.returncode, sorted(os.listdir(out))


def test_a_sigterm_repeated_at_once_leaves_no_partial_file_and_exits_as_sigterm(
    tmp_path: Path,
) -> None:
    # Regression: the first SIGTERM restored the default handler, so timeout(1)'s second, 1 ms
    # later, killed the command while it removed `.target.XXXX.part`, which stayed.
    assert _get_signalled(tmp_path, signal.SIGTERM, signal.SIGTERM, 0.001, 0.3) == (
        128 + signal.SIGTERM, [])


def test_a_sigterm_repeated_later_still_stops_at_once(tmp_path: Path) -> None:
    # D337: an operator's second signal, once the first had time to be one, is "stop now",
    # even in the middle of the cleanup.
    code, _ = _get_signalled(tmp_path, signal.SIGTERM, signal.SIGTERM, SAME_REQUEST_S + 0.3,
                             SAME_REQUEST_S + 30)
    assert code == -signal.SIGTERM


@pytest.mark.parametrize(("first", "second"), [(signal.SIGTERM, signal.SIGHUP),
                                               (signal.SIGHUP, signal.SIGTERM)])
def test_another_signal_at_once_still_stops_at_once(
    tmp_path: Path, first: signal.Signals, second: signal.Signals,
) -> None:
    code, _ = _get_signalled(tmp_path, first, second, 0.001, 30)
    # Stopped at once by whichever of the two Python handled second: both pending before its
    # handler ran (a loaded machine), it takes them in signal-number order, not arrival's.
    assert code in (-first, -second)
