"""Step 4 validates a copy of the arguments, for the validator to fill defaults into; the
caller's are never changed. The copy is the top level alone when no default lies deeper
(D333): a deep copy of a largest body's arguments (4M small values) held the event loop for
~0.8 s of every such call.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
from fixture_tools import PLUGIN

from toolhost._model.outcome import ToolValidationError
from toolhost._pipeline import steps
from toolhost._pipeline.pipeline import UNRECORDED_ARGUMENTS
from toolhost._registration.refusals import Registered
from toolhost._registration.schema import compile_schema, defaults_below_top
from toolhost.testing import host_for

TOP = {"type": "object", "additionalProperties": False, "properties": {
    "limit": {"type": "integer", "default": 10},
    "items": {"type": "array", "items": {"type": "integer"}, "default": []}}}
NESTED = {"type": "object", "additionalProperties": False, "properties": {
    "options": {"type": "object", "additionalProperties": False,
                "properties": {"depth": {"type": "integer", "default": 1}}}}}


@pytest.mark.parametrize(("schema", "below"), [
    ({"type": "object", "properties": {}}, False),
    (TOP, False),
    (NESTED, True),
    # A default on a top-level property's own items, or behind a reference: deeper.
    ({"properties": {"a": {"type": "array", "items": {"default": 0}}}}, True),
    ({"$defs": {"o": {"properties": {"b": {"default": None}}}},
      "properties": {"a": {"$ref": "#/$defs/o"}}}, True),
    ({"properties": {"a": {"anyOf": [{"default": 1}]}}}, True),
    # Neither a property named "default" nor a top-level default's own value is a schema.
    ({"properties": {"default": {"type": "string"}}}, False),
    ({"properties": {"a": {"type": "object", "default": {"default": 1}}}}, False),
    ({"default": {}, "properties": {}}, True),
    # A reference fills in what the referred schema defaults, wherever it is used: the
    # root's defaults one level down here.
    ({"properties": {"limit": {"default": 1}, "child": {"$ref": "#"}}}, True),
    ({"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}, True),
])
def test_where_a_default_lies(schema: dict[str, Any], below: bool) -> None:
    assert defaults_below_top(schema) is below


def registered(schema: dict[str, Any]) -> Registered:
    spec = types.SimpleNamespace(name="t.tool", version="1.0.0", input_schema=schema)
    return Registered(spec=spec, tool=types.SimpleNamespace(), distribution="d",  # type: ignore[arg-type]
                      validate_input=compile_schema(schema), validate_output=lambda d: d,
                      nested_defaults=defaults_below_top(schema))


def test_top_level_defaults_fill_a_copy_of_the_top_level_only() -> None:
    values = list(range(1000))
    arguments = {"items": values}
    prepared = steps.prepare(registered(TOP), arguments)
    assert prepared.arguments == {"items": values, "limit": 10}
    assert arguments == {"items": values}  # the caller's: unchanged
    assert prepared.arguments["items"] is values  # and not copied


def test_nested_defaults_fill_a_deep_copy() -> None:
    arguments: dict[str, Any] = {"options": {}}
    prepared = steps.prepare(registered(NESTED), arguments)
    assert prepared.arguments == {"options": {"depth": 1}}
    assert arguments == {"options": {}}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"child": value}
    return value


def test_a_reference_to_the_root_never_fills_the_callers_nested_arguments() -> None:
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "limit": {"type": "integer", "default": 10}, "child": {"$ref": "#"}}}
    arguments: dict[str, Any] = {"child": {}}
    prepared = steps.prepare(registered(schema), arguments)
    assert prepared.arguments == {"limit": 10, "child": {"limit": 10}}
    assert arguments == {"child": {}}


SELF = {"type": "object", "additionalProperties": False, "properties": {"child": {"$ref": "#"}}}


@pytest.mark.parametrize("depth", [256, 257, 980, 5000])
def test_arguments_are_refused_past_256_levels_before_anything_recurses(depth: int) -> None:
    """RecursionError came wherever the stack was deepest: at step 4 from ~1,000 levels, or,
    in a window just under, at the row's encoding, reported as the record being away."""
    if depth <= 256:
        assert steps.prepare(registered(SELF), nested(depth - 1)).arguments
        return
    with pytest.raises(ToolValidationError) as refused:
        steps.prepare(registered(SELF), nested(depth - 1))
    assert refused.value.detail == {"problem": "arguments nest deeper than 256 levels"}


@pytest.mark.parametrize("depth", [300, 980, 5000])
def test_a_refusal_whose_arguments_nest_too_deeply_is_recorded(tmp_path: Path,
                                                               depth: int) -> None:
    """The refusal's row holds a fixed text for them: ``Host.invoke`` raised RecursionError
    and wrote no row (the gateway's review, 2,000 levels)."""
    with host_for({"fx-dist": PLUGIN}, data_dir=tmp_path) as host:
        outcome = host.invoke_sync("fx.echo", {"x": nested(depth)})
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
        (row,) = host.pipeline.invocations.list()
        assert row.arguments == UNRECORDED_ARGUMENTS
