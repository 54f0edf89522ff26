"""A tool's description may hold a zero-width joiner (U+200D: an emoji sequence such as woman,
ZWJ, laptop; an Indic conjunct) or non-joiner (U+200C: inside a Persian word) where it joins
two characters it changes: an emoji or another symbol, a letter or mark of a script that joins
(never two Latin letters: tests/test_joiners_join_only_scripts_that_join.py). Anywhere else
(a line's start or end, beside a space, another joiner or punctuation) it is refused, named;
every other format character (direction overrides and isolates, tag characters, U+200B,
U+2060, U+FEFF) stays refused. The text reaches an MCP client's tools/list as written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import CLOSED_IN, make_plugin, make_spec, make_tool
from test_registration_description_and_control_kind import STEP_6, problems, refused

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from toolhost._mcp.config import ServeConfig  # noqa: E402
from toolhost._mcp.definitions import served_roster  # noqa: E402
from toolhost._mcp.server import build_server  # noqa: E402
from toolhost._model.settings import Settings  # noqa: E402
from toolhost.testing import host_for  # noqa: E402

ZWJ, ZWNJ = "\u200d", "\u200c"
TECHNOLOGIST = f"\U0001f469{ZWJ}\U0001f4bb"  # woman, ZWJ, laptop: one technologist

JOINED = {
    "emoji-sequence": f"Pair with a {TECHNOLOGIST} on the code.",
    "skin-tone": f"Pair with a \U0001f469\U0001f3fd{ZWJ}\U0001f4bb.",
    # A variation selector (a mark) before the joiner: heart-on-fire, rainbow flag.
    "after-variation-selector": f"Hot \u2764\ufe0f{ZWJ}\U0001f525 and \U0001f3f3\ufe0f{ZWJ}"
                                "\U0001f308 flags.",
    "persian": f"\u0645\u06cc{ZWNJ}\u062e\u0648\u0627\u0647\u0645 "
               "\u0628\u0646\u0648\u06cc\u0633\u0645.",
    "devanagari-conjunct": f"Spell \u0915\u094d{ZWJ}\u0937 half-formed.",
    "second-paragraph": f"Echo x back.\n\nWith a {TECHNOLOGIST} on the second paragraph.",
}


@pytest.mark.parametrize("text", JOINED.values(), ids=JOINED.keys())
def test_a_joiner_between_two_characters_that_show_registers(text: str) -> None:
    assert problems(description=text) == []


def joins_nothing(line: int, character: str) -> str:
    return (f"description line {line} has {character} where it joins nothing: a joiner "
            "stands only inside an emoji sequence or between two letters of a script that "
            "joins them (Arabic, Persian, Indic ...). To fix: write the description as "
            "printable text, its paragraphs separated by newlines")


@pytest.mark.parametrize(("text", "line", "character"), [
    (f"{ZWJ}Echo x back.", 1, "U+200D (ZERO WIDTH JOINER)"),
    (f"Echo x back.{ZWJ}", 1, "U+200D (ZERO WIDTH JOINER)"),
    (f"Echo x back.\n{ZWNJ}Second.", 2, "U+200C (ZERO WIDTH NON-JOINER)"),
    (f"Echo x{ZWNJ}\nback.", 1, "U+200C (ZERO WIDTH NON-JOINER)"),
    (f"Echo x{ZWJ}{ZWJ}back.", 1, "U+200D (ZERO WIDTH JOINER)"),
    (f"Echo x{ZWNJ}{ZWJ}back.", 1, "U+200C (ZERO WIDTH NON-JOINER)"),
    (f"Echo x {ZWJ} back.", 1, "U+200D (ZERO WIDTH JOINER)"),
    (f"Echo x{ZWJ}.", 1, "U+200D (ZERO WIDTH JOINER)"),
    (f"Echo 1{ZWJ}2.", 1, "U+200D (ZERO WIDTH JOINER)"),
], ids=["line-start", "line-end", "second-line-start", "before-newline", "doubled",
        "non-joiner-then-joiner", "beside-spaces", "before-punctuation", "between-digits"])
def test_a_joiner_that_joins_nothing_is_refused_naming_it(
        text: str, line: int, character: str) -> None:
    assert problems(description=text) == [f"{STEP_6}fx-dist: {joins_nothing(line, character)}"]


@pytest.mark.parametrize(("text", "character"), [
    (f"Echo \u202aback{ZWJ}x.", "U+202A (LEFT-TO-RIGHT EMBEDDING)"),
    (f"Echo {TECHNOLOGIST}\u202e.", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("Echo a\u2067b.", "U+2067 (RIGHT-TO-LEFT ISOLATE)"),
    ("Echo a\u2069b.", "U+2069 (POP DIRECTIONAL ISOLATE)"),
    ("Echo \U0001f3f4\U000e0067\U000e0062\U000e007f.", "U+E0067 (TAG LATIN SMALL LETTER G)"),
    ("Echo a\U000e0001b.", "U+E0001 (LANGUAGE TAG)"),
    ("Echo a\u200bb.", "U+200B (ZERO WIDTH SPACE)"),
    ("Echo a\u2060b.", "U+2060 (WORD JOINER)"),
    ("Echo a\ufeffb.", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
    ("Echo a\u00adb.", "U+00AD (SOFT HYPHEN)"),
], ids=["embedding", "override-after-sequence", "isolate", "pop-isolate", "tag-letter",
        "language-tag", "zero-width-space", "word-joiner", "byte-order-mark", "soft-hyphen"])
def test_every_other_format_character_between_letters_stays_refused(
        text: str, character: str) -> None:
    assert problems(description=text) == [f"{STEP_6}fx-dist: {refused(1, character)}"]


def test_joined_text_reaches_tools_list_as_written(tmp_path: Path) -> None:
    persian = JOINED["persian"]
    schema = {**CLOSED_IN, "properties": {"x": {**CLOSED_IN["properties"]["x"],
                                                 "description": persian}}}
    tool = make_tool(make_spec(description=JOINED["emoji-sequence"], input_schema=schema))
    with host_for({"toolhost-fx": make_plugin(("fx",), [tool])},
                  data_dir=tmp_path / "data") as host:
        roster = served_roster(host.registry, None, {})
        server, _ = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))

        async def listed() -> list[object]:
            async with mcp.Client(server) as client:
                return list((await client.list_tools()).tools)

        (shown,) = asyncio.run(listed())
    assert shown.description == JOINED["emoji-sequence"]  # type: ignore[attr-defined]
    properties = shown.input_schema["properties"]  # type: ignore[attr-defined]
    assert properties["x"]["description"] == persian
