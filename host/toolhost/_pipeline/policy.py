"""Policy: the 9.2 matrix, held as data, keyed by (side_effect, risk).

Operator configuration may tighten any cell. Loosening a cell is logged at startup; loosening an
EXTERNAL_WRITE cell is refused unless the operator sets the explicit override, because that row
is what keeps a model from writing to the outside world without a person agreeing. A decision
made by a cell so loosened says so on the row it is recorded on (``PolicyDecision.override``),
whatever the log level.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Mapping

import attrs

from toolhost._model.errors import UsageError
from toolhost._model.settings import Settings
from toolhost._model.spec import Risk, SideEffect

__all__ = [
    "DEFAULT_MATRIX",
    "EXTERNAL_WRITE_OVERRIDE",
    "Policy",
    "PolicyAction",
    "PolicyConfigError",
    "PolicyDecision",
    "policy_from_settings",
]


class PolicyAction(enum.Enum):
    ALLOW = "allow"
    REQUIRE_APPROVAL = "approval"
    DENY = "deny"

    @property
    def strictness(self) -> int:
        return _STRICTNESS[self]


_STRICTNESS = {PolicyAction.ALLOW: 0, PolicyAction.REQUIRE_APPROVAL: 1, PolicyAction.DENY: 2}

_A, _R = PolicyAction.ALLOW, PolicyAction.REQUIRE_APPROVAL


def _row(low: PolicyAction, medium: PolicyAction, high: PolicyAction) -> dict[Risk, PolicyAction]:
    return {Risk.LOW: low, Risk.MEDIUM: medium, Risk.HIGH: high}


#: The spec's 9.2 policy matrix, cell for cell (docs/operator.md shows it).
DEFAULT_MATRIX: Mapping[SideEffect, Mapping[Risk, PolicyAction]] = {
    SideEffect.NONE: _row(_A, _A, _A),
    SideEffect.WORKSPACE_READ: _row(_A, _A, _A),
    SideEffect.WORKSPACE_WRITE: _row(_A, _A, _R),
    SideEffect.CODE_EXECUTION: _row(_A, _R, _R),
    SideEffect.EXTERNAL_WRITE: _row(_R, _R, _R),
}


#: The setting that lets an operator loosen an EXTERNAL_WRITE cell, named on every decision such
#: a cell makes.
EXTERNAL_WRITE_OVERRIDE = "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE"


class PolicyConfigError(UsageError, ValueError):
    """The operator's policy configuration is malformed or loosens without the override.
    ``key`` is the cell's key the problem is in, when it is in one (``toolhost.toml`` names
    its line)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@attrs.frozen
class PolicyDecision:
    """What policy said about one invocation, recorded on its row."""

    action: PolicyAction
    side_effect: SideEffect
    risk: Risk
    #: The setting that allowed this cell to be looser than the default, when one did.
    override: str | None = None
    #: The tool always requires approval and the cell allowed the call: asked anyway.
    tool_requires_approval: bool = False

    @property
    def rule(self) -> str:
        return f"{self.side_effect.value}/{self.risk.value}"

    def to_json(self) -> dict[str, str]:
        data = {"action": self.action.value, "rule": self.rule}
        if self.override is not None:
            data["override"] = self.override
        if self.tool_requires_approval:
            data["tool_rule"] = "always_requires_approval"
        return data


@attrs.frozen
class Policy:
    """The effective matrix, and the changes from the default an operator made."""

    matrix: Mapping[SideEffect, Mapping[Risk, PolicyAction]] = DEFAULT_MATRIX
    loosened: tuple[str, ...] = ()
    tightened: tuple[str, ...] = ()
    #: The EXTERNAL_WRITE cells loosened under ``EXTERNAL_WRITE_OVERRIDE``.
    overridden: frozenset[tuple[SideEffect, Risk]] = frozenset()
    #: Each cell's decision once made (a frozen value): step 5 asks it on every call.
    _decided: dict[tuple[SideEffect, Risk], PolicyDecision] = attrs.field(
        factory=dict, init=False, eq=False, repr=False)

    def decide(self, side_effect: SideEffect, risk: Risk) -> PolicyDecision:
        cell = (side_effect, risk)
        decision = self._decided.get(cell)
        if decision is None:
            override = EXTERNAL_WRITE_OVERRIDE if cell in self.overridden else None
            decision = self._decided[cell] = PolicyDecision(
                self.matrix[side_effect][risk], side_effect, risk, override)
        return decision

    @classmethod
    def configured(
        cls,
        changes: Mapping[tuple[SideEffect, Risk], PolicyAction],
        *,
        allow_external_write_loosening: bool = False,
    ) -> Policy:
        matrix = {se: dict(row) for se, row in DEFAULT_MATRIX.items()}
        loosened: list[str] = []
        tightened: list[str] = []
        overridden: set[tuple[SideEffect, Risk]] = set()
        for (side_effect, risk), action in sorted(
            changes.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value)
        ):
            default = DEFAULT_MATRIX[side_effect][risk]
            cell = f"{side_effect.value}/{risk.value}: {default.value} -> {action.value}"
            if action.strictness < default.strictness:
                if side_effect is SideEffect.EXTERNAL_WRITE and not allow_external_write_loosening:
                    raise PolicyConfigError(
                        f"policy loosens {cell}; set {EXTERNAL_WRITE_OVERRIDE}=1 to "
                        "allow an EXTERNAL_WRITE call without approval",
                        f"{side_effect.value}/{risk.value}")
                loosened.append(cell)
                if side_effect is SideEffect.EXTERNAL_WRITE:
                    overridden.add((side_effect, risk))
            elif action.strictness > default.strictness:
                tightened.append(cell)
            matrix[side_effect][risk] = action
        return cls(matrix=matrix, loosened=tuple(loosened), tightened=tuple(tightened),
                   overridden=frozenset(overridden))


def _parse_changes(raw: str) -> dict[tuple[SideEffect, Risk], PolicyAction]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PolicyConfigError(f"TOOLHOST_POLICY is not valid JSON ({exc.msg})") from None
    except RecursionError:  # json's parser gives up at the interpreter's recursion limit
        raise PolicyConfigError("TOOLHOST_POLICY is not a policy (nested too deeply)") from None
    except ValueError:  # the one other: an integer longer than int() converts
        raise PolicyConfigError("TOOLHOST_POLICY is not a policy (an integer of more than "
                                f"{sys.get_int_max_str_digits()} digits)") from None
    if not isinstance(data, dict):
        raise PolicyConfigError('TOOLHOST_POLICY must be an object like {"CODE_EXECUTION/LOW": '
                                '"approval"}')
    changes: dict[tuple[SideEffect, Risk], PolicyAction] = {}
    for key, value in data.items():
        changes[_cell(str(key))] = _action(str(key), value)
    return changes


def _cell(key: str) -> tuple[SideEffect, Risk]:
    """The cell a TOOLHOST_POLICY key names; the error says which part is wrong and what the
    valid ones are (the key, not the value, was the mistake in {"FOO/LOW": "deny"})."""
    side_effect_name, slash, risk_name = key.partition("/")
    if not slash or "/" in risk_name:
        raise PolicyConfigError(f"TOOLHOST_POLICY key {key!r} is not SIDE_EFFECT/RISK "
                                f"(like \"CODE_EXECUTION/LOW\")", key)
    try:
        side_effect = SideEffect(side_effect_name)
    except ValueError:
        raise PolicyConfigError(f"TOOLHOST_POLICY key {key!r}: {side_effect_name!r} is not a "
                                f"side effect ({'|'.join(e.value for e in SideEffect)})",
                                key) from None
    try:
        risk = Risk(risk_name)
    except ValueError:
        raise PolicyConfigError(f"TOOLHOST_POLICY key {key!r}: {risk_name!r} is not a risk "
                                f"({'|'.join(r.value for r in Risk)})", key) from None
    return side_effect, risk


def _action(key: str, value: object) -> PolicyAction:
    try:
        return PolicyAction(value)
    except ValueError:
        actions = "|".join(a.value for a in PolicyAction)
        raise PolicyConfigError(f"TOOLHOST_POLICY entry {key!r}: {value!r} is not an action "
                                f"({actions})", key) from None


def policy_from_settings(env: Mapping[str, str]) -> Policy:
    """TOOLHOST_POLICY (JSON cell changes) and TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE (0/1)."""
    raw = env.get("TOOLHOST_POLICY", "").strip()
    if not raw:
        return Policy()
    override = Settings(env=env).flag(EXTERNAL_WRITE_OVERRIDE)
    return Policy.configured(_parse_changes(raw), allow_external_write_loosening=override)
