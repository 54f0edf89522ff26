"""Step 5 judges a ``$ref``'s target as the validator resolves it, and only a target it has
checked as a value's schema: one inside an ``examples`` entry, under a keyword step 5 does not
know or behind a fragment it read differently (``%xx``, ``#name``, an ``$id`` elsewhere) may be
an open object the validator would apply as is. And it refuses the keywords fastjsonschema
(draft-07) skips beside a ``$ref``, which 2020-12 readers see applied."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from conftest import CLOSED_OUT, make_plugin, make_spec, make_tool
from installed import install_fake_plugin
from test_cli import toolhost

from toolhost._model.settings import Settings
from toolhost._registration.discovery import (
    Contribution,
    PluginSource,
    collect_contributions,
    make_plugin_manager,
)
from toolhost._registration.refusals import registration_problems
from toolhost._registration.schema import compile_schema, schema_problems

OPEN: dict[str, Any] = {"type": "object"}
TEXT: dict[str, Any] = {"type": "string", "maxLength": 8}
#: What the validator lets through where the schema was left open.
NESTED = {"anything": {"nested": [1, 2]}}


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": [],
            "additionalProperties": False, **extra}


def problems(schema: dict[str, Any]) -> list[str]:
    return [str(p) for p in schema_problems(schema)]


def registration(input_schema: dict[str, Any]) -> list[str]:
    plugin = make_plugin(tools=[make_tool(make_spec(input_schema=input_schema))])
    sources = [PluginSource("fx-dist", "fx-dist", plugin)]
    found: list[Contribution] = collect_contributions(make_plugin_manager(sources), Settings())
    return [str(p) for p in registration_problems(found)]


UNCHECKED = ("names a part of the schema step 5 does not check as a value's schema (an "
             "examples entry, an unknown keyword, a branch that only narrows its parent); "
             "define the subschema under $defs and refer to #/$defs/<name>")

#: Each a schema whose property ``o`` the validator reads as an open object, and the pointer
#: of its refusal.
HIDDEN = {
    "examples entry": (
        closed({"q": {"type": "string", "examples": [OPEN]},
                "o": {"$ref": "#/properties/q/examples/0"}}), "/properties/o/$ref"),
    "unknown keyword": (closed({"o": {"$ref": "#/x-open"}}, **{"x-open": OPEN}),
                        "/properties/o/$ref"),
    "percent-encoded pointer": (closed({"o": {"$ref": "#/x%2Dopen"}}, **{"x-open": OPEN}),
                                "/properties/o/$ref"),
    "narrowing branch's own union": (
        closed({"a": {"type": "string", "anyOf": [{"anyOf": [True]}]},
                "o": {"$ref": "#/properties/a/anyOf/0"}}), "/properties/o/$ref"),
}


@pytest.mark.parametrize("case", sorted(HIDDEN))
def test_the_validator_reads_these_refs_as_open_objects(case: str) -> None:
    # The premise: each schema compiles and the validator admits nested data at `o`.
    schema, _ = HIDDEN[case]
    validate = fastjsonschema.compile(copy.deepcopy(schema))
    assert validate({"o": copy.deepcopy(NESTED)}) == {"o": NESTED}


@pytest.mark.parametrize("case", sorted(HIDDEN))
def test_a_ref_to_what_step_5_does_not_check_is_refused(case: str) -> None:
    schema, pointer = HIDDEN[case]
    assert f"{pointer}: {UNCHECKED}" in "\n".join(problems(schema))
    assert any(f"input_schema: {pointer}: {UNCHECKED}" in p for p in registration(schema))


def test_an_id_that_names_the_schemas_own_address_is_refused() -> None:
    # fastjsonschema files every object with an $id, a default's too, and resolves `#...`
    # in the last one filed under the schema's address: here, the default's open $defs.
    shadow = {"$id": "http://example.invalid/s", "$defs": {"s": OPEN}}
    schema = closed({"d": {"type": "string", "default": shadow}, "o": {"$ref": "#/$defs/s"}},
                    **{"$id": "http://example.invalid/s", "$defs": {"s": TEXT}})
    assert fastjsonschema.compile(copy.deepcopy(schema))({"o": NESTED}) == {"o": NESTED}
    assert ("/properties/d/default: an $id naming the schema's own address makes the "
            "validator resolve its $refs here; remove it") in problems(schema)


def test_an_id_below_the_top_is_refused() -> None:
    schema = closed({"o": {"$id": "http://example.invalid/other", "type": "string"}})
    assert problems(schema) == ["/properties/o: an $id below the top level changes what the "
                                "$refs inside it name; remove it"]


def test_a_plain_name_fragment_is_refused_in_one_line() -> None:
    # fastjsonschema finds `#open` among the $ids it filed: here, the definition's.
    schema = closed({"o": {"$ref": "#open"}}, **{"$defs": {"a": {"$id": "#open", **TEXT}}})
    assert "/properties/o/$ref: a $ref names a JSON pointer (#/$defs/<name>), not a " \
           "plain-name fragment" in problems(schema)


#: References to what step 5 checks as a value's schema, resolved as the validator does.
CHECKED = {
    "$defs": closed({"o": {"$ref": "#/$defs/t", "description": "Kept."}},
                    **{"$defs": {"t": TEXT}}),
    "definitions": closed({"o": {"$ref": "#/definitions/t"}}, definitions={"t": TEXT}),
    "the root": closed({"o": {"$ref": "#"}}),
    "a property (zod's reuse)": closed({"a": closed({"t": TEXT}), "o": {"$ref": "#/properties/a"}}),
    "an items schema": closed({"a": {"type": "array", "items": TEXT},
                               "o": {"$ref": "#/properties/a/items"}}),
    "a percent-encoded name": closed({"o": {"$ref": "#/$defs/a%20b"}},
                                     **{"$defs": {"a b": TEXT, "a%20b": {"type": "integer"}}}),
    "a negative list index": closed({"a": {"anyOf": [TEXT, {"type": "integer"}]},
                                     "o": {"$ref": "#/properties/a/anyOf/-1"}}),
    "with the root's $id": closed({"o": {"$ref": "#/$defs/t"}},
                                  **{"$id": "http://example.invalid/s", "$defs": {"t": TEXT}}),
}


@pytest.mark.parametrize("case", sorted(CHECKED))
def test_a_ref_to_a_checked_subschema_registers(case: str) -> None:
    assert problems(CHECKED[case]) == []
    compile_schema(CHECKED[case])


def test_the_percent_encoded_target_is_the_one_the_validator_applies() -> None:
    # `a%20b` is "a b" to fastjsonschema (a string), not the integer named "a%20b".
    validate = compile_schema(CHECKED["a percent-encoded name"])
    assert validate({"o": "x"}) == {"o": "x"}
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validate({"o": 3})


# ---------------------------------------------------------------------------- beside a $ref

SIBLINGS = closed({"name": {"$ref": "#/$defs/ident", "maxLength": 8, "pattern": "^[a-z]+$"}},
                  **{"$schema": "https://json-schema.org/draft/2020-12/schema",
                     "$defs": {"ident": {"type": "string"}}})
BESIDE = ("/properties/name: maxLength, pattern beside a $ref are never applied: the validator "
          "reads the $ref alone (draft-07); put them in the definition it names, or write "
          "allOf: [{$ref}, {a type and them}]")


def test_the_validator_skips_keywords_beside_a_ref() -> None:
    long = "THIS IS FAR LONGER THAN EIGHT; rm -rf /"
    assert fastjsonschema.compile(copy.deepcopy(SIBLINGS))({"name": long}) == {"name": long}


def test_a_validation_keyword_beside_a_ref_is_refused_in_one_line() -> None:
    assert problems(SIBLINGS) == [BESIDE]
    assert [p.split("input_schema: ")[1].split(". To fix")[0]
            for p in registration(SIBLINGS)] == [BESIDE]


@pytest.mark.parametrize("keyword", ["type", "enum", "minimum", "allOf", "properties"])
def test_each_validation_keyword_beside_a_ref_is_named(keyword: str) -> None:
    values = {"type": "string", "enum": ["a"], "minimum": 1, "allOf": [TEXT],
              "properties": {}}
    schema = closed({"o": {"$ref": "#/$defs/t", keyword: values[keyword]}},
                    **{"$defs": {"t": TEXT}})
    assert (f"/properties/o: {keyword} beside a $ref is never applied: the validator reads the "
            "$ref alone (draft-07); put it in the definition it names, or write allOf: "
            "[{$ref}, {a type and it}]") in problems(schema)


def test_the_remedy_registers_and_applies_the_keywords() -> None:
    schema = closed({"name": {"allOf": [{"$ref": "#/$defs/ident"},
                                        {"type": "string", "maxLength": 8}]}},
                    **{"$defs": {"ident": {"type": "string"}}})
    assert problems(schema) == []
    validate = compile_schema(schema)
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validate({"name": "longer than eight"})


# ---------------------------------------------------------------------------- toolhost check

PLUGIN = '''
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

OUT = {OUT!r}
SPEC = ToolSpec(
    name="refs.probe", version="1.0.0", description="Probe.", input_schema={SCHEMA!r},
    output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.NONE,
    risk=Risk.LOW, idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=2, maximum_output_bytes=4096, allow_parallel=True,
    deprecated=False,
)

@hookimpl
def toolhost_domains():
    return [Domain("refs")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=lambda arguments, context: None)]
'''


@pytest.mark.parametrize(("schema", "problem"), [
    (HIDDEN["examples entry"][0], f"/properties/o/$ref: {UNCHECKED}"),
    (SIBLINGS, BESIDE),
], ids=["ref-to-examples", "keywords-beside-ref"])
def test_check_refuses_in_one_line(tmp_path: Path, schema: dict[str, Any],
                                   problem: str) -> None:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-refs", "fake_refs",
                        PLUGIN.replace("{OUT!r}", repr(CLOSED_OUT))
                        .replace("{SCHEMA!r}", repr(schema)))
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-refs"}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "toolhost: registration refused at step 5 (schema validity): refs.probe@1.0.0 from "
        f"distribution fake-refs: input_schema: {problem}. To fix: fix the schema at the "
        "pointer shown: close every object level with additionalProperties: false, give every "
        "property and every array's items a type, keep $ref local, and use "
        "draft-07-compatible keywords\n")
