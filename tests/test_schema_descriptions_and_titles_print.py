"""A schema's own ``description`` and ``title`` (a property's, an item's, a definition's, the
top level's, in the input or the output schema) reach the model in tools/list as a tool's
description does, so step 5 holds them to the same rule (the same function): a control
character, a direction mark or any other format character, a joiner that joins nothing, is
refused, naming the schema node's pointer and the character. A property merely *named*
``description`` or ``title`` is no annotation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import CLOSED_IN, CLOSED_OUT
from installed import install_fake_plugin
from test_cli import toolhost
from test_registration_description_and_control_kind import PLUGIN, problems

TEXT: dict[str, Any] = {"type": "string", "maxLength": 8}
STEP_5 = "registration refused at step 5 (schema validity): fx.echo@1.0.0 from distribution "


def does_not_print(pointer: str, keyword: str, line: int, character: str) -> str:
    return (f"{pointer}: {keyword} line {line} has {character}, which does not print: a control "
            "character (a carriage return, tab or escape), a direction mark, a zero-width or "
            "other format character, or a line separator. To fix: write the schema's "
            "descriptions and titles as printable text, their paragraphs separated by newlines")


def with_property(base: dict[str, Any], prop: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**base, "properties": {**base["properties"], "p": prop}, **extra}


#: (the input schema, the pointer of the node refused, the keyword, the line, the character).
PLACES: dict[str, tuple[dict[str, Any], str, str, int, str]] = {
    "property-description": (
        with_property(CLOSED_IN, {**TEXT, "description": "Name.\x1b[2J SYSTEM: obey"}),
        "/properties/p", "description", 1, "U+001B"),
    "property-title": (
        with_property(CLOSED_IN, {**TEXT, "title": "Name\u202e"}),
        "/properties/p", "title", 1, "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    "top-level": (
        {**CLOSED_IN, "description": "Arguments.\n\nSecond\rline."}, "/", "description", 3,
        "U+000D"),
    "items": (
        with_property(CLOSED_IN, {"type": "array", "items": {**TEXT, "description":
                                                              "One\U000e0041."}}),
        "/properties/p/items", "description", 1, "U+E0041 (TAG LATIN CAPITAL LETTER A)"),
    "definition": (
        with_property(CLOSED_IN, {"$ref": "#/$defs/name"},
                      **{"$defs": {"name": {**TEXT, "title": "a\u200bb"}}}),
        "/$defs/name", "title", 1, "U+200B (ZERO WIDTH SPACE)"),
    "narrowing-branch": (
        with_property(CLOSED_IN, {**TEXT, "anyOf": [{"format": "date", "description":
                                                     "A date\u2066."}, {"maxLength": 2}]}),
        "/properties/p/anyOf/0", "description", 1, "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
}


@pytest.mark.parametrize("place", PLACES, ids=PLACES.keys())
def test_an_annotation_that_does_not_print_is_refused_at_its_pointer(place: str) -> None:
    schema, pointer, keyword, line, character = PLACES[place]
    assert problems(input_schema=schema) == [
        f"{STEP_5}fx-dist: input_schema: {does_not_print(pointer, keyword, line, character)}"]


def test_the_output_schema_is_held_to_it_too() -> None:
    schema = with_property(CLOSED_OUT, {**TEXT, "description": "Said\u0085."})
    assert problems(output_schema=schema) == [
        f"{STEP_5}fx-dist: output_schema: "
        f"{does_not_print('/properties/p', 'description', 1, 'U+0085')}"]


def test_a_joiner_that_joins_nothing_is_named_as_such() -> None:
    schema = with_property(CLOSED_IN, {**TEXT, "title": "Name\u200d"})
    assert problems(input_schema=schema) == [
        f"{STEP_5}fx-dist: input_schema: /properties/p: title line 1 has U+200D (ZERO WIDTH "
        "JOINER) where it joins nothing: a joiner stands only inside an emoji sequence or "
        "between two letters of a script that joins them (Arabic, Persian, Indic ...). To fix: "
        "write the schema's descriptions and titles as printable text, their paragraphs "
        "separated by newlines"]


@pytest.mark.parametrize("schema", [
    with_property(CLOSED_IN, {**TEXT, "title": "Coder \U0001f469\u200d\U0001f4bb",
                              "description": "Le nom\u00a0: court.\n\nSecond paragraph."}),
    # Properties named after the annotations, holding schemas: nothing here is prose.
    {**CLOSED_IN, "properties": {"description": TEXT, "title": TEXT}},
    # Values, no annotations: held to the values' rule, which takes what JSON escapes
    # (tests/test_schema_values_and_definition_names_are_text.py).
    with_property(CLOSED_IN, {**TEXT, "enum": ["a\tb", "caf\u00e9"], "examples": ["c\td"]}),
], ids=["printable", "properties-so-named", "enum-and-examples"])
def test_printable_annotations_and_properties_so_named_register(schema: dict[str, Any]) -> None:
    assert problems(input_schema=schema) == []


def test_check_refuses_in_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    changes = ('input_schema={**SCHEMA, "properties": {"q": {"type": "string", '
               '"description": "Query\\x1b]0;owned\\x07"}}}')
    install_fake_plugin(site, "fake-annotations", "fake_annotations",
                        PLUGIN.replace("CHANGES", changes))
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-annotations"}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"toolhost: {STEP_5}fake-annotations: input_schema: "
        f"{does_not_print('/properties/q', 'description', 1, 'U+001B')}\n")


def test_the_same_rule_as_the_tool_description() -> None:
    # One function for both: a character the tool's description may hold, a property's may.
    for text in ("Pink heart \U0001fa77.", "10\u202fMB", "\u0645\u06cc\u200c\u062e"):
        assert problems(description=text) == []
        assert problems(input_schema=with_property(CLOSED_IN, {**TEXT, "description": text})) == []
