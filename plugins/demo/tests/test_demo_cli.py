"""The approval flow at the operator's surface, as real subprocesses sharing one data directory:
``call`` pauses and prints the id, ``pending`` lists it, ``approve`` completes it, and the record
is the structured result on its row."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from demo_support import database
from toolhost.testing import run_toolhost


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The settings every command of the test sees (``run_toolhost`` gives it none of the
    machine's): its data directory and this plugin alone."""
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "data"), "TOOLHOST_PLUGINS": "toolhost-demo"}


def toolhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=Path(env["TOOLHOST_DATA_DIR"]), env=env)


def test_call_pauses_pending_lists_approve_completes(env: dict[str, str], tmp_path: Path) -> None:
    paused = toolhost(env, "call", "demo.external_write", "--args",
                      '{"destination": "x", "content": "y"}')
    assert paused.returncode == 3, paused.stderr
    invocation_id = paused.stdout.strip()
    assert paused.stdout == invocation_id + "\n" and len(invocation_id) == 32
    assert paused.stderr == (f"toolhost: demo.external_write awaits approval: toolhost approve "
                             f"{invocation_id}\n")

    listed = toolhost(env, "pending", "--json")
    assert listed.returncode == 0, listed.stderr
    pending = json.loads(listed.stdout)
    assert [(p["id"], p["tool"], p["version"]) for p in pending] == [
        (invocation_id, "demo.external_write", "1.0.0")]
    assert pending[0]["argument_digest"].startswith("sha256:")
    plain = toolhost(env, "pending")
    assert plain.stdout.startswith(f"{invocation_id}  demo.external_write@1.0.0  ")

    done = toolhost(env, "approve", invocation_id, "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    checksum = "sha256:a1fce4363854ff888cff4b8e7875d600c2682390412a8cf79b37d0b11148b0fa"
    record = {"recorded": True, "destination": "x", "byte_count": 1, "checksum": checksum}
    assert (outcome["status"], outcome["invocation_id"], outcome["structured"]) == (
        "succeeded", invocation_id, record)
    assert outcome["output_trust"] == "INTERNAL_TOOL"
    assert json.loads(toolhost(env, "pending", "--json").stdout) == []

    # The record is on the invocation's row, and the row is the only one.
    conn = sqlite3.connect(database(tmp_path / "data"))
    rows = conn.execute("SELECT id, state, result_structured, arguments FROM tool_invocations"
                        ).fetchall()
    conn.close()
    assert [(r[0], r[1], json.loads(r[2]), json.loads(r[3])) for r in rows] == [
        (invocation_id, "succeeded", record, {"destination": "x", "content": "y"})]


def test_plain_approve_prints_what_the_model_reads(env: dict[str, str]) -> None:
    paused = toolhost(env, "call", "demo.external_write", "--args",
                      '{"destination": "x", "content": "y"}')
    done = toolhost(env, "approve", paused.stdout.strip())
    assert done.returncode == 0
    assert done.stdout == ('Recorded 1 byte for "x" (sha256:a1fce4363854ff888cff4b8e7875d600c2'
                           '682390412a8cf79b37d0b11148b0fa). Nothing was sent: this demo tool '
                           "only records.\n")
