"""``toolhost recover`` says which runs it ended: a ``toolhost call`` killed with SIGKILL leaves
its own run registered (``runs list``: "not live, its command is gone (toolhost recover ends
it)", D475), and recover ends it. A READ_ONLY call leaves no row (D17), so ending the run is
all recover does: it printed "nothing to recover" (``[]`` with ``--json``) though it did it.

Real ``toolhost`` processes killed with SIGKILL while their read-only call blocks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from installed import install_fake_plugin
from mount_support import mounts_under
from test_killed_demo_and_upload_runs import BLOCKING_MATH

from toolhost._testing.cli import run_toolhost, toolhost_command

#: ``slowread.wait``: READ_ONLY (no row is written before it runs), says "blocking" on stderr
#: and waits to be killed.
BLOCKING_READ = '''
import sys, threading
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {}, "additionalProperties": False}
OUT = {"type": "object", "properties": {}, "additionalProperties": False}
SPEC = ToolSpec(
    name="slowread.wait", version="1.0.0", description="Blocks until killed.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.NONE,
    risk=Risk.LOW, idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=60, maximum_output_bytes=4096, allow_parallel=True,
    deprecated=False,
)

def wait(arguments, context):
    sys.stderr.write("blocking\\n")
    sys.stderr.flush()
    threading.Event().wait()  # until the process is killed
    return ToolOutput(structured={}, content="")

@hookimpl
def toolhost_domains():
    return [Domain("slowread")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=wait)]
'''
PLUGIN = "fake-slowread"


#: toolhost-math's stand-in that writes to its run's workspace, then blocks (NON_IDEMPOTENT).
MATH = "fake-math"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    install_fake_plugin(tmp_path / "site", PLUGIN, "fake_slowread", BLOCKING_READ)
    install_fake_plugin(tmp_path / "site", MATH, "fake_math", BLOCKING_MATH)
    yield tmp_path / "data"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


def _toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=f"{PLUGIN},{MATH}",
                        path=[data.parent / "site"])


def _killed_call(data: Path, *arguments: str) -> str:
    """``toolhost ARGUMENTS`` (default: ``call slowread.wait``) SIGKILLed while its tool
    blocks: the id of the run it leaves, which ``runs list`` marks as its command's gone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="",
               TOOLHOST_PLUGINS=f"{PLUGIN},{MATH}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(data.parent / "site"),
                                                        env.get("PYTHONPATH")])))
    command = [*toolhost_command(), *(arguments or ("call", "slowread.wait"))]
    call = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
    listed = _toolhost(data, "runs", "list", "--json")
    (run,) = json.loads(listed.stdout)
    assert run["command_gone"] is True
    return str(run["run_id"])


def test_recover_prints_the_run_of_a_killed_call_in_a_directory_it_ended(
        data: Path, tmp_path: Path) -> None:
    directory = tmp_path / "project"
    directory.mkdir()
    run_id = _killed_call(data, "call", "slowread.wait", "--workspace", str(directory))
    recovered = _toolhost(data, "recover")
    assert (recovered.returncode, recovered.stderr) == (0, "")
    # Before: "nothing to recover: no invocation is left running".
    assert recovered.stdout == (
        f"ended run {run_id}: its command was gone (its directory {directory} is kept)\n")
    assert _toolhost(data, "runs", "list").stdout == ""
    assert directory.is_dir()
    again = _toolhost(data, "recover")
    assert again.stdout == "nothing to recover: no invocation is left running\n"


def test_recover_json_has_an_entry_for_the_run_it_ended(data: Path) -> None:
    run_id = _killed_call(data)
    recovered = _toolhost(data, "recover", "--json")
    assert (recovered.returncode, recovered.stderr) == (0, "")
    # Before: []. The entry has a row's keys, null where a run has none: a reader of the rows
    # (``r["invocation_id"]``, ``r["action"]``) reads it too.
    assert json.loads(recovered.stdout) == [
        {"invocation_id": None, "tool": None, "version": None, "action": "run_ended",
         "reason": "its command was gone", "outcome": None, "run_id": run_id,
         "directory": None}]
    assert json.loads(_toolhost(data, "recover", "--json").stdout) == []
    assert _toolhost(data, "runs", "list").stdout == ""


def test_recover_says_it_removed_the_workspace_before_the_rows_it_settled(data: Path) -> None:
    # The demo's call writes to its run's workspace and leaves its row running: recover ends
    # the run (its workspace removed) and settles the row, a line each, the run's first.
    assert _killed_call(data, "demo") == "run-demo"
    recovered = _toolhost(data, "recover")
    assert recovered.returncode == 0, recovered.stderr
    ended, settled = recovered.stdout.splitlines()
    assert ended == "ended run run-demo: its command was gone (its workspace is removed)"
    assert "  math.calculate@1.0.0  failed: " in settled
    assert _toolhost(data, "runs", "list").stdout == "" and mounts_under(data) == []
