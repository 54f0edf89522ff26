"""Hard gate 1 across the roster: every first-party plugin installed together registers, and
each of the eight roster tools that exists carries the seed's classification, field by field;
so does each conditional tool (email, people, media) with its flag or credential set.

The host session installs every distribution under plugins/, so this test sees exactly what an
operator who installs them all gets. A roster tool whose plugin does not exist yet is listed in
``NOT_YET_BUILT``; once its plugin lands the test fails until it is removed from there, so the
gate cannot silently stop covering a tool.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from toolhost import Idempotency, Kind, Risk, Settings, SideEffect, Source, TargetKind, Trust
from toolhost._composition import Host
from toolhost._registration.discovery import load_distributions

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = sorted(
    tomllib.loads(p.read_text())["project"]["name"]
    for p in ROOT.glob("plugins/*/pyproject.toml")
)

# The seed's four classification tables (its "Every field of the completed ToolSpec, for all
# eight of the roster"), one row per tool: side_effect, risk, idempotency, output_trust,
# required_scopes, timeout_s, maximum_output_bytes, allow_parallel, target_kind.
ROSTER: dict[str, tuple[Any, ...]] = {
    "math.calculate": (SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY, Trust.INTERNAL_TOOL,
                       (), 2, 4096, True, TargetKind.IN_PROCESS),
    "system.current_time": (SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY,
                            Trust.INTERNAL_TOOL, (), 2, 4096, True, TargetKind.IN_PROCESS),
    "workspace.read_text": (SideEffect.WORKSPACE_READ, Risk.LOW, Idempotency.READ_ONLY,
                            Trust.INTERNAL_TOOL, ("workspace.read",), 10, 1048576, True,
                            TargetKind.IN_PROCESS),
    "workspace.list_files": (SideEffect.WORKSPACE_READ, Risk.LOW, Idempotency.READ_ONLY,
                             Trust.INTERNAL_TOOL, ("workspace.read",), 10, 262144, True,
                             TargetKind.IN_PROCESS),
    "workspace.write_text": (SideEffect.WORKSPACE_WRITE, Risk.MEDIUM, Idempotency.IDEMPOTENT,
                             Trust.INTERNAL_TOOL, ("workspace.write",), 10, 4096, False,
                             TargetKind.IN_PROCESS),
    "artifact.export": (SideEffect.WORKSPACE_READ, Risk.LOW, Idempotency.IDEMPOTENT,
                        Trust.INTERNAL_TOOL, ("artifact.write",), 30, 4096, False,
                        TargetKind.IN_PROCESS),
    "sandbox.run_command": (SideEffect.CODE_EXECUTION, Risk.HIGH, Idempotency.NON_IDEMPOTENT,
                            Trust.EXTERNAL_UNTRUSTED, ("sandbox.execute",), 300, 1048576,
                            False, TargetKind.SANDBOX),
    "demo.external_write": (SideEffect.EXTERNAL_WRITE, Risk.HIGH, Idempotency.NON_IDEMPOTENT,
                            Trust.INTERNAL_TOOL, ("demo.write",), 10, 4096, False,
                            TargetKind.IN_PROCESS),
}
#: Roster tools whose plugin is not in this repository yet.
NOT_YET_BUILT: frozenset[str] = frozenset()

# The conditional tools, as the specification classifies them: its email tables, its people
# classes (read-only, parallel-safe, memory trust, people.read; history@1.1.0's source read also
# email.read, D173) and its media rules (D144). Fields: side_effect, risk, idempotency,
# output_trust, required_scopes, allow_parallel; None where the specification fixes nothing.
EMAIL_READ, EMAIL_WRITE = "email.read", "email.write"
CONDITIONAL: dict[str, tuple[Any, ...]] = {
    "email.context": (SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY,
                      Trust.EXTERNAL_UNTRUSTED, (EMAIL_READ,), None),
    "email.feedback": (SideEffect.NONE, Risk.MEDIUM, Idempotency.IDEMPOTENT, Trust.INTERNAL_TOOL,
                       (EMAIL_READ, EMAIL_WRITE), None),
    "email.subscriptions": (SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY,
                            Trust.EXTERNAL_UNTRUSTED, (EMAIL_READ,), None),
    "email.unsubscribe": (SideEffect.EXTERNAL_WRITE, Risk.MEDIUM, Idempotency.IDEMPOTENT,
                          Trust.INTERNAL_TOOL, (EMAIL_READ, EMAIL_WRITE), None),
    "people.search": (None, None, Idempotency.READ_ONLY, Trust.MEMORY, ("people.read",), True),
    "people.context": (None, None, Idempotency.READ_ONLY, Trust.MEMORY, ("people.read",), True),
    "people.history@1.0.0": (None, None, Idempotency.READ_ONLY, Trust.MEMORY, ("people.read",),
                             True),
    # The source read checks email.read when it is asked for (as media checks artifact.read
    # for references), so an unpinned history page needs people.read alone.
    "people.history@1.1.0": (None, None, Idempotency.READ_ONLY, Trust.MEMORY,
                             ("people.read",), True),
    "image.generate": (SideEffect.EXTERNAL_WRITE, Risk.HIGH, Idempotency.NON_IDEMPOTENT,
                       Trust.EXTERNAL_UNTRUSTED, ("media.generate", "artifact.write"), False),
    "video.generate": (SideEffect.EXTERNAL_WRITE, Risk.HIGH, Idempotency.NON_IDEMPOTENT,
                       Trust.EXTERNAL_UNTRUSTED, ("media.generate", "artifact.write"), False),
}
#: What turns every conditional tool on.
ALL_FLAGS = {"AGENT_EMAIL_MODE_ENABLED": "1", "AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1",
             "AGENT_PEOPLE_ENABLED": "1", "TENSORSCALE_API_KEY": "ts-roster-test-key"}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # Registration runs all seven steps over the union: one refusal anywhere fails here.
    settings = Settings(env={**ALL_FLAGS,
                             "TOOLHOST_DATA_DIR": str(tmp_path_factory.mktemp("data"))})
    with Host.from_sources(load_distributions(FIRST_PARTY), settings=settings) as h:
        yield h


def test_every_first_party_plugin_registers_together(host: Host) -> None:
    assert {r.distribution for r in host.registry} == set(FIRST_PARTY)


def test_the_roster_tools_that_exist_are_registered_and_no_other_is_missing(host: Host) -> None:
    registered = set(host.registry.names())
    assert set(ROSTER) - registered == NOT_YET_BUILT
    assert NOT_YET_BUILT.isdisjoint(registered)


@pytest.mark.parametrize("name", sorted(set(ROSTER) - NOT_YET_BUILT))
def test_each_roster_tool_has_the_seeds_classification(host: Host, name: str) -> None:
    for version in host.registry.versions(name):
        spec = host.registry.resolve(name, version).spec
        assert (spec.side_effect, spec.risk, spec.idempotency, spec.output_trust,
                tuple(spec.required_scopes), spec.timeout_s, spec.maximum_output_bytes,
                spec.allow_parallel, spec.target_kind) == ROSTER[name], version
        # The same for all eight: builtin capabilities, no server, not deprecated.
        assert (spec.kind, spec.source, spec.server_id, spec.deprecated) == (
            Kind.CAPABILITY, Source.BUILTIN, None, False)


def test_every_conditional_tool_is_registered_with_its_flags(host: Host) -> None:
    names = {key.split("@")[0] for key in CONDITIONAL}
    assert names <= set(host.registry.names())


@pytest.mark.parametrize("key", sorted(CONDITIONAL))
def test_each_conditional_tool_has_the_seeds_classification(host: Host, key: str) -> None:
    name, _, pinned = key.partition("@")
    versions = [pinned] if pinned else list(host.registry.versions(name))
    for version in versions:
        spec = host.registry.resolve(name, version).spec
        got = (spec.side_effect, spec.risk, spec.idempotency, spec.output_trust,
               tuple(sorted(spec.required_scopes)), spec.allow_parallel)
        row = CONDITIONAL[key]
        expected = (*row[:4], tuple(sorted(row[4])), row[5])
        assert tuple(e if e is None else g for g, e in zip(got, expected, strict=True)) == (
            expected), version
        assert (spec.kind, spec.source, spec.server_id, spec.deprecated) == (
            Kind.CAPABILITY, Source.BUILTIN, None, False)


def test_without_flags_no_conditional_tool_is_registered() -> None:
    with Host.from_sources(load_distributions(FIRST_PARTY), settings=Settings(env={})) as h:
        names = set(h.registry.names())
    assert not names & {key.split("@")[0] for key in CONDITIONAL}
