"""The JSON Schema → hypothesis generator: every value valid, edges reached, gaps refused."""

from __future__ import annotations

import copy
from typing import Any

import fastjsonschema
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from toolhost_conformance.strategies import UnsupportedSchema, from_schema

CLOSED = {"additionalProperties": False}

SCHEMAS: dict[str, dict[str, Any]] = {
    "string bounds": {"type": "string", "minLength": 2, "maxLength": 5},
    "string pattern": {"type": "string", "pattern": "^[a-z]{1,3}-[0-9]$", "maxLength": 5},
    "string enum": {"type": "string", "enum": ["a", "b"]},
    "formats": {
        "type": "object",
        "properties": {
            f: {"type": "string", "format": f}
            for f in ("date", "date-time", "email", "ipv4", "ipv6", "uuid")
        },
        "required": ["date", "date-time", "email", "ipv4", "ipv6", "uuid"],
        **CLOSED,
    },
    "integer bounds": {"type": "integer", "minimum": -3, "maximum": 7},
    "integer exclusive": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4},
    "integer multiple": {"type": "integer", "minimum": 1, "maximum": 100, "multipleOf": 7},
    "number bounds": {"type": "number", "minimum": -1.5, "maximum": 2.25},
    "number exclusive": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    "number unbounded": {"type": "number"},
    "boolean and null": {"type": ["boolean", "null"]},
    "const": {"const": {"k": [1, 2]}},
    "array": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
    "unique array": {
        "type": "array",
        "items": {"enum": ["x", "y", "z"]},
        "uniqueItems": True,
        "maxItems": 3,
    },
    "object": {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 3},
            "b": {"type": "integer", "default": 1},
            "c": {
                "type": "object",
                "properties": {"d": {"type": "boolean"}},
                "required": ["d"],
                **CLOSED,
            },
        },
        "required": ["a"],
        **CLOSED,
    },
    "ref": {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#/definitions/n"}},
        "required": ["p"],
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
                **CLOSED,
            }
        },
        "definitions": {"n": {"type": "number", "minimum": 0}},
        **CLOSED,
    },
    "recursive ref": {
        "$defs": {
            "tree": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2},
                },
                "required": ["value"],
                **CLOSED,
            }
        },
        "$ref": "#/$defs/tree",
    },
    "anyOf": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 9}]},
    "untyped": {},
}


@pytest.mark.parametrize("schema", SCHEMAS.values(), ids=SCHEMAS.keys())
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_generated_value_is_valid(schema: dict[str, Any], data: st.DataObject) -> None:
    value = data.draw(from_schema(schema))
    fastjsonschema.compile(copy.deepcopy(schema))(copy.deepcopy(value))


def _reaches(schema: dict[str, Any], condition: Any) -> None:
    """The strategy produces a value meeting ``condition`` within a modest budget (``find``
    raises NoSuchExample otherwise)."""
    budget = settings(max_examples=200, database=None, phases=[Phase.generate])
    find(from_schema(schema), condition, settings=budget)


@pytest.mark.parametrize(
    ("schema", "condition"),
    [
        ({"type": "string", "maxLength": 1025}, lambda s: len(s) == 1025),
        ({"type": "string", "maxLength": 1 << 20}, lambda s: len(s) == 1 << 20),
        ({"type": "string", "minLength": 3, "maxLength": 9}, lambda s: len(s) == 3),
        ({"type": "string"}, lambda s: s == ""),
        ({"type": "string"}, lambda s: "\x00" in s),
        ({"type": "integer", "minimum": -5, "maximum": 1000}, lambda n: n == 1000),
        ({"type": "integer", "minimum": -5, "maximum": 1000}, lambda n: n == -5),
        ({"type": "integer"}, lambda n: n == 2**63 - 1),
        ({"type": "number", "maximum": 3.5}, lambda n: n == 3.5),
        ({"type": "number"}, lambda n: isinstance(n, int)),
        ({"type": "array", "items": {"type": "null"}, "maxItems": 33}, lambda a: len(a) == 33),
        (SCHEMAS["object"], lambda o: "b" not in o),
        (SCHEMAS["object"], lambda o: "b" in o and "c" in o),
    ],
    ids=[
        "max length", "1 MiB length", "min length", "empty", "NUL", "maximum", "minimum",
        "int64", "number maximum", "integral number", "max items", "optional omitted",
        "optional present",
    ],
)
@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # find reprs the 1 MiB hit
def test_edge_values_are_reached(schema: dict[str, Any], condition: Any) -> None:
    _reaches(schema, condition)


@pytest.mark.parametrize(
    ("schema", "pointer", "problem"),
    [
        ({"not": {"type": "string"}}, "/", "keyword 'not'"),
        ({"type": "string", "format": "hostname"}, "/format", "format 'hostname'"),
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "/properties/a/$ref",
         "only a local $ref"),
        ({"$ref": "#/$defs/missing"}, "/$ref", "does not resolve"),
        ({"type": "object", "patternProperties": {"^x": {}}}, "/", "patternProperties"),
        ({"type": "array", "items": [{"type": "string"}]}, "/items", "array-form items"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "/", "no integer lies between"),
        ({"type": "integer", "exclusiveMinimum": True}, "/exclusiveMinimum", "draft 4"),
        ({"type": "strin"}, "/type", "unknown type 'strin'"),
        ({"type": "object", "properties": {"a": False}}, "/properties/a", "accepts no value"),
    ],
)
def test_what_it_cannot_generate_is_refused(
    schema: dict[str, Any], pointer: str, problem: str
) -> None:
    with pytest.raises(UnsupportedSchema) as refused:
        from_schema(schema)
    assert refused.value.pointer in (pointer, pointer.rstrip("/"))
    assert problem in str(refused.value)


def test_annotations_are_ignored() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "T", "description": "D", "examples": ["e"], "$comment": "c",
        "type": "string", "maxLength": 2, "default": "x",
    }
    from_schema(schema).example  # noqa: B018  (building the strategy is the assertion)
