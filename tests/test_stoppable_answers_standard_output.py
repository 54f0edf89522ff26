"""``toolhost.stoppable``: a console script's standard output answered as the host's commands
answer theirs (D338), past the script's own handlers: a full disk is one line and exit 1, a
reader gone quiet 141, a closed one refused before the command runs, argparse's ``--help``
flushed before its exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

#: A console script as a plugin writes one: its own ``except OSError`` stands for "the data
#: directory cannot be used", and it prints once its change is made ("made" on stderr).
SCRIPT = textwrap.dedent("""\
    import argparse, sys
    from toolhost import stoppable

    def command():
        parser = argparse.ArgumentParser(prog="fx-script")
        parser.add_argument("--lines", type=int, default=1)
        args = parser.parse_args()
        try:
            print("made", file=sys.stderr)
            for n in range(args.lines):
                print(f"line {n}")
        except OSError as exc:
            print(f"fx-script: cannot use the data directory: {exc}", file=sys.stderr)
            return 1
        return 0

    sys.exit(stoppable(command, lambda signum: "stopped", prog="fx-script"))
    """)


def _script(redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-c",
                           SCRIPT, *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize("lines", ["1", "100000"])  # at its end, and a write on the way
def test_a_full_disk_is_the_outputs_one_line_not_the_commands_own(lines: str) -> None:
    done = _script(">/dev/full", "--lines", lines)
    assert (done.returncode, done.stderr) == (
        1, "made\nfx-script: cannot write standard output: No space left on device\n")


def test_a_closed_standard_output_is_refused_before_the_command_runs() -> None:
    done = _script(">&-")
    assert (done.returncode, done.stderr) == (
        1, "fx-script: cannot write standard output: it is closed\n")


def test_a_reader_gone_is_quiet_141() -> None:
    with subprocess.Popen([sys.executable, "-c", SCRIPT, "--lines", "100000"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as running:
        assert running.stdout is not None and running.stderr is not None
        running.stdout.close()  # the reader goes away before reading anything
        said = running.stderr.read()
        assert (running.wait(timeout=60), said) == (141, "made\n")


def test_help_on_a_full_disk_is_one_line_and_exit_1() -> None:
    done = _script(">/dev/full", "--help")
    assert (done.returncode, done.stderr) == (
        1, "fx-script: cannot write standard output: No space left on device\n")


def test_the_scripts_output_is_unchanged_when_it_can_be_written() -> None:
    done = _script("", "--lines", "2")
    assert (done.returncode, done.stdout, done.stderr) == (0, "line 0\nline 1\n", "made\n")
