"""A ``toolhost call`` without ``--run`` owns its run (D221: it ends with its command). One
killed with SIGKILL while its call was ``running`` leaves the run registered; ``toolhost
recover`` re-runs the IDEMPOTENT call in a workspace of its own (D85, D219), removed after
it, and ends the dead run: no mount, no live run left. Before, the re-run made and mounted a
generation in the dead run, which nothing ever ended. A named run (``--run R``) is unchanged:
its re-run lands in the run's own workspace.

Real ``toolhost`` processes killed with SIGKILL; real mounts where the machine can mount
(root and loop devices), else plain directories.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from installed import install_fake_plugin
from mount_support import mounts_under

from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._testing.cli import run_toolhost, toolhost_command

#: ``oneshot.put``: IDEMPOTENT, a workspace write (allowed, runs at once). It writes
#: ``before.txt`` first with ONESHOT_WRITE_FIRST, then, with ONESHOT_BLOCK, says "blocking" on
#: stderr and waits to be killed; then writes ``after.txt``.
PUTTER = '''
import os, sys, threading
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {}, "additionalProperties": False}
OUT = {"type": "object", "properties": {"put": {"const": True}}, "required": ["put"],
       "additionalProperties": False}
SPEC = ToolSpec(
    name="oneshot.put", version="1.0.0", description="Writes two files.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.WORKSPACE_WRITE,
    risk=Risk.LOW, idempotency=Idempotency.IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=60, maximum_output_bytes=4096, allow_parallel=False,
    deprecated=False,
)

def put(arguments, context):
    if os.environ.get("ONESHOT_WRITE_FIRST"):
        context.workspace.write("before.txt", b"before")
    if os.environ.get("ONESHOT_BLOCK"):
        sys.stderr.write("blocking\\n")
        sys.stderr.flush()
        threading.Event().wait()  # until the process is killed
    context.workspace.write("after.txt", b"after")
    return ToolOutput(structured={"put": True}, content="put")

@hookimpl
def toolhost_domains():
    return [Domain("oneshot")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=put)]
'''
PLUGINS = "fake-oneshot,toolhost-workspace"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    install_fake_plugin(tmp_path / "site", "fake-oneshot", "fake_oneshot", PUTTER)
    yield tmp_path / "data"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


def _toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=PLUGINS, path=[data.parent / "site"])


def _killed_while_running(data: Path, *options: str, write_first: bool) -> None:
    """``toolhost call oneshot.put OPTIONS``, SIGKILLed while its call is running."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="", TOOLHOST_PLUGINS=PLUGINS,
               PYTHONPATH=os.pathsep.join(filter(None, [str(data.parent / "site"),
                                                        env.get("PYTHONPATH")])),
               ONESHOT_BLOCK="1", **({"ONESHOT_WRITE_FIRST": "1"} if write_first else {}))
    call = subprocess.Popen([*toolhost_command(), "call", "oneshot.put", *options], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert call.stderr is not None
        for line in call.stderr:
            if line.strip() == "blocking":
                break
        else:
            pytest.fail("the call never started its body")
    finally:
        call.send_signal(signal.SIGKILL)
        call.communicate()


def _recovered(data: Path) -> None:
    recovered = _toolhost(data, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert "IDEMPOTENT, so run again here: succeeded" in recovered.stdout, recovered.stdout


@pytest.mark.parametrize("write_first", [
    pytest.param(False, id="killed-before-its-workspace"),
    pytest.param(True, id="killed-with-its-workspace")])
def test_recover_of_a_killed_unnamed_call_leaves_no_mount_and_no_live_run(
        data: Path, write_first: bool) -> None:
    _killed_while_running(data, write_first=write_first)
    left = _toolhost(data, "runs", "list").stdout
    assert left.endswith("a workspace\n" if write_first else "no workspace yet\n"), left
    _recovered(data)
    # Before: the re-run made (or reused) a mounted generation in the dead run, listed for
    # good: "<run>  a workspace".
    assert mounts_under(data) == []
    assert _toolhost(data, "runs", "list").stdout == ""
    workspaces = data / "workspaces"
    assert [n for n in os.listdir(workspaces) if not n.startswith(".")] == []
    assert os.listdir(workspaces / ".detached") == []
    # The calls that follow leave nothing either (nothing of the dead run is found again).
    assert _toolhost(data, "call", "oneshot.put").returncode == 0
    assert mounts_under(data) == [] and _toolhost(data, "runs", "list").stdout == ""


def test_recover_of_a_killed_named_call_runs_it_again_in_the_runs_workspace(data: Path) -> None:
    _killed_while_running(data, "--run", "r1", write_first=True)
    _recovered(data)
    # The run goes on (D221) in its workspace: what the killed call wrote and the re-run's.
    assert _toolhost(data, "runs", "list").stdout == "r1  a workspace\n"
    listed = _toolhost(data, "call", "workspace.list_files", "--run", "r1", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {"before.txt", "after.txt"} <= set(json.dumps(json.loads(listed.stdout)).split('"'))
    assert _toolhost(data, "runs", "end", "r1").returncode == 0
    assert mounts_under(data) == []


def test_a_named_run_given_a_killed_unnamed_runs_id_stays_live(data: Path) -> None:
    # The id is shown (`runs list`, `call --json`); reused with --run, the run is the
    # operator's: a recovery must not end it under its calls (D221), though the killed
    # command's run.json said it was a command's own.
    _killed_while_running(data, write_first=False)
    (run_id,) = [line.split()[0] for line in _toolhost(data, "runs", "list").stdout.splitlines()]
    assert _toolhost(data, "call", "workspace.write_text", "--run", run_id, "--args",
                     json.dumps({"path": "kept.txt", "content": "mine"})).returncode == 0
    _recovered(data)
    assert _toolhost(data, "runs", "list").stdout == f"{run_id}  a workspace\n"
    read = _toolhost(data, "call", "workspace.read_text", "--run", run_id, "--args",
                     json.dumps({"path": "kept.txt"}))
    assert read.returncode == 0, read.stderr
    assert _toolhost(data, "runs", "end", run_id).returncode == 0


# ---------------------------------------------------------------------------- the registry

#: A command that owns a run (``RunWorkspaces.own``), prints once it does, and is then
#: killed (or lets go when its stdin closes).
_OWNER = """
import sys
from pathlib import Path
from toolhost._adapters.run_workspaces import RunWorkspaces
RunWorkspaces(Path(sys.argv[1])).own(sys.argv[2])
print("owned", flush=True)
sys.stdin.read()
"""


def _owner(root: Path, run_id: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _OWNER, str(root), run_id],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "owned\n"
    return proc


def test_an_approval_ends_a_run_whose_command_is_gone_and_keeps_a_live_ones(
        tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    alive, killed = _owner(root, "alive"), _owner(root, "killed")
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    try:
        registry = RunWorkspaces(root)
        assert [run_id for run_id, _, _ in registry.live()] == ["alive", "killed"]
        gone = registry.for_approval("killed")
        gone.write("a.txt", b"x")
        assert gone.root.parent == root / ".detached"  # one of the call's own
        gone.close()
        assert not (root / "killed").exists() and os.listdir(root / ".detached") == []
        # The live command's run is its: the approved call finds the run's generation.
        kept = registry.for_approval("alive")
        kept.write("a.txt", b"y")
        assert kept.root.parent == root / "alive"
        kept.close()
        registry.sweep_detached()
        assert [run_id for run_id, _, _ in registry.live()] == ["alive"]
    finally:
        alive.communicate("")
    # Its command ended without ending it (a SIGKILL's leftover, as far as anyone can tell):
    # the next recovery's sweep ends it and removes its generation.
    RunWorkspaces(root).sweep_detached()
    assert RunWorkspaces(root).live() == [] and not (root / "alive").exists()


def test_a_run_registered_before_the_flag_stays_live(tmp_path: Path) -> None:
    # An older run.json (no "command"), or a named run's: no command to outlive, so live
    # until ``runs end`` as before.
    root = tmp_path / "workspaces"
    (root / "old").mkdir(parents=True)
    (root / "old" / "run.json").write_text('{"directory": null}')
    registry = RunWorkspaces(root)
    workspace, _ = registry.start("named")
    workspace.close()
    registry.sweep_detached()
    approved = registry.for_approval("old")
    approved.write("a.txt", b"x")
    assert approved.root.parent == root / "old"
    approved.close()
    assert [(run_id, has) for run_id, _, has in registry.live()] == [("named", False),
                                                                    ("old", True)]
