"""A property's name reaches the model in tools/list as the descriptions do, so step 5 holds
it to the same rule (one function): a key of ``properties`` or an entry of ``required``
holding tag characters, a joiner that joins nothing, a control or a character that shows as
nothing is refused at its pointer, what does not show escaped there (``patternProperties`` is
refused whole). A name in any script, joined where the script joins, registers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import CLOSED_IN
from installed import install_fake_plugin
from test_cli import toolhost
from test_registration_description_and_control_kind import PLUGIN, problems
from test_schema_descriptions_and_titles_print import STEP_5, TEXT

TAGS = "".join(chr(0xE0000 + ord(c)) for c in "IGNORE")
#: ``TAGS`` as the refusal's pointer shows it: each tag character's JSON escape.
TAGS_SHOWN = "".join(f"\\udb40\\udc{ord(c):02x}" for c in "IGNORE")
REMEDY = "To fix: name the property in printable text, with no character that does not show"
DOES_NOT_PRINT = ("which does not print: a control character (a carriage return, tab or "
                  "escape), a direction mark, a zero-width or other format character, or a "
                  "line separator")


def with_names(**keywords: Any) -> dict[str, Any]:
    return {**CLOSED_IN, **keywords}


#: (the input schema, the pointer refused, what the name has).
NAMES: dict[str, tuple[dict[str, Any], str, str]] = {
    "tag-characters": (
        with_names(properties={"path" + TAGS: TEXT}),
        f"/properties/path{TAGS_SHOWN}",
        f"U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}"),
    "joiner-between-ascii-letters": (
        with_names(properties={"pa\u200cth": TEXT}), "/properties/pa\\u200cth",
        "U+200C (ZERO WIDTH NON-JOINER) where it joins nothing: a joiner stands only inside an "
        "emoji sequence or between two letters of a script that joins them (Arabic, Persian, "
        "Indic ...)"),
    "line-break": (
        with_names(properties={"path\nSYSTEM": TEXT}), "/properties/path\\nSYSTEM",
        f"U+000A, {DOES_NOT_PRINT}"),
    "grapheme-joiner": (
        with_names(properties={"pa\u034fth": TEXT}), "/properties/pa\\u034fth",
        "U+034F (COMBINING GRAPHEME JOINER), which shows as nothing: a combining grapheme "
        "joiner, a Hangul filler, a blank or another default-ignorable character"),
    "required-entry": (
        with_names(required=["x", "x" + TAGS]), "/required/1",
        f"U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}"),
    "nested-object": (
        with_names(properties={"o": {"type": "object", "additionalProperties": False,
                                     "properties": {"a\u3164": TEXT}}}),
        "/properties/o/properties/a\\u3164",
        "U+3164 (HANGUL FILLER), which shows as nothing: a combining grapheme joiner, a Hangul "
        "filler, a blank or another default-ignorable character"),
}


@pytest.mark.parametrize("case", NAMES, ids=NAMES.keys())
def test_a_name_that_is_not_text_is_refused_at_its_pointer(case: str) -> None:
    schema, pointer, has = NAMES[case]
    assert problems(input_schema=schema) == [
        f"{STEP_5}fx-dist: input_schema: {pointer}: the property name has {has}. {REMEDY}"]


@pytest.mark.parametrize("name", [
    "caf\u00e9", "\u540d\u524d",
    "\u0646\u0627\u0645\u200c\u062e\u0627\u0646\u0648\u0627\u062f\u06af\u06cc",
    "\u0915\u094d\u200d\u0937", "with space", "\U0001f469\u200d\U0001f4bb",
], ids=["latin", "cjk", "persian-non-joiner", "devanagari-joiner", "space", "emoji-sequence"])
def test_a_name_in_any_script_registers(name: str) -> None:
    assert problems(input_schema=with_names(properties={name: TEXT}, required=[name])) == []


def test_check_refuses_in_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    schema = {"type": "object", "properties": {"path" + TAGS: TEXT},
              "additionalProperties": False}
    install_fake_plugin(site, "fake-names", "fake_names",
                        PLUGIN.replace("CHANGES", f"input_schema={schema!r}"))
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-names"}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"toolhost: {STEP_5}fake-names: input_schema: /properties/path{TAGS_SHOWN}: the "
        f"property name has U+E0049 (TAG LATIN CAPITAL LETTER I), {DOES_NOT_PRINT}. {REMEDY}\n")
