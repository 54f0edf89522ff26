"""`toolhost call` pausing, `pending`, `approve`, `deny`: the approval flow at the operator's
surface, with a fixture plugin installed as a real distribution and a real data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli import toolhost

WRITER = '''
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {"destination": {"type": "string"}},
      "required": ["destination"], "additionalProperties": False}
OUT = {"type": "object", "properties": {"recorded": {"const": True}},
       "required": ["recorded"], "additionalProperties": False}
SPEC = ToolSpec(
    name="fxw.external_write", version="1.0.0", description="Records a write.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.EXTERNAL_WRITE,
    risk=Risk.HIGH, idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("fxw.write",), timeout_s=10, maximum_output_bytes=4096,
    allow_parallel=False, deprecated=False,
)

def write(arguments, context):
    return ToolOutput(structured={"recorded": True}, content="recorded " +
                      arguments["destination"])

@hookimpl
def toolhost_domains():
    return [Domain("fxw")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=write)]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, object]:
    install_fake_plugin(tmp_path / "site", "fake-writer", "fake_writer", WRITER)
    return {"env": {"TOOLHOST_PLUGINS": "fake-writer", "TOOLHOST_DATA_DIR": str(tmp_path / "d")},
            "site": tmp_path / "site"}


def test_pause_pending_approve(env: dict[str, object]) -> None:
    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "x"}', **env)
    assert paused.returncode == 3
    invocation_id = paused.stdout.strip()
    assert len(invocation_id) == 32
    assert paused.stderr == (f"toolhost: fxw.external_write awaits approval: toolhost approve "
                             f"{invocation_id}\n")

    pending = json.loads(toolhost("pending", "--json", **env).stdout)
    assert [(p["id"], p["tool"], p["version"]) for p in pending] == [
        (invocation_id, "fxw.external_write", "1.0.0")]
    assert pending[0]["argument_digest"].startswith("sha256:") and pending[0]["created"]

    approved = toolhost("approve", invocation_id, "--json", **env)
    assert approved.returncode == 0, approved.stderr
    outcome = json.loads(approved.stdout)
    assert (outcome["status"], outcome["content"], outcome["structured"]) == (
        "succeeded", "recorded x", {"recorded": True})
    assert outcome["invocation_id"] == invocation_id

    again = toolhost("approve", invocation_id, **env)
    assert (again.returncode, again.stdout) == (0, "recorded x\n")
    assert json.loads(toolhost("pending", "--json", **env).stdout) == []


def test_deny_and_the_errors_around_it(env: dict[str, object]) -> None:
    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "y"}', **env)
    invocation_id = paused.stdout.strip()
    denied = toolhost("deny", invocation_id, "--reason", "no", **env)
    assert denied.returncode == 0
    assert denied.stdout == (
        "An operator denied this call. Do not retry it; ask the user how to proceed.\n")
    late = toolhost("approve", invocation_id, **env)
    assert (late.returncode, late.stderr) == (1, f"toolhost: invocation {invocation_id} was "
                                                 "denied\n")
    missing = toolhost("approve", "nope", **env)
    assert (missing.returncode, missing.stderr) == (
        1, "toolhost: no invocation 'nope' (toolhost pending lists them)\n")
    no_reason = toolhost("deny", invocation_id, **env)
    assert no_reason.returncode == 2 and "Traceback" not in no_reason.stderr


def test_call_json_on_pause_prints_the_pause(env: dict[str, object]) -> None:
    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "z"}', "--json",
                      **env)
    assert paused.returncode == 3
    data = json.loads(paused.stdout)
    assert data["status"] == "awaiting_approval"
    assert data["decision"] == {"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"}
