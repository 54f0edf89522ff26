"""`toolhost pending` names the operator's directory a waiting call will run in once approved
(D509, D516: `show` does), and `pending --json` has each call's run's deadline and directory as
`show --json` has them (D519). Past the deadline the line says an approval runs nothing and
names no directory (D521: nothing would run there). Real processes, the real sandbox, one data
directory per test, as test_operator_directory_approval is; a damaged row over a real SQLite
record, as test_damaged_invocation_rows damages one."""

from __future__ import annotations

import datetime as dt
import json
import socket
import time
from pathlib import Path

from pg_server import pg_database, pg_server
from test_cli import toolhost
from test_cli_runs import call
from test_damaged_invocation_rows import Backend, _three, backend
from test_damaged_invocation_rows import toolhost as toolhost_over
from test_operator_directory_approval import WRITES, env, project, row

from toolhost._cli.approvals import PAST_RUN_DEADLINE

__all__ = ["backend", "env", "pg_database", "pg_server", "project"]  # the fixtures


def pending_lines(env: dict[str, str]) -> dict[str, str]:
    listed = toolhost("pending", env=env)
    assert (listed.returncode, listed.stderr) == (0, ""), listed.stderr
    return {line.split()[0]: line for line in listed.stdout.splitlines()}


def test_pending_names_the_directory_a_call_runs_in_and_json_has_its_run_deadline(
    env: dict[str, str], project: Path,
) -> None:
    code, out, err = call(env, "sandbox.run_command", WRITES, "--workspace", str(project),
                          "--timeout", "3600")
    assert code == 3, err
    timely = out.strip()
    code, out, err = call(env, "sandbox.run_command", WRITES)
    assert code == 3, err
    detached = out.strip()
    there = (f"  (directory {project.resolve()} on {socket.gethostname()}: an approval runs "
             "the call there, checked again first)")

    # Regression: the lines ended with the arguments; only `show` named the directory.
    lines = pending_lines(env)
    assert lines[timely].endswith(there)
    assert "(directory " not in lines[detached], lines[detached]
    # Regression: --json had neither; now both, exactly as show --json has them.
    listed = json.loads(toolhost("pending", "--json", env=env).stdout)
    assert [p["id"] for p in listed] == [timely, detached]
    for p in listed:
        shown = row(env, p["id"])
        assert (p["run_deadline"], p["operator_directory"]) == (
            shown["run_deadline"], shown["operator_directory"])
    assert listed[0]["operator_directory"]["path"] == str(project.resolve())
    assert listed[0]["run_deadline"] is not None and listed[1]["operator_directory"] is None

    # A call whose run's deadline has passed is listed as such, its directory not named. Made
    # after the listings above (room for the command's start-up under load: D518).
    code, out, err = call(env, "sandbox.run_command", WRITES, "--workspace", str(project),
                          "--timeout", "10")
    assert code == 3, err
    late = out.strip()
    deadline = dt.datetime.fromisoformat(str(row(env, late)["run_deadline"]))
    time.sleep(max(0.0, (deadline - dt.datetime.now(dt.UTC)).total_seconds()) + 0.2)
    lines = pending_lines(env)
    assert lines[late].endswith(PAST_RUN_DEADLINE) and "(directory " not in lines[late]
    assert lines[timely].endswith(there)
    # show names the directory, but no longer says an approval runs the call there.
    shown = toolhost("show", late, env=env)
    assert shown.returncode == 0, shown.stderr
    directory = [line for line in shown.stdout.splitlines() if line.startswith("directory")]
    assert directory == [f"{'directory':<13}{project.resolve()} on {socket.gethostname()}"]


def test_pending_json_skips_a_row_damaged_outside_its_listed_columns(backend: Backend) -> None:
    # The deadline is read from the whole row: one that no longer holds a record is said, not
    # listed with a deadline it does not have; the text lines still show its stored columns.
    a, b, c = _three(backend.store)
    backend.damage(b.id, "run_deadline", "yesterday")
    listed = toolhost_over(backend, "pending", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["run_deadline"]) for r in json.loads(listed.stdout)] == [
        (a.id, None), (c.id, None)]
    assert listed.stderr == f"toolhost: invocation {b.id} is damaged (run_deadline): skipped\n"
    text = toolhost_over(backend, "pending")
    assert text.returncode == 0 and f"{b.id}  fx.echo@1.0.0  " in text.stdout
