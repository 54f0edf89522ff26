"""A workspace that fails its quota before the command starts: nothing runs, and the result
says so, not that the command's processes were killed (D297: the first measurement is taken
before the start)."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox_support import ALLOW, NAME, PLUGINS, structured
from toolhost import Settings, WorkspaceUsage
from toolhost.testing import Harness
from toolhost_sandbox import runner
from toolhost_sandbox.isolation import find_bwrap
from toolhost_sandbox.limits import CallLimits
from toolhost_sandbox.run_command import render

MiB = 2**20


def test_a_workspace_already_over_its_quota_runs_nothing_and_says_so(
        tmp_path: Path, isolation: None) -> None:
    # Regression: the text said "every process of the command was killed" and signal was
    # SIGKILL, which reads as "your command wrote too much": a model then deletes files (here
    # the operator's own) or retries a smaller command that fails the same way.
    root = tmp_path / "mine"
    root.mkdir()
    (root / "dataset.bin").write_bytes(os.urandom(20 * MiB))  # the operator's own file
    settings = {**ALLOW, "TOOLHOST_WORKSPACE_QUOTA_BYTES": str(16 * MiB)}
    with Harness.over(PLUGINS, settings=settings) as harness:
        run = harness.start_run(workspace=root)
        outcome = harness.call(NAME, {"command": "echo hi > proof.txt; echo hi"}, run=run)
        harness.end_run(run)
    assert structured(outcome) == {"exit_code": None, "signal": None, "timed_out": False,
                                   "truncated": False, "quota_exceeded": True,
                                   "stdout": "", "stderr": ""}
    assert outcome.content == (
        "Nothing was run: the workspace is already over its quota (16 MiB, 200000 entries, "
        "2048 levels deep), so the command was not started.\n"
        'stdout (0 bytes): ""\nstderr (0 bytes): ""')
    assert sorted(p.name for p in root.iterdir()) == ["dataset.bin"]


def test_a_workspace_unmeasurable_before_the_start_runs_nothing_and_says_so(
        tmp_path: Path) -> None:
    # The same for a walk that fails before the start (as root, the host lists any directory,
    # so the walk's failure is the measurement's own here).
    def unmeasurable() -> WorkspaceUsage:
        raise OSError("no walk")

    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        completed = runner.run_sandboxed(
            find_bwrap(Settings()), fd, "true", timeout_s=5,
            on_cancel=lambda callback: lambda: None, limits=CallLimits(), measure=unmeasurable)
    finally:
        os.close(fd)
    output = render(completed, 5)
    assert output.structured["signal"] is None
    assert output.structured["quota_exceeded"] is True
    assert output.content.startswith(
        "Nothing was run: the workspace could not be measured against its quota")
    assert "was killed" not in output.content
