"""Step 5 refuses each 2019-09/2020-12 keyword fastjsonschema (draft-07) does not apply, so a
constraint a client reads in tools/list is one every call is held to: ``minContains`` and
``maxContains`` (which draft-07 does not have), and ``contentSchema`` (a subschema step 5 never
walks, describing content nothing checks), with the line the other such keywords get."""

from __future__ import annotations

from typing import Any

import fastjsonschema
import pytest
from conftest import CLOSED_IN, CLOSED_OUT, make_plugin, make_spec, make_tool
from test_schema_ref_targets_checked_as_validated import closed, problems

from toolhost._model.settings import Settings
from toolhost._registration.discovery import (
    PluginSource,
    collect_contributions,
    make_plugin_manager,
)
from toolhost._registration.refusals import registration_problems

INTEGERS: dict[str, Any] = {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}
JSON_TEXT: dict[str, Any] = {"type": "string", "contentMediaType": "application/json"}

#: Each 2019-09/2020-12 keyword that constrains a value under 2020-12 (or reads as if it did),
#: a property using it, and a value it refuses there.
KEYWORDS: dict[str, tuple[dict[str, Any], Any]] = {
    "minContains": ({**INTEGERS, "minContains": 2}, [1]),
    "maxContains": ({**INTEGERS, "maxContains": 1}, [1, 1]),
    "contentSchema": ({**JSON_TEXT, "contentSchema": {"type": "object"}}, "1"),
    "dependentRequired": ({"type": "object", "properties": {"a": {"type": "string"},
                                                             "b": {"type": "string"}},
                           "additionalProperties": False, "dependentRequired": {"a": ["b"]}},
                          {"a": "x"}),
    "dependentSchemas": ({"type": "object", "properties": {"a": {"type": "string"}},
                          "additionalProperties": False,
                          "dependentSchemas": {"a": {"required": ["b"]}}}, {"a": "x"}),
    "unevaluatedItems": ({"type": "array", "items": {"type": "integer"},
                          "unevaluatedItems": False}, [1]),
    "prefixItems": ({"type": "array", "items": {"type": "integer"},
                     "prefixItems": [{"const": 2}]}, [1]),
}


@pytest.mark.parametrize("keyword", KEYWORDS, ids=KEYWORDS.keys())
def test_a_keyword_the_validator_does_not_apply_is_refused(keyword: str) -> None:
    prop, value = KEYWORDS[keyword]
    schema = closed({"v": prop})
    # What the validator would run: the value the keyword refuses passes.
    assert fastjsonschema.compile(schema)({"v": value}) == {"v": value}
    assert f"/properties/v/{keyword}: " in "\n".join(problems(schema))


@pytest.mark.parametrize("keyword", ["minContains", "maxContains", "contentSchema"])
def test_the_refusal_is_the_line_other_unenforced_keywords_get(keyword: str) -> None:
    prop, _ = KEYWORDS[keyword]
    assert problems(closed({"v": prop})) == [
        f"/properties/v/{keyword}: {keyword} differs between draft-07 and 2020-12"]


@pytest.mark.parametrize("which", ["input_schema", "output_schema"])
@pytest.mark.parametrize("where", ["property", "defs", "narrowing-branch"])
def test_min_and_max_contains_are_refused_wherever_they_stand(which: str, where: str) -> None:
    counted = {**INTEGERS, "minContains": 2, "maxContains": 3}
    base = CLOSED_IN if which == "input_schema" else CLOSED_OUT
    node, pointer, keywords = {
        "property": ({"xs": counted}, "/properties/xs", ["maxContains", "minContains"]),
        "defs": ({"xs": {"$ref": "#/$defs/xs"}}, "/$defs/xs", ["maxContains", "minContains"]),
        "narrowing-branch": ({"xs": {**INTEGERS, "anyOf": [{"minContains": 2}, {"maxItems": 1}]}},
                             "/properties/xs/anyOf/0", ["minContains"]),
    }[where]
    schema = {**base, "properties": {**base["properties"], **node}}
    if where == "defs":
        schema["$defs"] = {"xs": counted}
    found = registration_problems(collect_contributions(make_plugin_manager([PluginSource(
        "fx-dist", "fx-dist", make_plugin(tools=[make_tool(make_spec(**{which: schema}))]))]),
        Settings()))
    assert [str(p) for p in found] == [
        "registration refused at step 5 (schema validity): fx.echo@1.0.0 from distribution "
        f"fx-dist: {which}: {pointer}/{keyword}: {keyword} differs between draft-07 and 2020-12. "
        "To fix: fix the schema at the pointer shown: close every object level with "
        "additionalProperties: false, give every property and every array's items a type, keep "
        "$ref local, and use draft-07-compatible keywords" for keyword in keywords]
