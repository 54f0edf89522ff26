"""Registration: each pair of tools exists only with its flag, classified exactly as the
specification's email classification tables say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from email_support import MODE, UNSUBSCRIBE, harness
from toolhost import Idempotency, Risk, Settings, SideEffect, Trust
from toolhost_email import plugin, specs

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


def test_each_tool_is_registered_as_its_spec_and_a_build_factory() -> None:
    """The body is built at the tool's first call; the spec is the one ``specs`` pins."""
    tools = plugin.toolhost_tools(Settings(env={**MODE, **UNSUBSCRIBE}))
    assert [(t.spec, t.call, t.build) for t in tools] == [
        (specs.CONTEXT_SPEC, None, "toolhost_email.context_tool:build"),
        (specs.FEEDBACK_SPEC, None, "toolhost_email.feedback_tool:build"),
        (specs.SUBSCRIPTIONS_SPEC, None, "toolhost_email.subscriptions_tool:build"),
        (specs.UNSUBSCRIBE_SPEC, None, "toolhost_email.unsubscribe_tool:build"),
    ]


def test_loading_the_plugin_imports_the_specs_not_the_bodies() -> None:
    """What ``toolhost check`` pays with both flags set: the specs, the reasons and the flags;
    never a tool body, the census, the cache, or httpx (which only email.unsubscribe uses)."""
    code = ("import sys; from toolhost import Settings; import toolhost_email.plugin as p; "
            "p.toolhost_tools(Settings(env={'AGENT_EMAIL_MODE_ENABLED': '1', "
            "'AGENT_EMAIL_UNSUBSCRIBE_ENABLED': '1'})); "
            "print(sorted(m for m in sys.modules if m.startswith('toolhost_email') "
            "or m == 'httpx'))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == repr(["toolhost_email", "toolhost_email.config", "toolhost_email.messages",
                           "toolhost_email.plugin", "toolhost_email.specs",
                           "toolhost_email.wire"])


def test_each_body_re_exports_its_spec_and_states_every_outcome() -> None:
    from toolhost_email import context_tool, feedback_tool, subscriptions_tool, unsubscribe_tool

    assert context_tool.SPEC is specs.CONTEXT_SPEC
    assert feedback_tool.SPEC is specs.FEEDBACK_SPEC
    assert subscriptions_tool.SPEC is specs.SUBSCRIPTIONS_SPEC
    assert unsubscribe_tool.SPEC is specs.UNSUBSCRIBE_SPEC
    # The output schema's enum and the body's Outcome type are one closed set.
    assert get_args(unsubscribe_tool.Outcome) == specs.OUTCOMES
