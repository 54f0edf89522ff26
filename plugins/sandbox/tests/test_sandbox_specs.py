"""The spec against the specification's tables, the schemas' bounds, the one reason and its
message byte for byte, the description's promises, and registration step 7."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from sandbox_support import NAME, PLUGINS
from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Risk,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    Trust,
    hookimpl,
)
from toolhost.testing import Harness
from toolhost_sandbox import plugin, run_command, specs
from toolhost_sandbox.messages import RUN_COMMAND_REASONS

SPEC = run_command.SPEC


def test_classification_is_the_specifications_row() -> None:
    assert (SPEC.name, SPEC.version, SPEC.deprecated, SPEC.server_id) == (
        NAME, "1.0.0", False, None)
    assert (SPEC.side_effect, SPEC.risk, SPEC.idempotency) == (
        SideEffect.CODE_EXECUTION, Risk.HIGH, Idempotency.NON_IDEMPOTENT)
    assert (SPEC.output_trust, SPEC.required_scopes) == (
        Trust.EXTERNAL_UNTRUSTED, ("sandbox.execute",))
    assert (SPEC.timeout_s, SPEC.maximum_output_bytes, SPEC.allow_parallel) == (
        300, 1048576, False)
    assert (SPEC.kind, SPEC.source, SPEC.target_kind) == (
        Kind.CAPABILITY, Source.BUILTIN, TargetKind.SANDBOX)


def test_the_hooks() -> None:
    assert plugin.toolhost_domains() == [plugin.DOMAIN] and plugin.DOMAIN.name == "sandbox"
    # Registered unconditionally: where isolation is missing it fails closed, it is not absent.
    (tool,) = plugin.toolhost_tools(Settings())
    # Typed, with Services: built once like a build= factory; its function imports the body's
    # module (the runner, subprocess) at the first call.
    assert tool is specs.RUN_COMMAND and tool.spec is SPEC
    assert tool.call is None and tool.build is not None


def test_the_reasons_and_their_messages() -> None:
    assert [(r.code, r.message) for r in RUN_COMMAND_REASONS] == [(
        "tool.upstream_unavailable.isolation_unavailable",
        "No command was run: this host has no working sandbox. Retrying will not help; "
        "tell the user that running commands is unavailable here.",
    ), (
        "tool.upstream_unavailable.sandbox_busy",
        "No command was run: every sandbox on this host is in use by other calls. Retry in "
        "a moment.",
    )]


def _bounded(schema: dict[str, Any]) -> None:
    assert schema["additionalProperties"] is False
    for prop in schema["properties"].values():
        assert prop.get("type") != "object"  # flat: nothing left open below


def test_schemas_are_closed_with_every_bound() -> None:
    _bounded(run_command.INPUT_SCHEMA)
    _bounded(run_command.OUTPUT_SCHEMA)
    command = run_command.INPUT_SCHEMA["properties"]["command"]
    timeout = run_command.INPUT_SCHEMA["properties"]["timeout_s"]
    assert (command["minLength"], command["maxLength"]) == (1, 16384)
    assert (timeout["type"], timeout["minimum"], timeout["maximum"], timeout["default"]) == (
        "integer", 1, 280, 60)
    assert run_command.INPUT_SCHEMA["required"] == ["command"]


def test_the_commands_own_timeout_fires_before_the_calls_deadline() -> None:
    # The call's deadline (the tool's 300 s) also covers measuring the workspace before the
    # command and collecting its output after: the longest command timeout leaves 20 s for
    # them, so it ends as a timed_out result with its output, never as the pipeline's TIMEOUT.
    # At 300 it never could (D374).
    longest = run_command.INPUT_SCHEMA["properties"]["timeout_s"]["maximum"]
    assert longest + 20 <= SPEC.timeout_s == 300
    assert f"timeout_s (1 to {longest}, default 60)" in SPEC.description


def test_the_readme_gives_the_timeout_the_schema_takes() -> None:
    # Regression: the README still said 1 to 300 after D374; an operator writing 300 got a
    # schema failure.
    longest = run_command.INPUT_SCHEMA["properties"]["timeout_s"]["maximum"]
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"`timeout_s` (1 to {longest}, default 60)" in readme


@pytest.mark.parametrize("arguments", [
    {}, {"command": ""}, {"command": "x" * 16385}, {"command": "true", "timeout_s": 0},
    {"command": "true", "timeout_s": 281}, {"command": "true", "timeout_s": 1.5},
    {"command": "true", "extra": 1}, {"command": "a\u0000b"}, {"command": "a\ud800b"},
])
def test_out_of_bounds_arguments_are_the_hosts_schema_failure(
    toolhost_host: Harness, arguments: dict[str, Any],
) -> None:
    outcome = toolhost_host.call(NAME, arguments)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.content) == (
        "tool.invalid_arguments.schema", "The arguments do not match the tool's input schema.")


def test_the_description_says_cache_pause_and_export() -> None:
    text = SPEC.description
    for words in ("The workspace is a cache that lasts while the run goes on",
                  "a command the user approves in the conversation runs in it",
                  "discarded when the run finishes, and when a call is left waiting",
                  "the approved command then starts in an empty workspace",
                  "artifact.export is the only way a file reaches the owner",
                  "no network", "untrusted"):
        assert words in text


class _Raised:
    """A plugin returning a copy of the spec with output_trust raised to ``trust``."""

    def __init__(self, trust: Trust) -> None:
        self.trust = trust

    @hookimpl
    def toolhost_domains(self) -> list[Domain]:
        return [plugin.DOMAIN]

    @hookimpl
    def toolhost_tools(self, settings: Settings) -> list[Tool]:
        spec = attrs.evolve(SPEC, output_trust=self.trust)
        return [Tool(spec, build=specs.RUN_COMMAND.build, reasons=RUN_COMMAND_REASONS)]


@pytest.mark.parametrize("trust", [Trust.MEMORY, Trust.INTERNAL_TOOL, Trust.USER])
def test_step_7_refuses_the_spec_with_trust_above_external_untrusted(trust: Trust) -> None:
    with pytest.raises(Exception) as info:
        Harness.over({"toolhost-sandbox": _Raised(trust)})
    message = str(info.value)
    assert "sandbox.run_command@1.0.0" in message and "EXTERNAL_UNTRUSTED" in message
    assert "step 7" in message and "toolhost-sandbox" in message
    # The same copy at EXTERNAL_UNTRUSTED registers: the refusal was the trust, nothing else.
    Harness.over({"toolhost-sandbox": _Raised(Trust.EXTERNAL_UNTRUSTED)}).close()


def test_the_real_plugin_registers() -> None:
    with Harness.over(PLUGINS) as harness:
        assert harness.host.registry.resolve(NAME).spec is SPEC
