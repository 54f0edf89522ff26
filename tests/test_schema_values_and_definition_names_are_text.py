"""An enum member, a const, a default and an example reach the model in tools/list beside the
schema's descriptions, and a definition's name in every ``$ref`` to it, so step 5 holds them to
the same rule (the same functions): a text among them holding a direction mark, tag
characters, a joiner that joins nothing, a variation selector that selects nothing, a control
or a character that shows as nothing is refused at its own pointer (into the value, an
object's key too), the tool named, what does not show in a key or a name escaped there. Text
in any script, an emoji sequence, a subdivision flag and line breaks register."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import CLOSED_IN, CLOSED_OUT
from installed import install_fake_plugin
from test_cli import toolhost
from test_property_names_are_text import DOES_NOT_PRINT, TAGS, TAGS_SHOWN
from test_registration_description_and_control_kind import PLUGIN, problems
from test_schema_descriptions_and_titles_print import STEP_5, TEXT

VALUE_REMEDY = ("To fix: write each text in the schema's enum, const, default and examples as "
                "printable text, with no character that does not show (lines separated by "
                "newlines)")
NAME_REMEDY = "To fix: name the definition in printable text, with no character that does not show"
JOINS_NOTHING = ("where it joins nothing: a joiner stands only inside an emoji sequence or "
                 "between two letters of a script that joins them (Arabic, Persian, Indic ...)")
SELECTS_NOTHING = ("where it selects nothing: a variation selector stands once, right after "
                   "the emoji, symbol or ideograph it varies")
SHOWS_NOTHING = ("which shows as nothing: a combining grapheme joiner, a Hangul filler, a "
                 "blank or another default-ignorable character")
WALES = "\U0001f3f4" + "".join(chr(0xE0000 + ord(c)) for c in "gbwls") + "\U000e007f"


def with_property(base: dict[str, Any], prop: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**base, "properties": {**base["properties"], "p": prop}, **extra}


def refused(which: str, pointer: str, keyword: str, has: str) -> str:
    return (f"{STEP_5}fx-dist: {which}: {pointer}: {keyword} line 1 has {has}. {VALUE_REMEDY}")


#: (the input schema, the pointer refused, the keyword, what the text has).
VALUES: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "enum-direction-mark": (
        with_property(CLOSED_IN, {**TEXT, "enum": ["read", "re\u202ead"]}),
        "/properties/p/enum/1", "enum", f"U+202E (RIGHT-TO-LEFT OVERRIDE), {DOES_NOT_PRINT}"),
    "enum-tag-characters": (
        with_property(CLOSED_IN, {**TEXT, "enum": ["read" + TAGS]}),
        "/properties/p/enum/0", "enum", f"U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}"),
    "enum-joiner-between-ascii-letters": (
        with_property(CLOSED_IN, {**TEXT, "enum": ["re\u200cad", "write"]}),
        "/properties/p/enum/0", "enum", f"U+200C (ZERO WIDTH NON-JOINER) {JOINS_NOTHING}"),
    "const-zero-width-space": (
        with_property(CLOSED_IN, {**TEXT, "const": "a\u200bb"}),
        "/properties/p/const", "const", f"U+200B (ZERO WIDTH SPACE), {DOES_NOT_PRINT}"),
    "default-selector-run": (
        with_property(CLOSED_IN, {**TEXT, "default": "ok\U0001f600\ufe0f\ufe0f"}),
        "/properties/p/default", "default", f"U+FE0F (VARIATION SELECTOR-16) {SELECTS_NOTHING}"),
    "example-hangul-filler": (
        with_property(CLOSED_IN, {**TEXT, "examples": ["fine", "a\u3164b"]}),
        "/properties/p/examples/1", "examples", f"U+3164 (HANGUL FILLER), {SHOWS_NOTHING}"),
    "enum-member-inside-a-list": (
        with_property(CLOSED_IN, {"type": "array", "items": TEXT,
                                  "enum": [["a", "b"], ["c", "d\u2066"]]}),
        "/properties/p/enum/1/1", "enum", f"U+2066 (LEFT-TO-RIGHT ISOLATE), {DOES_NOT_PRINT}"),
    "default-object-value": (
        with_property(CLOSED_IN, {"type": "object", "additionalProperties": False,
                                  "properties": {"k": TEXT}, "default": {"k": "v\u2028w"}}),
        "/properties/p/default/k", "default",
        f"U+2028 (LINE SEPARATOR), {DOES_NOT_PRINT}"),
    "items-enum": (
        with_property(CLOSED_IN, {"type": "array", "items": {**TEXT, "enum": ["\u2067x"]}}),
        "/properties/p/items/enum/0", "enum", f"U+2067 (RIGHT-TO-LEFT ISOLATE), {DOES_NOT_PRINT}"),
    "definition-const": (
        with_property(CLOSED_IN, {"$ref": "#/$defs/mode"},
                      **{"$defs": {"mode": {**TEXT, "const": "fast" + TAGS}}}),
        "/$defs/mode/const", "const", f"U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}"),
}


@pytest.mark.parametrize("case", VALUES, ids=VALUES.keys())
def test_a_value_that_is_not_text_is_refused_at_its_pointer(case: str) -> None:
    schema, pointer, keyword, has = VALUES[case]
    assert problems(input_schema=schema) == [refused("input_schema", pointer, keyword, has)]


def test_a_key_of_a_default_is_refused_at_its_pointer_escaped() -> None:
    schema = with_property(CLOSED_IN, {"type": "object", "additionalProperties": False,
                                       "properties": {}, "default": {"k" + TAGS: 1}})
    assert problems(input_schema=schema) == [
        f"{STEP_5}fx-dist: input_schema: /properties/p/default/k{TAGS_SHOWN}: default key line "
        f"1 has U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}. {VALUE_REMEDY}"]


def test_the_output_schema_is_held_to_it_too() -> None:
    schema = with_property(CLOSED_OUT, {**TEXT, "enum": ["done", "do\u202ene"]})
    assert problems(output_schema=schema) == [refused(
        "output_schema", "/properties/p/enum/1", "enum",
        f"U+202E (RIGHT-TO-LEFT OVERRIDE), {DOES_NOT_PRINT}")]


def test_a_second_line_is_named() -> None:
    schema = with_property(CLOSED_IN, {**TEXT, "default": "one\ntw\u200bo"})
    assert problems(input_schema=schema) == [
        f"{STEP_5}fx-dist: input_schema: /properties/p/default: default line 2 has U+200B "
        f"(ZERO WIDTH SPACE), {DOES_NOT_PRINT}. {VALUE_REMEDY}"]


@pytest.mark.parametrize(("keyword", "name", "shown", "has"), [
    ("$defs", "mo\u200dde", "mo\\u200dde", f"U+200D (ZERO WIDTH JOINER) {JOINS_NOTHING}"),
    ("definitions", "mode" + TAGS, "mode" + TAGS_SHOWN,
     f"U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}"),
], ids=["defs-joiner", "definitions-tags"])
def test_a_definition_name_that_is_not_text_is_refused_escaped(
        keyword: str, name: str, shown: str, has: str) -> None:
    schema = with_property(CLOSED_IN, {"$ref": f"#/{keyword}/{name}"}, **{keyword: {name: TEXT}})
    assert problems(input_schema=schema) == [
        f"{STEP_5}fx-dist: input_schema: /{keyword}/{shown}: the definition name has {has}. "
        f"{NAME_REMEDY}"]


@pytest.mark.parametrize("schema", [
    with_property(CLOSED_IN, {"type": "string", "enum": [
        "caf\u00e9", "\u540d\u524d", "\U0001f469\u200d\U0001f4bb", WALES, "10\u202fMB",
        "\u0645\u06cc\u200c\u062e", "\u2764\ufe0f", ""]}),
    with_property(CLOSED_IN, {**TEXT, "default": "line one\nline two",
                              "examples": ["a b", "\u00e9t\u00e9\n\nhiver"], "const": "a b"}),
    with_property(CLOSED_IN, {"type": "object", "additionalProperties": False,
                              "properties": {"n\u00e9": TEXT}, "default": {"n\u00e9": "v"}}),
    with_property(CLOSED_IN, {"$ref": "#/$defs/\u540d\u524d"},
                  **{"$defs": {"\u540d\u524d": {**TEXT, "enum": [1, None, True, 2.5, "x"]}}}),
], ids=["any-script-emoji-flag", "line-breaks", "object-key", "definition-name"])
def test_text_in_any_script_registers(schema: dict[str, Any]) -> None:
    assert problems(input_schema=schema) == []


def test_check_refuses_in_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    changes = ('input_schema={**SCHEMA, "properties": {"mode": {"type": "string", '
               '"enum": ["fast", "slow\\u202e"]}}}')
    install_fake_plugin(site, "fake-values", "fake_values", PLUGIN.replace("CHANGES", changes))
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-values"}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"toolhost: {STEP_5}fake-values: input_schema: /properties/mode/enum/1: enum line 1 "
        f"has U+202E (RIGHT-TO-LEFT OVERRIDE), {DOES_NOT_PRINT}. {VALUE_REMEDY}\n")


@pytest.mark.parametrize("value", ["\t", "a\tb", "\r\n", "v\x1b[2J", "\x00"])
def test_a_control_json_escapes_in_a_value_registers(value: str) -> None:
    # tools/list writes these as escapes (\t, \u001b) the model reads: nothing is hidden.
    schema = with_property(CLOSED_IN, {**TEXT, "enum": [",", value], "default": value,
                                       "examples": [{value: value}]})
    assert problems(input_schema=schema) == []
