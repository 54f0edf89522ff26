"""The 9.2 policy matrix as data, and what operator configuration may change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec

import toolhost
from toolhost import Idempotency, Tool, ToolOutput, Trust
from toolhost._model.spec import Risk, SideEffect
from toolhost._pipeline.policy import (
    DEFAULT_MATRIX,
    Policy,
    PolicyAction,
    PolicyConfigError,
    policy_from_settings,
)
from toolhost._testing.cli import run_toolhost
from toolhost.testing import Harness

A, R = PolicyAction.ALLOW, PolicyAction.REQUIRE_APPROVAL

EXPECTED = {
    SideEffect.NONE: (A, A, A),
    SideEffect.WORKSPACE_READ: (A, A, A),
    SideEffect.WORKSPACE_WRITE: (A, A, R),
    SideEffect.CODE_EXECUTION: (A, R, R),
    SideEffect.EXTERNAL_WRITE: (R, R, R),
}


@pytest.mark.parametrize("side_effect", list(SideEffect))
@pytest.mark.parametrize("risk", list(Risk))
def test_default_matrix_cell_for_cell(side_effect: SideEffect, risk: Risk) -> None:
    expected = EXPECTED[side_effect][[Risk.LOW, Risk.MEDIUM, Risk.HIGH].index(risk)]
    decision = Policy().decide(side_effect, risk)
    assert decision.action is expected is DEFAULT_MATRIX[side_effect][risk]
    assert decision.rule == f"{side_effect.value}/{risk.value}"


def test_tightening_any_cell_is_allowed_and_recorded() -> None:
    policy = policy_from_settings({"TOOLHOST_POLICY": '{"NONE/LOW": "deny"}'})
    assert policy.decide(SideEffect.NONE, Risk.LOW).action is PolicyAction.DENY
    assert policy.tightened == ("NONE/LOW: allow -> deny",) and policy.loosened == ()


def test_loosening_external_write_needs_the_explicit_override() -> None:
    env = {"TOOLHOST_POLICY": '{"EXTERNAL_WRITE/LOW": "allow"}'}
    with pytest.raises(PolicyConfigError, match="TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE=1"):
        policy_from_settings(env)
    policy = policy_from_settings({**env, "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"})
    assert policy.decide(SideEffect.EXTERNAL_WRITE, Risk.LOW).action is PolicyAction.ALLOW
    assert policy.loosened == ("EXTERNAL_WRITE/LOW: approval -> allow",)


def test_loosening_another_cell_is_recorded_as_loosened() -> None:
    policy = policy_from_settings({"TOOLHOST_POLICY": '{"CODE_EXECUTION/MEDIUM": "allow"}'})
    assert policy.loosened == ("CODE_EXECUTION/MEDIUM: approval -> allow",)


@pytest.mark.parametrize(
    "raw", ["{", "[]", '{"NONE": "allow"}', '{"NONE/LOW": "maybe"}', '{"WRITE/LOW": "deny"}']
)
def test_malformed_configuration_is_one_clear_error(raw: str) -> None:
    with pytest.raises(PolicyConfigError, match="TOOLHOST_POLICY"):
        policy_from_settings({"TOOLHOST_POLICY": raw})


@pytest.mark.parametrize(("raw", "message"), [
    # Regression: a bad key blamed the valid value ("'deny' is not SIDE_EFFECT/RISK").
    ('{"FOO/LOW": "deny"}', "TOOLHOST_POLICY key 'FOO/LOW': 'FOO' is not a side effect "
     "(NONE|WORKSPACE_READ|WORKSPACE_WRITE|CODE_EXECUTION|EXTERNAL_WRITE)"),
    ('{"NONE/HUGE": "deny"}', "TOOLHOST_POLICY key 'NONE/HUGE': 'HUGE' is not a risk "
     "(LOW|MEDIUM|HIGH)"),
    ('{"NONE": "deny"}', "TOOLHOST_POLICY key 'NONE' is not SIDE_EFFECT/RISK "
     '(like "CODE_EXECUTION/LOW")'),
    ('{"NONE/LOW/X": "deny"}', "TOOLHOST_POLICY key 'NONE/LOW/X' is not SIDE_EFFECT/RISK "
     '(like "CODE_EXECUTION/LOW")'),
    ('{"NONE/LOW": "maybe"}', "TOOLHOST_POLICY entry 'NONE/LOW': 'maybe' is not an action "
     "(allow|approval|deny)"),
])
def test_the_error_names_the_part_that_is_wrong(raw: str, message: str) -> None:
    with pytest.raises(PolicyConfigError) as refused:
        policy_from_settings({"TOOLHOST_POLICY": raw})
    assert str(refused.value) == message


def test_no_configuration_is_the_default() -> None:
    assert policy_from_settings({}) == Policy()


def test_a_decision_of_an_overridden_external_write_cell_names_the_override() -> None:
    policy = policy_from_settings({
        "TOOLHOST_POLICY": '{"EXTERNAL_WRITE/LOW": "allow", "CODE_EXECUTION/MEDIUM": "allow", '
                           '"EXTERNAL_WRITE/HIGH": "deny"}',
        "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1",
    })
    assert policy.decide(SideEffect.EXTERNAL_WRITE, Risk.LOW).to_json() == {
        "action": "allow", "rule": "EXTERNAL_WRITE/LOW",
        "override": "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE"}
    # Only a cell the override loosened says so: not a tightened one, not another loosened one.
    assert policy.decide(SideEffect.EXTERNAL_WRITE, Risk.HIGH).to_json() == {
        "action": "deny", "rule": "EXTERNAL_WRITE/HIGH"}
    assert policy.decide(SideEffect.EXTERNAL_WRITE, Risk.MEDIUM).to_json() == {
        "action": "approval", "rule": "EXTERNAL_WRITE/MEDIUM"}
    assert policy.decide(SideEffect.CODE_EXECUTION, Risk.MEDIUM).to_json() == {
        "action": "allow", "rule": "CODE_EXECUTION/MEDIUM"}
    assert Policy().decide(SideEffect.EXTERNAL_WRITE, Risk.LOW).override is None


# ------------------------------------------------------------------ a tool that always asks (D430)

def _always(call_log: list[str]) -> Tool:
    def send(arguments: Any, context: Any) -> ToolOutput:
        call_log.append(arguments["x"])
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

    spec = make_spec(name="fx.send", side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.LOW,
                     idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)
    return Tool(spec, call=send, always_requires_approval=True)


@pytest.mark.parametrize(("cell", "decision"), [
    # Loosened under the override: asked anyway, and the override, which decided nothing, is
    # not named.
    ("allow", {"action": "approval", "rule": "EXTERNAL_WRITE/LOW",
               "tool_rule": "always_requires_approval"}),
    ("approval", {"action": "approval", "rule": "EXTERNAL_WRITE/LOW"}),
])
def test_a_tool_that_always_requires_approval_is_asked_for_whatever_the_cell_allows(
        cell: str, decision: dict[str, str]) -> None:
    ran: list[str] = []
    settings = {"TOOLHOST_POLICY": json.dumps({"EXTERNAL_WRITE/LOW": cell}),
                "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"}
    with Harness.over({"fx-dist": make_plugin(tools=[_always(ran)])}, settings=settings) as h:
        paused = h.invoke("fx.send", x="a")
        assert paused.paused and ran == []
        assert paused.decision == decision
        assert h.record(paused.invocation_id or "").policy == decision
        assert h.approve(paused.invocation_id or "").ok and ran == ["a"]


def test_a_tool_that_always_requires_approval_is_still_denied_by_a_denying_cell() -> None:
    ran: list[str] = []
    settings = {"TOOLHOST_POLICY": '{"EXTERNAL_WRITE/LOW": "deny"}'}
    with Harness.over({"fx-dist": make_plugin(tools=[_always(ran)])}, settings=settings) as h:
        denied = h.invoke("fx.send", x="a")
    assert denied.status.value == "denied" and ran == []


def test_the_typed_decorator_takes_the_flag_and_the_first_party_tools_carry_it() -> None:
    from toolhost_demo.specs import EXTERNAL_WRITE

    @toolhost.tool("fx.typed", "1.0.0", side_effect=SideEffect.NONE, risk=Risk.LOW,
                   idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
                   required_scopes=(), timeout_s=1, maximum_output_bytes=64, reasons=(),
                   always_requires_approval=True)
    def typed(x: str) -> str:
        """Echo."""
        return x

    assert typed.always_requires_approval and EXTERNAL_WRITE.always_requires_approval


def test_demo_external_write_pauses_under_the_override_and_show_says_why(
        tmp_path: Path) -> None:
    env = {"TOOLHOST_POLICY": '{"EXTERNAL_WRITE/HIGH": "allow"}',
           "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"}
    paused = run_toolhost("call", "demo.external_write", "--args",
                          '{"destination": "d", "content": "c"}', data_dir=tmp_path,
                          plugins="toolhost-demo", env=env)
    assert paused.returncode == 3, paused.stderr
    invocation_id = paused.stdout.strip()
    shown = run_toolhost("show", invocation_id, data_dir=tmp_path, plugins="toolhost-demo",
                         env=env)
    assert "policy       approval (EXTERNAL_WRITE/HIGH), which the tool always requires\n" in (
        shown.stdout), shown.stdout
