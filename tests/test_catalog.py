"""The catalog: byte-stable, sorted, and exportable to provider formats reversibly."""

from __future__ import annotations

import json

import pytest
from conftest import make_spec
from test_cli import toolhost

from toolhost._cli.catalog import (
    canonical_catalog,
    export,
    from_export_name,
    to_anthropic,
    to_export_name,
    to_openai,
)

A = make_spec(name="fx.b_tool", description="Beta — with a dash.")
B = make_spec(name="fx.a", version="1.10.0")
C = make_spec(name="fx.a", version="1.9.0")


def test_canonical_bytes_are_sorted_compact_and_order_independent() -> None:
    assert canonical_catalog([A, B]) == canonical_catalog([B, A])
    data = canonical_catalog([A, C, B])
    assert data.startswith(b'[{"description":')
    assert [(e["name"], e["version"]) for e in json.loads(data)] == [
        ("fx.a", "1.9.0"), ("fx.a", "1.10.0"), ("fx.b_tool", "1.0.0")]
    assert canonical_catalog([A]) == (
        '[{"description":"Beta — with a dash.","input_schema":{"additionalProperties":false,'
        '"properties":{"x":{"default":"d","maxLength":8,"type":"string"}},"required":[],'
        '"type":"object"},"name":"fx.b_tool","version":"1.0.0"}]'
    ).encode()  # compact, sorted keys, UTF-8 rather than \u escapes
    assert set(json.loads(data)[0]) == {"name", "version", "description", "input_schema"}


def test_openai_and_anthropic_shapes() -> None:
    assert to_openai([A]) == [{"type": "function", "function": {
        "name": "fx-b_tool", "description": A.description, "parameters": A.input_schema}}]
    assert to_anthropic([A]) == [{"name": "fx-b_tool", "description": A.description,
                                  "input_schema": A.input_schema}]


@pytest.mark.parametrize("name", ["math.calculate", "context.update_working_state", "a.b__c"])
def test_dotted_names_map_reversibly(name: str) -> None:
    assert from_export_name(to_export_name(name)) == name
    assert "." not in to_export_name(name)


def test_two_versions_of_one_tool_cannot_be_exported_together() -> None:
    with pytest.raises(ValueError, match="one version per tool"):
        to_openai([B, C])
    with pytest.raises(ValueError, match="unknown catalog format"):
        export([A], "xml")


def test_cli_format_prints_the_default_roster() -> None:
    result = toolhost("tools", "--format", "openai",
                      env={"TOOLHOST_PLUGINS": "toolhost-math,toolhost-system"})
    assert result.returncode == 0
    names = [t["function"]["name"] for t in json.loads(result.stdout)]
    assert names == ["math-calculate", "system-current_time"]
    canonical = toolhost("tools", "--format", "canonical",
                         env={"TOOLHOST_PLUGINS": "toolhost-math,toolhost-system"})
    assert canonical.stdout == canonical.stdout.strip() + "\n"
