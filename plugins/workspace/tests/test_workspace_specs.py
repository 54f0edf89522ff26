"""The three specs against the specification's tables and schemas, the reasons each tool
declares and their messages byte for byte, and the plugin's hooks."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

from toolhost import (
    Idempotency,
    Kind,
    Reason,
    Risk,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
)
from toolhost.testing import Harness
from toolhost_workspace import list_files, messages, plugin, read_text, write_text

SCHEMA = "tool.invalid_arguments.schema"
SCHEMA_MESSAGE = "The arguments do not match the tool's input schema."


def tools() -> dict[str, Tool]:
    return {t.spec.name: t for t in plugin.toolhost_tools(Settings())}

SPECS = {s.name: s for s in (read_text.SPEC, write_text.SPEC, list_files.SPEC)}

#: name: (side_effect, risk, idempotency, scope, timeout_s, maximum_output_bytes, allow_parallel)
TABLE = {
    "workspace.read_text": (SideEffect.WORKSPACE_READ, Risk.LOW, Idempotency.READ_ONLY,
                            "workspace.read", 10, 1048576, True),
    "workspace.list_files": (SideEffect.WORKSPACE_READ, Risk.LOW, Idempotency.READ_ONLY,
                             "workspace.read", 10, 262144, True),
    "workspace.write_text": (SideEffect.WORKSPACE_WRITE, Risk.MEDIUM, Idempotency.IDEMPOTENT,
                             "workspace.write", 10, 4096, False),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_classification_matches_the_table(name: str) -> None:
    spec: ToolSpec = SPECS[name]
    side_effect, risk, idempotency, scope, timeout, limit, parallel = TABLE[name]
    assert (spec.side_effect, spec.risk, spec.idempotency) == (side_effect, risk, idempotency)
    assert (spec.output_trust, spec.required_scopes) == (Trust.INTERNAL_TOOL, (scope,))
    assert (spec.timeout_s, spec.maximum_output_bytes, spec.allow_parallel) == (
        timeout, limit, parallel)
    assert (spec.kind, spec.source, spec.target_kind, spec.server_id) == (
        Kind.CAPABILITY, Source.BUILTIN, TargetKind.IN_PROCESS, None)
    assert (spec.version, spec.deprecated, spec.domain) == ("1.0.0", False, "workspace")


# The schemas exactly as the specification prints them.
PATH = {"type": "string", "maxLength": 4096}
SCHEMAS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "workspace.read_text": (
        {"type": "object", "properties": {"path": PATH}, "required": ["path"],
         "additionalProperties": False},
        {"type": "object",
         "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                        "byte_count": {"type": "integer"}, "checksum": {"type": "string"}},
         "required": ["path", "content", "byte_count", "checksum"],
         "additionalProperties": False},
    ),
    "workspace.write_text": (
        {"type": "object",
         "properties": {"path": PATH, "content": {"type": "string", "maxLength": 1048576}},
         "required": ["path", "content"], "additionalProperties": False},
        {"type": "object",
         "properties": {"path": {"type": "string"}, "byte_count": {"type": "integer"},
                        "checksum": {"type": "string"}, "created": {"type": "boolean"}},
         "required": ["path", "byte_count", "checksum", "created"],
         "additionalProperties": False},
    ),
    "workspace.list_files": (
        {"type": "object",
         "properties": {"path": {"type": "string", "maxLength": 4096, "default": ""},
                        "recursive": {"type": "boolean", "default": False}},
         "required": [], "additionalProperties": False},
        {"type": "object",
         "properties": {
             "path": {"type": "string"},
             "entries": {"type": "array", "maxItems": 1000, "items": {
                 "type": "object",
                 "properties": {"path": {"type": "string"},
                                "kind": {"enum": ["file", "directory"]},
                                "byte_count": {"type": "integer"}},
                 "required": ["path", "kind", "byte_count"],
                 "additionalProperties": False}},
             "truncated": {"type": "boolean"}},
         "required": ["path", "entries", "truncated"],
         "additionalProperties": False},
    ),
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schemas_are_the_specs_exactly(name: str) -> None:
    assert (SPECS[name].input_schema, SPECS[name].output_schema) == SCHEMAS[name]


UNAVAILABLE = "tool.upstream_unavailable.workspace_unavailable"


def test_the_four_messages_byte_for_byte() -> None:
    # The specification's four. The filesystem failing is the host's failure (issue 12).
    assert messages.MESSAGES == {
        "tool.not_found.no_such_path": "No such path in the workspace.",
        "tool.invalid_arguments.not_text": "Not a UTF-8 text file. This tool reads text only.",
        "tool.invalid_arguments.not_a_file": "That path is a directory.",
        "tool.invalid_arguments.not_a_directory": "That path is a file. Use workspace.read_text.",
    }
    # What the host renders is what the tools declare: each code once, on its tool, with
    # exactly that message, and no schema rule mapped to it.
    declared = {r.code: r for t in tools().values() for r in t.reasons}
    assert {code: r.message for code, r in declared.items()} == messages.MESSAGES
    assert all(isinstance(r, Reason) and r.schema_rules == () for r in declared.values())


def test_each_tool_declares_what_it_may_end_with() -> None:
    declared = {name: t.reason_codes for name, t in tools().items()}
    assert declared == {
        "workspace.read_text": ("tool.not_found.no_such_path", "tool.invalid_arguments.not_text",
                                "tool.invalid_arguments.not_a_file"),
        "workspace.write_text": ("tool.not_found.no_such_path",
                                 "tool.invalid_arguments.not_a_file"),
        "workspace.list_files": ("tool.not_found.no_such_path",
                                 "tool.invalid_arguments.not_a_directory"),
    }
    # A workspace the filesystem cannot serve is the host's failure, declared by no tool.
    assert not any(UNAVAILABLE in codes for codes in declared.values())
    # The schema code is the host's: no tool declares it, and the plugin has no message for it.
    assert SCHEMA not in messages.MESSAGES


@pytest.mark.parametrize("name", sorted(TABLE))
def test_a_path_the_handle_rejects_is_the_hosts_schema_failure(
    toolhost_host: Harness, name: str
) -> None:
    # Undeclared, yet a valid-by-schema path the handle refuses still ends with it (step 9),
    # rendered with the host's one message.
    arguments: dict[str, Any] = {"path": "../outside"}
    if name == "workspace.write_text":
        arguments["content"] = "x"
    outcome = toolhost_host.invoke(name, **arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == SCHEMA
    assert outcome.content == outcome.failure.message == SCHEMA_MESSAGE


def test_the_not_a_file_message_names_no_tool() -> None:
    # The default agent is not offered workspace.list_files (list_files.py says why).
    assert "workspace." not in messages.MESSAGES[messages.NOT_A_FILE]
    assert messages.MESSAGES[messages.NOT_A_DIRECTORY].endswith("Use workspace.read_text.")


def test_the_plugin_registers_its_domain_and_three_tools(toolhost_host: Harness) -> None:
    assert [d.name for d in plugin.toolhost_domains()] == ["workspace"]
    assert sorted(tools()) == sorted(TABLE)
    # The host registered all three (the kit's run enables every registered tool)...
    assert toolhost_host.start_run().enabled_tools == frozenset(TABLE)
    # ...each running the body its module defines, by reference, which is where that module
    # is first imported (registration needs only the specs).
    for name, module in (("workspace.read_text", read_text), ("workspace.write_text", write_text),
                         ("workspace.list_files", list_files)):
        tool = tools()[name]
        call = f"{module.__name__}:{name.split('.')[1]}"
        assert (tool.call, tool.build) == (call, None)
        assert toolhost_host.tool(name) is getattr(module, name.split(".")[1])


def test_the_entry_point_is_installed() -> None:
    points = metadata.entry_points(group="toolhost.plugins")
    ours = [p for p in points if p.dist is not None and p.dist.name == "toolhost-workspace"]
    assert [(p.name, p.value) for p in ours] == [("workspace", "toolhost_workspace.plugin")]
    assert metadata.requires("toolhost-workspace") is not None


def test_operator_detail_never_reaches_the_model(toolhost_host: Harness, tmp_path: Any) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "bin").write_bytes(b"\xff")
    run = toolhost_host.start_run(workspace=root)
    outcome = toolhost_host.call("workspace.read_text", {"path": "bin"}, run=run)
    assert outcome.failure is not None and outcome.failure.detail  # operators get it...
    data = outcome.to_json()
    assert "detail" not in data and "offset" not in str(data)  # ...the model does not
