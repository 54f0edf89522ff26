"""A run that ``toolhost runs end`` ended stays ended (D221). A call of the run that started
before the end, and reaches for its workspace only after it, used to register the run again:
live once more (``runs list``), with ``run.json`` ``{"directory": null}`` (its deadline gone),
the late call's files in a new generation (a mounted image where the host can mount) that the
next command of the run found. Now that call is refused ("the run has ended", recorded as the
call's failure) and nothing is made; a command naming the run afterwards starts it afresh.

The registry's side with two ``RunWorkspaces`` (two processes of one host, as in
test_run_workspace); then real ``toolhost`` processes, the late call held at a barrier file.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import nothing_left
from installed import install_fake_plugin
from mount_support import mounts_under

from toolhost import WorkspaceUnavailable
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._model import host_reasons as core_messages
from toolhost._testing.cli import run_toolhost, toolhost_command

# ---------------------------------------------------------------------------- the registry

DEADLINE = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def test_a_workspace_first_used_after_its_runs_end_is_refused_and_makes_nothing(
        tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    late = RunWorkspaces(root).start("r")[0]  # a command of the run, not at its workspace yet
    assert RunWorkspaces(root).end("r")  # `toolhost runs end r`, another process
    with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
        late.write("late.txt", b"after the end")
    late.close()
    assert not (root / "r").exists()
    assert RunWorkspaces(root).live() == []


def test_the_runs_id_named_afresh_after_its_end_is_a_new_run_the_late_call_never_reaches(
        tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    late = RunWorkspaces(root).start("r", deadline_at=DEADLINE)[0]
    approved = RunWorkspaces(root).for_approval("r")  # an approval of the run, also late
    RunWorkspaces(root).end("r")
    again, deadline_at = RunWorkspaces(root).start("r")  # the operator uses the id again
    assert deadline_at is None  # a new run: the ended one's deadline is not its
    again.write("new.txt", b"the new run's")
    for workspace in (late, approved):
        with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
            workspace.listdir()
        workspace.close()
    assert [e.path for e in again.listdir().entries] == ["new.txt"]
    again.end()
    assert nothing_left(root)


def test_a_pause_is_no_end_the_runs_next_use_claims_a_generation(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("r")[0]
    RunWorkspaces(root).drop("r")  # a pause elsewhere keeps the run (and its registration)
    ours.write("a.txt", b"x")
    assert ours.read("a.txt") == b"x"
    ours.end()
    assert nothing_left(root)

# ---------------------------------------------------------------------------- real processes

#: ``late.put``: IDEMPOTENT, a workspace write (runs at once). With LATE_BARRIER it says
#: "waiting" on stderr and waits for that file to exist before it touches the workspace.
PUTTER = '''
import os, sys, time
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {"tag": {"type": "string", "maxLength": 8}},
      "required": ["tag"], "additionalProperties": False}
OUT = {"type": "object", "properties": {"put": {"type": "string"}}, "required": ["put"],
       "additionalProperties": False}
SPEC = ToolSpec(
    name="late.put", version="1.0.0", description="Writes TAG.txt.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.WORKSPACE_WRITE,
    risk=Risk.LOW, idempotency=Idempotency.IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=60, maximum_output_bytes=4096, allow_parallel=False,
    deprecated=False,
)

def put(arguments, context):
    barrier = os.environ.get("LATE_BARRIER")
    if barrier:
        sys.stderr.write("waiting\\n")
        sys.stderr.flush()
        while not os.path.exists(barrier):
            time.sleep(0.05)
    context.workspace.write(arguments["tag"] + ".txt", b"x")
    return ToolOutput(structured={"put": arguments["tag"]}, content=arguments["tag"])

@hookimpl
def toolhost_domains():
    return [Domain("late")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=put)]
'''
PLUGINS = "fake-late,toolhost-workspace"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    install_fake_plugin(tmp_path / "site", "fake-late", "fake_late", PUTTER)
    yield tmp_path / "data"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


def _toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=PLUGINS, path=[data.parent / "site"])


def _put(data: Path, tag: str, *options: str) -> subprocess.CompletedProcess[str]:
    return _toolhost(data, "call", "late.put", "--args", json.dumps({"tag": tag}), *options)


def _late_call(data: Path, run_id: str, barrier: Path) -> subprocess.Popen[str]:
    """``toolhost call --run RUN late.put --json``, its body started and held at ``barrier``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="", TOOLHOST_PLUGINS=PLUGINS,
               PYTHONPATH=os.pathsep.join(filter(None, [str(data.parent / "site"),
                                                        env.get("PYTHONPATH")])),
               LATE_BARRIER=str(barrier))
    call = subprocess.Popen(
        [*toolhost_command(), "call", "late.put", "--args", '{"tag": "late"}', "--run", run_id,
         "--json"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert call.stderr is not None
    for line in call.stderr:
        if line.strip() == "waiting":
            return call
    call.kill()
    pytest.fail(f"the call never started its body: {call.communicate()}")


def test_runs_end_during_a_call_that_has_not_used_the_workspace_yet_stays_ended(
        data: Path) -> None:
    assert _put(data, "early", "--run", "R", "--timeout", "600").returncode == 0
    assert _toolhost(data, "runs", "list").stdout == "R  a workspace\n"
    barrier = data.parent / "go"
    late = _late_call(data, "R", barrier)
    try:
        ended = _toolhost(data, "runs", "end", "R")
        assert (ended.returncode, ended.stdout) == (0, "ended R\n"), ended.stderr
    finally:
        barrier.touch()
        out, err = late.communicate(timeout=120)
    # Before: "b wrote 1", exit 0, and `runs list` showed "R  a workspace" again, with
    # run.json {"directory": null}: the deadline gone, a mounted generation holding late.txt.
    assert late.returncode == 1, (out, err)
    outcome = json.loads(out)
    assert outcome["status"] == "failed", outcome
    # Cancelled with its run, not "no space, try again": the run stays ended (D529).
    assert (outcome["reason_code"], outcome["retryable"]) == (
        core_messages.RUN_CANCELLED, False), outcome
    shown = _toolhost(data, "show", outcome["invocation_id"], "--json")
    row = json.loads(shown.stdout)
    assert (row["state"], row["failure_detail"]) == ("failed", {"problem": "the run has ended"})
    assert _toolhost(data, "runs", "list").stdout == ""
    assert mounts_under(data) == []
    assert nothing_left(data / "workspaces")
    # The operator names the run again: a new run, with nothing of the ended one's.
    assert _put(data, "new", "--run", "R").returncode == 0
    listed = _toolhost(data, "call", "workspace.list_files", "--run", "R", "--args", "{}")
    assert (listed.returncode, listed.stdout.count(".txt")) == (0, 1), listed
    assert '"new.txt"' in listed.stdout
    assert json.loads((data / "workspaces" / "R" / "run.json").read_text())["deadline"] is None
    assert _toolhost(data, "runs", "end", "R").returncode == 0
    assert mounts_under(data) == [] and nothing_left(data / "workspaces")

