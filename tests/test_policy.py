"""The 9.2 policy matrix as data, and what operator configuration may change."""

from __future__ import annotations

import pytest

from toolhost._model.spec import Risk, SideEffect
from toolhost._pipeline.policy import (
    DEFAULT_MATRIX,
    Policy,
    PolicyAction,
    PolicyConfigError,
    policy_from_settings,
)

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
