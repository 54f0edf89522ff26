"""Progress on a terminal: ``ProgressLine`` (the one renderer: ``toolhost call``, ``artifacts
get`` and ``upload``, a plugin's console script) writes one line rewritten in place and cleared
at the end, only when its stream is a terminal. The commands are run with stderr on a real
pseudo-terminal, and again with stderr a pipe, where nothing of it may appear (what scripts
read is unchanged).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolhost import ProgressLine, Settings
from toolhost.testing import run_on_a_terminal, toolhost_command

REWRITE = "\r\x1b[K"
COMMAND_TIMEOUT_S = 120.0


class Terminal(io.StringIO):
    """A stream that says it is a terminal (and has no size: the line is cut at 79)."""

    def isatty(self) -> bool:
        return True


# ------------------------------------------------------------------ the line itself


def test_a_stream_that_is_no_terminal_gets_nothing() -> None:
    out = io.StringIO()
    with ProgressLine("job", stream=out) as line:
        assert not line.active
        line.update(1, 2, "half")
    assert out.getvalue() == ""


def test_the_line_is_rewritten_in_place_only_when_it_changes_and_cleared_at_the_end() -> None:
    out = Terminal()
    with ProgressLine("job", unit="files", stream=out) as line:
        line.update(1, 4)
        line.update(1, 4)                # the same text: not written again
        line.update(2, 4, "b.txt")
    assert out.getvalue() == (f"{REWRITE}job: 1 of 4 files (25%)"
                              f"{REWRITE}job: 2 of 4 files (50%) - b.txt"
                              f"{REWRITE}")


def test_a_closed_line_draws_nothing_more() -> None:
    """A body the caller stopped waiting for may still report from its thread: after the
    block, its updates must not draw over what the command prints next."""
    out = Terminal()
    with ProgressLine("job", stream=out) as line:
        line.update(1, 4)
    line.update(2, 4)
    assert out.getvalue() == f"{REWRITE}job: 1 of 4 (25%){REWRITE}"


@pytest.mark.parametrize(("args", "text"), [
    ((512,), "512 B"),
    ((1536, 4 * 2**20), "1.5 KiB of 4.0 MiB (0%)"),
    ((3 * 2**30, 3 * 2**30, "done"), "3.0 GiB of 3.0 GiB (100%) - done"),
    ((2**50,), "1024.0 TiB"),
])
def test_bytes_read_as_sizes(args: tuple[Any, ...], text: str) -> None:
    assert ProgressLine(unit="bytes", stream=Terminal()).text(*args) == text


def test_numbers_and_messages() -> None:
    line = ProgressLine("x", stream=Terminal())
    assert line.text(12, 300, "12 KiB of output") == "x: 12 of 300 (4%) - 12 KiB of output"
    assert line.text(2.5) == "x: 2.5"
    assert line.text(0, 0) == "x: 0 of 0"


def test_control_characters_cannot_move_the_cursor() -> None:
    out = Terminal()
    with ProgressLine("a\x1b[2Jb", stream=out) as line:
        line.update(1, None, "evil\r\nname\x1b[31m\x9b")
    assert out.getvalue() == f"{REWRITE}a [2Jb: 1 - evil  name [31m {REWRITE}"


def test_the_line_never_wraps() -> None:
    out = Terminal()
    with ProgressLine("job", stream=out) as line:
        line.update(1, None, "x" * 500)
    first = out.getvalue().split(REWRITE)[1]
    assert len(first) == 79  # one column short of an 80-column terminal


def test_a_stream_that_fails_ends_the_line_quietly() -> None:
    class Broken(Terminal):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    line = ProgressLine("job", stream=Broken())
    line.update(1)  # nothing raised: progress never fails the work it shows
    assert not line.active
    line.clear()


def test_a_process_without_stderr_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", None)  # fd 2 was closed when the process started
    with ProgressLine("job") as line:
        line.update(1)
    assert not line.active


# ------------------------------------------------------------------ the commands


def _env(tmp_path: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLHOST_", "AGENT_", "TENSORSCALE_"))}
    env.update({"TOOLHOST_DATA_DIR": str(tmp_path / "data"), "TOOLHOST_PLUGINS": ""})
    env.update(settings)
    return env


def _toolhost(args: list[str], env: dict[str, str], *, on_terminal: bool) -> tuple[
        int, str, str]:
    """Run ``toolhost ARGS``: exit status, stdout, and stderr as a terminal (a pty of 100
    columns) or a pipe received it."""
    argv = [*toolhost_command(), *args]
    if not on_terminal:
        done = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, check=False)
        return done.returncode, done.stdout, done.stderr
    return run_on_a_terminal(argv, env, timeout=COMMAND_TIMEOUT_S)


def _shown(stderr: str) -> list[str]:
    """The lines a terminal was shown, in order (the final clear shows an empty one); a
    log line before the first (a loosened policy's warning) is not one of them."""
    assert REWRITE in stderr, stderr
    return stderr.split(REWRITE)[1:]


@pytest.fixture
def upload_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.bin"
    path.write_bytes(bytes(range(256)) * (12 * 1024))  # 3 MiB: three chunks of the upload
    return path


def test_artifacts_upload_and_get_show_bytes_on_a_terminal(
        tmp_path: Path, upload_file: Path) -> None:
    env = _env(tmp_path)
    code, out, err = _toolhost(["artifacts", "upload", str(upload_file), "--conversation", "c1"],
                               env, on_terminal=True)
    assert code == 0, err
    artifact_id = out.strip()
    shown = _shown(err)
    assert shown[-1] == ""  # cleared at the end
    assert shown[:-1] == [f"upload notes.bin: {n}.0 MiB of 3.0 MiB ({p}%) - stored"
                          for n, p in ((1, 33), (2, 66), (3, 100))]

    target = tmp_path / "back.bin"
    code, out, err = _toolhost(["artifacts", "get", artifact_id, "-o", str(target)], env,
                               on_terminal=True)
    assert code == 0, err
    assert target.read_bytes() == upload_file.read_bytes()
    shown = _shown(err)
    assert shown[-1] == ""
    assert shown[-2] == f"artifact {artifact_id}: 3.0 MiB of 3.0 MiB (100%) - written"


def test_artifacts_upload_and_get_write_nothing_more_to_a_pipe(
        tmp_path: Path, upload_file: Path) -> None:
    env = _env(tmp_path)
    code, out, err = _toolhost(["artifacts", "upload", str(upload_file), "--conversation", "c1"],
                               env, on_terminal=False)
    assert (code, err) == (0, "")
    code, _, err = _toolhost(["artifacts", "get", out.strip(), "-o", str(tmp_path / "b")],
                             env, on_terminal=False)
    assert (code, err) == (0, "")


def test_a_failed_get_clears_the_line_before_its_message(tmp_path: Path) -> None:
    code, _, err = _toolhost(["artifacts", "get", "no-such-id", "-o", str(tmp_path / "x")],
                             _env(tmp_path), on_terminal=True)
    assert code != 0
    assert "no artifact 'no-such-id'" in err and REWRITE not in err  # nothing was shown


@pytest.fixture(scope="module")
def isolation() -> None:
    from toolhost_sandbox.run_command import isolation_problem

    problem = isolation_problem(Settings())
    if problem is not None:  # never a skip: CI without isolation must not pass by skipping
        pytest.fail(f"no working isolation here: {problem}", pytrace=False)


SANDBOXED = ["call", "sandbox.run_command", "--args",
             json.dumps({"command": "echo hi; sleep 2.5", "timeout_s": 20})]


def _sandbox_env(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path, TOOLHOST_PLUGINS="toolhost-sandbox",
                TOOLHOST_POLICY='{"CODE_EXECUTION/HIGH": "allow"}')


def test_call_shows_what_the_tool_reports_on_a_terminal(tmp_path: Path, isolation: None) -> None:
    code, out, err = _toolhost(SANDBOXED, _sandbox_env(tmp_path), on_terminal=True)
    assert code == 0, err
    assert out.startswith("Exit code 0.")
    shown = _shown(err)
    assert shown[-1] == ""  # cleared before the command ended
    # One a second while the command runs: the seconds gone of its timeout, and its output.
    assert shown[0] == "sandbox.run_command: 1 of 20 (5%) - 3 bytes of output"
    assert "sandbox.run_command: 2 of 20 (10%) - 3 bytes of output" in shown


def test_call_writes_no_progress_to_a_pipe(tmp_path: Path, isolation: None) -> None:
    code, out, err = _toolhost(SANDBOXED, _sandbox_env(tmp_path), on_terminal=False)
    assert code == 0, err
    assert out.startswith("Exit code 0.")
    # Only the log line of the loosened policy: no progress, no carriage return.
    assert [json.loads(line)["event"] for line in err.splitlines()] == ["policy.loosened"]
    assert "\r" not in err
