"""`toolhost approve` says on stderr that the call runs in the operator's directory only when it
will run: past the run's deadline the approval runs nothing (D222, D519), and the operator is
not told their files are being changed. Real processes, the real sandbox, one data directory
per test, as test_operator_directory_approval is."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from test_cli import toolhost
from test_cli_runs import call
from test_operator_directory_approval import WRITES, env, project, row

__all__ = ["env", "project"]  # the fixtures, used by name


def test_approve_names_the_directory_for_a_call_that_runs_not_for_one_past_its_deadline(
    env: dict[str, str], project: Path,
) -> None:
    ids = []
    for timeout_s in ("3", "3600"):
        code, out, err = call(env, "sandbox.run_command", WRITES, "--workspace", str(project),
                              "--timeout", timeout_s)
        assert code == 3, err
        ids.append(out.strip())
    late, timely = ids
    deadline = dt.datetime.fromisoformat(str(row(env, late)["run_deadline"]))
    time.sleep(max(0.0, (deadline - dt.datetime.now(dt.UTC)).total_seconds()) + 0.2)

    refused = toolhost("approve", late, env=env)
    assert refused.returncode == 1
    assert "runs in the operator's directory" not in refused.stderr, refused.stderr
    assert row(env, late)["reason_code"] == "tool.timeout.run_deadline_passed"
    assert not (project / "out.txt").exists()

    ran = toolhost("approve", timely, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.startswith(
        f"toolhost: invocation {timely} runs in the operator's directory {project}\n")
    assert (project / "out.txt").read_text() == "written\n"
