"""``toolhost demo``'s run and ``toolhost artifacts upload``'s are their commands' own, held
as ``toolhost call``'s one-shot run is (D470): one whose command was SIGKILLed is shown by
``runs list`` as not live (its command is gone), and ``toolhost recover`` ends it, unmounting
its workspace. Before, neither took the hold: a killed one stayed listed as live, mounted,
until ``runs end``.

Real ``toolhost`` processes killed with SIGKILL while their run is registered: the demo in a
``math.calculate`` that blocks (a stand-in plugin), the upload reading a FIFO nobody writes.
Real mounts where the machine can mount, else plain directories.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import nothing_left
from installed import install_fake_plugin
from mount_support import mounts_under

from toolhost._testing.cli import run_toolhost, toolhost_command

#: ``math.calculate`` standing in for toolhost-math's: it writes to the run's workspace (so
#: the run has one, mounted where the host mounts), says "blocking" on stderr and waits to be
#: killed. NON_IDEMPOTENT: recover settles its row without running it again.
BLOCKING_MATH = '''
import sys, threading
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {"expression": {"type": "string"}},
      "required": ["expression"], "additionalProperties": False}
OUT = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"],
       "additionalProperties": False}
SPEC = ToolSpec(
    name="math.calculate", version="1.0.0", description="Blocks until killed.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.WORKSPACE_WRITE,
    risk=Risk.LOW, idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=60, maximum_output_bytes=4096, allow_parallel=False,
    deprecated=False,
)

def calculate(arguments, context):
    context.workspace.write("working.txt", b"x")
    sys.stderr.write("blocking\\n")
    sys.stderr.flush()
    threading.Event().wait()  # until the process is killed
    return ToolOutput(structured={"value": "391"}, content="391")

@hookimpl
def toolhost_domains():
    return [Domain("math")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=calculate)]
'''
MATH = "fake-math"
GONE = "not live, its command is gone (toolhost recover ends it): "


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    install_fake_plugin(tmp_path / "site", MATH, "fake_math", BLOCKING_MATH)
    yield tmp_path / "data"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


def _toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=MATH, path=[data.parent / "site"])


def _started(data: Path, *args: str) -> subprocess.Popen[str]:
    """``toolhost ARGS`` running in the background, as ``_toolhost`` would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="", TOOLHOST_PLUGINS=MATH,
               PYTHONPATH=os.pathsep.join(filter(None, [str(data.parent / "site"),
                                                        env.get("PYTHONPATH")])))
    return subprocess.Popen([*toolhost_command(), *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _killed(command: subprocess.Popen[str]) -> None:
    command.send_signal(signal.SIGKILL)
    command.communicate()


def _listed(data: Path) -> tuple[str, list[dict[str, object]]]:
    text, as_json = _toolhost(data, "runs", "list"), _toolhost(data, "runs", "list", "--json")
    assert text.returncode == as_json.returncode == 0, text.stderr + as_json.stderr
    return text.stdout, json.loads(as_json.stdout)


def _recovered_and_nothing_left(data: Path) -> None:
    recovered = _toolhost(data, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert _listed(data) == ("", [])
    assert mounts_under(data) == [] and nothing_left(data / "workspaces")


def test_a_killed_demos_run_is_not_live_and_recover_ends_it(data: Path) -> None:
    demo = _started(data, "demo")
    try:
        assert demo.stderr is not None
        for line in demo.stderr:
            if line.strip() == "blocking":
                break
        else:
            pytest.fail("the demo never ran its tool")
        # Its command is there: live, as any run.
        assert _listed(data) == ("run-demo  a workspace\n", [
            {"run_id": "run-demo", "directory": None, "workspace": True}])
    finally:
        _killed(demo)
    # Before: listed as live ("run-demo  a workspace") and left mounted by recover.
    assert _listed(data) == (f"run-demo  {GONE}a workspace\n", [
        {"run_id": "run-demo", "directory": None, "workspace": True, "command_gone": True}])
    _recovered_and_nothing_left(data)


def test_a_demo_after_a_killed_one_starts_its_run_afresh(data: Path) -> None:
    # The demo's run id is always run-demo: the next demo does not go on in the killed
    # one's workspace (it is ended when the next demo takes the id).
    demo = _started(data, "demo")
    try:
        assert demo.stderr is not None and demo.stderr.readline() == "blocking\n"
    finally:
        _killed(demo)
    (generation,) = [p for p in (data / "workspaces" / "run-demo").iterdir() if p.is_dir()]
    again = _started(data, "demo")
    try:
        assert again.stderr is not None and again.stderr.readline() == "blocking\n"
        assert not generation.exists()
        assert _listed(data)[0] == "run-demo  a workspace\n"
    finally:
        _killed(again)
    _recovered_and_nothing_left(data)


def _open_for_writing(fifo: Path, reader: subprocess.Popen[str]) -> int:
    """The FIFO's write end, once ``reader`` has opened it to read."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: nobody reads it yet
            if exc.errno != errno.ENXIO or reader.poll() is not None:
                raise
            if time.monotonic() > deadline:
                pytest.fail("the upload never opened its file")
            time.sleep(0.05)


def _registered(data: Path, command: subprocess.Popen[str]) -> str:
    """The id of the one run registered under ``data``, once it is."""
    workspaces = data / "workspaces"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and command.poll() is None:
        runs = [p.name for p in workspaces.glob("*") if (p / "run.json").is_file()]
        if runs:
            return runs[0]
        time.sleep(0.05)
    pytest.fail("the upload never registered its run")


def test_a_killed_uploads_run_is_not_live_and_recover_ends_it(data: Path) -> None:
    fifo = data.parent / "never-written"
    os.mkfifo(fifo)
    upload = _started(data, "artifacts", "upload", str(fifo), "--conversation", "c1")
    writer = _open_for_writing(fifo, upload)
    try:
        run_id = _registered(data, upload)  # then it waits for bytes that never come
        assert _listed(data)[0] == f"{run_id}  no workspace yet\n"
    finally:
        _killed(upload)
        os.close(writer)
    # Before: listed as live, and left so by recover until `runs end`.
    assert _listed(data) == (f"{run_id}  {GONE}no workspace yet\n", [
        {"run_id": run_id, "directory": None, "workspace": False, "command_gone": True}])
    _recovered_and_nothing_left(data)
