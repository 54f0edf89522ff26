"""The flags of England, Scotland and Wales are RGI emoji tag sequences (a black flag, the tag
letters of gbeng, gbsct or gbwls, a CANCEL TAG), so they are text wherever the description rule
applies: a tool's description, a schema's description, a property's name, an enum member.
Every other use of tag characters stays refused, named, since tag characters spell ASCII no
one sees: a tag sequence Unicode does not recommend (a US state's), one cut short or left
open, tags after a flag, tags with no flag."""

from __future__ import annotations

import pytest
from conftest import CLOSED_IN
from test_registration_description_and_control_kind import STEP_6, problems, refused
from test_schema_descriptions_and_titles_print import TEXT

from toolhost._registration.schema import not_text

BLACK_FLAG, CANCEL = "\U0001f3f4", "\U000e007f"


def tags(letters: str) -> str:
    return "".join(chr(0xE0000 + ord(c)) for c in letters)


FLAGS = {region: f"{BLACK_FLAG}{tags(region)}{CANCEL}" for region in ("gbeng", "gbsct", "gbwls")}


@pytest.mark.parametrize("flag", FLAGS.values(), ids=FLAGS.keys())
def test_each_subdivision_flag_registers_where_text_is_held_to_the_rule(flag: str) -> None:
    assert problems(description=f"Cheer for {flag} and {flag}{flag}.\n\n{flag} again") == []
    schema = {**CLOSED_IN, "properties": {
        f"team{flag}": {**TEXT, "description": f"The {flag} side.", "title": flag,
                        "enum": [flag, f"{flag} Wales"]}},
        "required": [f"team{flag}"]}
    assert problems(input_schema=schema) == []


def test_the_three_flags_side_by_side_are_text() -> None:
    assert not_text("".join(FLAGS.values())) is None


TAG_G = "U+E0067 (TAG LATIN SMALL LETTER G)"


@pytest.mark.parametrize(("text", "character"), [
    (f"{BLACK_FLAG}{tags('usca')}{CANCEL}", "U+E0075 (TAG LATIN SMALL LETTER U)"),
    (f"{BLACK_FLAG}{tags('gbeng')}", TAG_G),
    (f"{BLACK_FLAG}{tags('gb')}{CANCEL}", TAG_G),
    (f"{BLACK_FLAG}{CANCEL}", "U+E007F (CANCEL TAG)"),
    (f"{FLAGS['gbeng']}{tags('IGNORE')}{CANCEL}", "U+E0049 (TAG LATIN CAPITAL LETTER I)"),
    (f"{FLAGS['gbsct']}{CANCEL}", "U+E007F (CANCEL TAG)"),
    (f"x{tags('gbwls')}{CANCEL}", TAG_G),
    (f"\U0001f3f3{tags('gbwls')}{CANCEL}", TAG_G),
    (f"{BLACK_FLAG}\ufe0f{tags('gbwls')}{CANCEL}", TAG_G),
], ids=["not-recommended", "left-open", "cut-short", "cancel-alone", "tags-after-a-flag",
        "cancel-twice", "no-flag", "white-flag", "selector-between"])
def test_every_other_tag_sequence_stays_refused(text: str, character: str) -> None:
    assert problems(description=f"Cheer {text}.") == [f"{STEP_6}fx-dist: {refused(1, character)}"]
