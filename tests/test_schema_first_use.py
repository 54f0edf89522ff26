"""Validators compile at registration and execute on first use: each behaves exactly as
fastjsonschema's own ``compile`` of the same schema, ``$defs``/``$ref`` and ``$id`` included."""

from __future__ import annotations

import copy
from typing import Any

import fastjsonschema
import pytest

from toolhost._registration.schema import SchemaProblem, compile_schema

SCHEMAS: dict[str, dict[str, Any]] = {
    "flat": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3,
                                                     "default": "x"}},
             "required": [], "additionalProperties": False},
    "refs": {"type": "object", "$defs": {"n": {"type": "integer", "minimum": 0}},
             "properties": {"a": {"$ref": "#/$defs/n"},
                            "b": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
             "required": ["a"], "additionalProperties": False},
    "id": {"$id": "http://example.invalid/s", "type": "object",
           "properties": {"a": {"type": "boolean", "default": True}},
           "required": [], "additionalProperties": False},
}
DATA: list[Any] = [{}, {"a": "ab"}, {"a": "abcd"}, {"a": 1}, {"a": -1}, {"a": 2, "b": [1, -2]},
                   {"a": True}, {"z": 1}, [], "x", None]


def _outcome(validate: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", validate(copy.deepcopy(data))
    except fastjsonschema.JsonSchemaValueException as exc:
        return "refused", exc.message


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("defaults", [True, False])
def test_first_use_validates_as_fastjsonschema_does(name: str, defaults: bool) -> None:
    ours = compile_schema(SCHEMAS[name], apply_defaults=defaults)
    theirs = fastjsonschema.compile(SCHEMAS[name], use_default=defaults)
    for data in DATA:
        assert _outcome(ours, data) == _outcome(theirs, data), data


def test_a_schema_that_does_not_compile_is_refused_at_registration() -> None:
    with pytest.raises(SchemaProblem, match="does not compile"):
        compile_schema({"type": "object", "properties": {"a": {"type": "nonsense"}}})
