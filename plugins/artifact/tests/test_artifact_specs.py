"""Both versions' specs against the specification's classification table, their schemas, the
reasons each declares with their messages byte for byte, the plugin's hooks, and version pins."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from artifact_support import TOOL, Call
from toolhost import (
    Idempotency,
    Kind,
    Reason,
    Risk,
    SchemaRule,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
)
from toolhost.testing import Harness
from toolhost_artifact import export_file, export_v1, export_v2, messages, names, plugin, specs

SPECS = {"1.0.0": export_v1.SPEC, "2.0.0": export_v2.SPEC}


def tools() -> dict[str, Tool]:
    return {t.spec.version: t for t in plugin.toolhost_tools(Settings())}


@pytest.mark.parametrize("version", sorted(SPECS))
def test_classification_matches_the_table(version: str) -> None:
    # The specification's four fences, one row: artifact.export.
    spec: ToolSpec = SPECS[version]
    assert (spec.name, spec.version, spec.domain) == (TOOL, version, "artifact")
    assert (spec.side_effect, spec.risk, spec.idempotency) == (
        SideEffect.WORKSPACE_READ, Risk.LOW, Idempotency.IDEMPOTENT)
    assert (spec.output_trust, spec.required_scopes) == (Trust.INTERNAL_TOOL, ("artifact.write",))
    assert (spec.timeout_s, spec.maximum_output_bytes, spec.allow_parallel) == (30, 4096, False)
    assert (spec.kind, spec.source, spec.target_kind, spec.server_id, spec.deprecated) == (
        Kind.CAPABILITY, Source.BUILTIN, TargetKind.IN_PROCESS, None, False)


REF_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                   "media_type": {"type": "string"}, "byte_count": {"type": "integer"},
                   "checksum": {"type": "string"}},
    "required": ["id", "name", "media_type", "byte_count", "checksum"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("version", sorted(SPECS))
def test_the_output_is_the_artifact_ref_closed(version: str) -> None:
    assert SPECS[version].output_schema == REF_SCHEMA


def test_v1_takes_a_path_only() -> None:
    assert export_v1.SPEC.input_schema == {
        "type": "object", "properties": {"path": {"type": "string", "maxLength": 4096}},
        "required": ["path"], "additionalProperties": False,
    }


def test_v2_schema() -> None:
    schema: Mapping[str, Any] = export_v2.SPEC.input_schema
    properties = schema["properties"]
    assert (schema["required"], schema["additionalProperties"]) == ([], False)
    assert sorted(properties) == ["content", "name", "path"]
    assert {k: properties["path"][k] for k in ("type", "maxLength", "default")} == {
        "type": "string", "maxLength": 4096, "default": ""}
    assert {k: properties["content"][k] for k in ("type", "maxLength")} == {
        "type": "string", "maxLength": 1048576}
    assert "default" not in properties["content"]
    # No default for name: it would make every call look as if it named its content.
    assert {k: properties["name"].get(k) for k in ("type", "minLength", "maxLength", "pattern",
                                                   "default")} == {
        "type": "string", "minLength": 1, "maxLength": 255, "pattern": names.PATTERN,
        "default": None}


@pytest.mark.parametrize("version", sorted(SPECS))
def test_descriptions_say_the_workspace_is_discarded_and_this_is_the_way_out(
    version: str,
) -> None:
    description = SPECS[version].description
    assert "discarded when the run finishes or pauses" in description
    assert "the only way a file reaches the owner" in description
    assert ("attached to your reply" in description) is (version == "2.0.0")
    assert ("Give exactly one of path and content" in description) is (version == "2.0.0")


MESSAGES = {
    "tool.not_found.no_such_file": "No file at that path in the workspace.",
    "tool.invalid_arguments.is_directory": "That path is a directory. Export one file at a time.",
    "tool.invalid_arguments.file_too_large": "That file is larger than the 64 MiB an export may hold.",
    "tool.invalid_arguments.unsafe_file_name":
        "That file's name cannot be handed over as it is: it starts or ends with a dot, ends "
        "with a space, has two spaces in a row, is a device name such as CON or NUL, or holds "
        "a control, format or separator character, a space other than the plain one, or one "
        "of <>:\"|?*. Copy it to a plain name such as report.txt and export that.",
    "tool.invalid_arguments.both_path_and_content":
        "Give either path (a workspace file) or content (text to save), not both.",
    "tool.invalid_arguments.no_path_or_content":
        "Give path (a workspace file) or content (text to save).",
    "tool.invalid_arguments.name_with_path":
        "name only names content. An exported file keeps its own name; omit name.",
    "tool.invalid_arguments.content_too_long":
        "content is longer than 1 MiB (1048576 bytes of UTF-8). Export less text, or write it "
        "to a workspace file and export that by path.",
    "tool.invalid_arguments.invalid_name":
        "name must be a bare file name such as report.txt: no / or \\, no control characters, "
        "no <>:\"|?*, no space but the plain one, no two spaces in a row, not starting with a "
        "dot, not ending with a dot or space, not a device name such as CON or NUL, at most 255 "
        "bytes.",
    "tool.invalid_arguments.name_not_text":
        "content is saved as text, so name needs a text extension such as .txt, .md, .csv, "
        ".json or .html.",
}
V1_CODES = ["tool.not_found.no_such_file", "tool.invalid_arguments.is_directory",
            "tool.invalid_arguments.file_too_large", "tool.invalid_arguments.unsafe_file_name"]


def test_each_version_declares_its_reasons_with_static_messages() -> None:
    declared = tools()
    assert sorted(declared) == ["1.0.0", "2.0.0"]
    assert [(r.code, r.message) for r in declared["1.0.0"].reasons] == [
        (c, MESSAGES[c]) for c in V1_CODES]
    assert [(r.code, r.message) for r in declared["2.0.0"].reasons] == list(MESSAGES.items())
    assert messages.MESSAGES == MESSAGES


def test_v2_maps_its_own_schema_rules_to_its_reasons() -> None:
    rules = {r.code: r.schema_rules for r in tools()["2.0.0"].reasons if isinstance(r, Reason)}
    assert rules["tool.invalid_arguments.content_too_long"] == (
        SchemaRule("/content", "maxLength"),)
    assert rules["tool.invalid_arguments.invalid_name"] == (
        SchemaRule("/name", "minLength"), SchemaRule("/name", "maxLength"),
        SchemaRule("/name", "pattern"))
    assert all(rules[c] == () for c in rules if c not in (
        "tool.invalid_arguments.content_too_long", "tool.invalid_arguments.invalid_name"))


def test_the_too_large_message_states_the_ceiling() -> None:
    assert export_file.EXPORT_CEILING == 64 * 1024 * 1024
    assert f"{export_file.EXPORT_CEILING // (1024 * 1024)} MiB" in MESSAGES[
        "tool.invalid_arguments.file_too_large"]


def test_the_plugin_owns_the_artifact_domain() -> None:
    assert [d.name for d in plugin.toolhost_domains()] == ["artifact"]


def test_both_versions_register_and_the_latest_is_2_0_0(host: Harness) -> None:
    assert host.host.registry.resolve(TOOL, None).spec.version == "2.0.0"
    assert host.host.registry.resolve(TOOL, "1.0.0").spec is export_v1.SPEC


def test_each_version_runs_its_module_body_built_on_first_use(host: Harness) -> None:
    # A version's module is imported at its first call, so registration (and toolhost check)
    # imports only the specs: 2.0.0's by reference, 1.0.0's inside its typed function.
    assert tools()["1.0.0"] is specs.EXPORT_V1
    assert (tools()["2.0.0"].call, tools()["2.0.0"].build) == (
        "toolhost_artifact.export_v2:export", None)
    assert host.tool(TOOL, "2.0.0") is export_v2.export


def test_a_run_pinned_to_1_0_0_keeps_its_contract(host: Harness, root: Path) -> None:
    (root / "a.txt").write_bytes(b"abc")
    pinned = host.start_run(workspace=root, pins={TOOL: "1.0.0"})
    try:
        outcome = host.call(TOOL, {"path": "a.txt"}, run=pinned)
        assert (outcome.ok, outcome.version) == (True, "1.0.0")
        assert outcome.structured is not None
        assert outcome.content == (
            f'Exported "a.txt": 3 bytes, text/plain, artifact {outcome.structured["id"]}.')
        # content is 2.0.0's: 1.0.0's closed schema refuses it with the host's one failure.
        refused = host.call(TOOL, {"content": "x"}, run=pinned)
        assert (refused.version, refused.failure and refused.failure.reason_code) == (
            "1.0.0", "tool.invalid_arguments.schema")
    finally:
        host.end_run(pinned)


def test_an_unpinned_run_gets_2_0_0(call: Call, root: Path) -> None:
    (root / "a.txt").write_bytes(b"abc")
    outcome = call({"path": "a.txt"})
    assert (outcome.ok, outcome.version) == (True, "2.0.0")
    assert outcome.content == 'Exported "a.txt" (3 bytes, text/plain). It is attached to your reply.'
