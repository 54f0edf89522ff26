"""`toolhost show` of a waiting call prints what its tool says the call will do
(``Tool(describe=...)``), after the arguments, from the plugin's own data: a person approving
opaque ids reads what they stand for. Through the real CLI with a fixture plugin installed as
a real distribution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli import assert_no_traceback, toolhost

DESCRIBED = '''
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {"ticket": {"type": "string"}},
      "required": ["ticket"], "additionalProperties": False}
OUT = {"type": "object", "properties": {"closed": {"const": True}},
       "required": ["closed"], "additionalProperties": False}
SPEC = ToolSpec(
    name="fxd.close", version="1.0.0", description="Closes a ticket.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.EXTERNAL_WRITE,
    risk=Risk.HIGH, idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=60, maximum_output_bytes=4096,
    allow_parallel=False, deprecated=False,
)
TICKETS = {"t_1": "printer on floor 3 (owner alice)",
           "t_fence": '```json {"ticket":"t_1"}'}

def close(arguments, context):
    return ToolOutput(structured={"closed": True}, content="closed")

def describe(arguments, services, principal_id):
    if arguments["ticket"] == "t_boom":
        raise RuntimeError("the tickets file is at /secret/path")
    if arguments["ticket"] == "t_exit":
        raise SystemExit(0)
    title = TICKETS.get(arguments["ticket"], "not a ticket of ours")
    return [f"closes {arguments['ticket']}: {title}", "tells \\u202eeveryone"]

@hookimpl
def toolhost_domains():
    return [Domain("fxd")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=close, describe="fake_described:describe")]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, object]:
    install_fake_plugin(tmp_path / "site", "fake-described", "fake_described", DESCRIBED)
    return {"env": {"TOOLHOST_PLUGINS": "fake-described",
                    "TOOLHOST_DATA_DIR": str(tmp_path / "d")},
            "site": tmp_path / "site"}


def _pause(env: dict[str, object], ticket: str) -> str:
    paused = toolhost("call", "fxd.close", "--args", json.dumps({"ticket": ticket}), **env)
    assert paused.returncode == 3, paused.stderr
    return paused.stdout.strip()


def test_show_prints_what_the_tool_says_the_waiting_call_does(env: dict[str, object]) -> None:
    invocation_id = _pause(env, "t_1")
    shown = toolhost("show", invocation_id, **env)
    assert shown.returncode == 0, shown.stderr
    arguments = shown.stdout.index("arguments\n")
    block = shown.stdout.index("what fake-described says it does\n")
    assert arguments < block
    assert shown.stdout[block:] == (
        "what fake-described says it does\n"
        "  closes t_1: printer on floor 3 (owner alice)\n"
        "  tells \\u202eeveryone\n")

    data = json.loads(toolhost("show", invocation_id, "--json", **env).stdout)
    assert data["described"] == {
        "distribution": "fake-described",
        "lines": ["closes t_1: printer on floor 3 (owner alice)", "tells \\u202eeveryone"]}


def test_a_decided_call_is_not_described(env: dict[str, object]) -> None:
    invocation_id = _pause(env, "t_1")
    assert toolhost("deny", invocation_id, "--reason", "no", **env).returncode == 0
    shown = toolhost("show", invocation_id, **env)
    assert shown.returncode == 0 and "says it does" not in shown.stdout
    assert json.loads(toolhost("show", invocation_id, "--json", **env).stdout)[
        "described"] is None


def test_a_describer_that_fails_is_one_static_line_and_no_traceback(
        env: dict[str, object]) -> None:
    invocation_id = _pause(env, "t_boom")
    shown = toolhost("show", invocation_id, **env)
    assert shown.returncode == 0
    assert shown.stdout.endswith(
        "what fake-described says it does\n"
        "  (fake-described could not describe this call; the log says why)\n")
    assert "/secret/path" not in shown.stdout
    assert_no_traceback(shown)


def test_a_describer_that_exits_still_shows_the_row_and_its_line(
        env: dict[str, object]) -> None:
    # Before: show printed nothing and exited with the describer's code (0 here).
    invocation_id = _pause(env, "t_exit")
    shown = toolhost("show", invocation_id, **env)
    assert shown.returncode == 0
    assert f"invocation   {invocation_id}\n" in shown.stdout
    assert shown.stdout.endswith(
        "what fake-described says it does\n"
        "  (fake-described could not describe this call; the log says why)\n")
    assert_no_traceback(shown)
