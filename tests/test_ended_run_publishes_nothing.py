"""A call still running when its run ends publishes nothing as the ended run's (D529's
rule for the workspace, now for the run's attachments): `toolhost runs end R` while a call of R
runs in another process, and the call's artifact (an export, a generated file) is refused
before it is published; the call ends cancelled with its run ("the run has ended"). Before, the
artifact was published under R after `runs end R` had listed R's attachments, and a command
naming R afresh found it attached to its reply. A captured output (step 12) is the call's own
row's, and a call approved outside its run (a detached workspace) still publishes (D219).

The writer with real ``RunWorkspaces`` and a real SQLite artifact store; then real ``toolhost``
processes, the late call held at a barrier file.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from installed import install_fake_plugin

from toolhost import WorkspaceUnavailable
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model import host_reasons as core_messages
from toolhost._model.artifacts import ArtifactOrigin
from toolhost._model.spec import Trust
from toolhost._model.workspace import run_check
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.cli import run_toolhost, toolhost_command
from toolhost._testing.clocks import FixedClock


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(tmp_path / "artifacts", FixedClock(T0))
    yield s
    s.close()


def _writer(store: SQLiteArtifactStore, workspace: object) -> RunArtifactWriter:
    # As the pipeline makes a call's writer: the run's check, through the workspace port.
    return RunArtifactWriter(store, "r", FixedClock(T0), live=run_check(workspace))


def test_an_attachment_of_a_run_ended_elsewhere_is_refused_and_nothing_is_published(
        tmp_path: Path, store: SQLiteArtifactStore) -> None:
    late = RunWorkspaces(tmp_path / "workspaces").start("r")[0]
    writer = _writer(store, late)
    RunWorkspaces(tmp_path / "workspaces").end("r")  # `toolhost runs end r`
    with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
        writer.write(origin=ArtifactOrigin.EXPORT, name="late.txt", media_type="text/plain",
                     content=b"late", trust=Trust.INTERNAL_TOOL)
    with pytest.raises(WorkspaceUnavailable, match="the run has ended"), writer.stream(
            origin=ArtifactOrigin.MODEL_OUTPUT, name="late.png", media_type="image/png",
            trust=Trust.EXTERNAL_UNTRUSTED, max_bytes=1024) as stream:
        stream.write(b"\x89PNG")
        stream.commit()
    assert store.list_run("r") == [] and writer.attached == ()
    # The call's own captured output is its row's, not an attachment: still stored.
    writer.write(origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE, name="output.json",
                 media_type="application/json", content=b"{}", trust=Trust.INTERNAL_TOOL)
    late.close()


def test_a_live_run_and_an_approval_outside_it_still_publish(
        tmp_path: Path, store: SQLiteArtifactStore) -> None:
    root = tmp_path / "workspaces"
    live = RunWorkspaces(root).start("r")[0]
    _writer(store, live).write(origin=ArtifactOrigin.EXPORT, name="a.txt",
                               media_type="text/plain", content=b"a", trust=Trust.INTERNAL_TOOL)
    live.end()
    detached = RunWorkspaces(root).for_approval("r")  # the run is not live here any more
    _writer(store, detached).write(origin=ArtifactOrigin.EXPORT, name="b.txt",
                                   media_type="text/plain", content=b"b",
                                   trust=Trust.INTERNAL_TOOL)
    detached.close()
    assert [record.name for record in store.list_run("r")] == ["a.txt", "b.txt"]

# ---------------------------------------------------------------------------- real processes

#: ``late.publish``: NONE side effect, runs at once. With LATE_BARRIER it says "waiting" on
#: stderr and waits for that file to exist before it publishes late.txt (MODEL_OUTPUT).
PUBLISHER = '''
import os, sys, time
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust, ArtifactOrigin)

IN = {"type": "object", "properties": {}, "additionalProperties": False}
OUT = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
       "additionalProperties": False}
SPEC = ToolSpec(
    name="late.publish", version="1.0.0", description="Publishes late.txt.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.NONE,
    risk=Risk.LOW, idempotency=Idempotency.IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=60, maximum_output_bytes=4096, allow_parallel=False,
    deprecated=False,
)

def publish(arguments, context):
    barrier = os.environ.get("LATE_BARRIER")
    if barrier:
        sys.stderr.write("waiting\\n")
        sys.stderr.flush()
        while not os.path.exists(barrier):
            time.sleep(0.05)
    ref = context.artifacts.write(origin=ArtifactOrigin.MODEL_OUTPUT, name="late.txt",
                                  media_type="text/plain", content=b"late",
                                  trust=Trust.INTERNAL_TOOL)
    return ToolOutput(structured={"id": ref.id}, content=ref.id)

@hookimpl
def toolhost_domains():
    return [Domain("late")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=publish)]
'''
PLUGINS = "fake-late,toolhost-workspace"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    install_fake_plugin(tmp_path / "site", "fake-late", "fake_late", PUBLISHER)
    return tmp_path / "data"


def _toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=PLUGINS, path=[data.parent / "site"])


def test_runs_end_during_a_call_that_publishes_afterwards_cancels_it_unpublished(
        data: Path) -> None:
    assert _toolhost(data, "call", "workspace.list_files", "--run", "R",
                     "--args", "{}").returncode == 0
    barrier = data.parent / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="", TOOLHOST_PLUGINS=PLUGINS,
               PYTHONPATH=os.pathsep.join(filter(None, [str(data.parent / "site"),
                                                        env.get("PYTHONPATH")])),
               LATE_BARRIER=str(barrier))
    late = subprocess.Popen(
        [*toolhost_command(), "call", "late.publish", "--args", "{}", "--run", "R", "--json"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    assert late.stderr is not None
    try:
        assert any(line.strip() == "waiting" for line in late.stderr), late.communicate()
        ended = _toolhost(data, "runs", "end", "R")
        assert (ended.returncode, ended.stdout) == (0, "ended R\n"), ended.stderr
    finally:
        barrier.touch()
        out, err = late.communicate(timeout=120)
    # Before: exit 0, late.txt published under R and attached to R named afresh.
    assert late.returncode == 1, (out, err)
    outcome = json.loads(out)
    assert (outcome["status"], outcome["reason_code"], outcome["retryable"],
            outcome["attachments"]) == ("failed", core_messages.RUN_CANCELLED, False, [])
    assert _toolhost(data, "artifacts", "list", "--run", "R").stdout.startswith(
        'no artifacts in run "R"')
    again = _toolhost(data, "call", "workspace.list_files", "--run", "R", "--args", "{}",
                      "--json")
    assert json.loads(again.stdout)["attachments"] == []
    assert _toolhost(data, "runs", "end", "R").returncode == 0
