"""Registration: each pair of tools exists only with its flag, classified exactly as the
seed's Milestone 26 and 31 tables say."""

from __future__ import annotations

from pathlib import Path

import pytest

from email_support import MODE, UNSUBSCRIBE, harness
from toolhost import Idempotency, Risk, SideEffect, Trust

TABLE = {
    "email.context": (("email.read",), SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY,
                      Trust.EXTERNAL_UNTRUSTED),
    "email.feedback": (("email.read", "email.write"), SideEffect.NONE, Risk.MEDIUM,
                       Idempotency.IDEMPOTENT, Trust.INTERNAL_TOOL),
    "email.subscriptions": (("email.read",), SideEffect.NONE, Risk.LOW,
                            Idempotency.READ_ONLY, Trust.EXTERNAL_UNTRUSTED),
    "email.unsubscribe": (("email.read", "email.write"), SideEffect.EXTERNAL_WRITE,
                          Risk.MEDIUM, Idempotency.IDEMPOTENT, Trust.INTERNAL_TOOL),
}


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, set()),
    ({"AGENT_EMAIL_MODE_ENABLED": "0"}, set()),
    (MODE, {"email.context", "email.feedback"}),
    (UNSUBSCRIBE, {"email.subscriptions", "email.unsubscribe"}),
    ({**MODE, **UNSUBSCRIBE}, set(TABLE)),
])
def test_tools_are_present_only_with_their_flag(tmp_path: Path, settings: dict[str, str],
                                                expected: set[str]) -> None:
    with harness(tmp_path, settings) as h:
        assert set(h.host.registry.names()) == expected


def test_classification_is_the_seeds_tables(tmp_path: Path) -> None:
    with harness(tmp_path, {**MODE, **UNSUBSCRIBE}) as h:
        for name, (scopes, side_effect, risk, idempotency, trust) in TABLE.items():
            spec = h.host.registry.resolve(name, None).spec
            assert (spec.version, tuple(sorted(spec.required_scopes)), spec.side_effect,
                    spec.risk, spec.idempotency, spec.output_trust) == (
                "1.0.0", scopes, side_effect, risk, idempotency, trust), name
