"""``toolhost._model.printable``: what a terminal or a browser draws as a blank, and combining
marks stacked past ``MARKS_IN_A_ROW`` (a "Zalgo" smear over the lines above and below), are
escaped like what does not print, so an approval's text hides nothing beside it."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from toolhost._model.printable import MARKS_IN_A_ROW, escaped, one_line, prints

ACUTE, GRAVE = "\u0301", "\u0300"
TREMOLO = "\U0001d167"  # MUSICAL SYMBOL COMBINING TREMOLO-1: a mark past U+FFFF


def is_mark(ch: str) -> bool:
    return unicodedata.category(ch) in ("Mn", "Me")


def longest_run_of_marks(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if is_mark(ch) else 0
        longest = max(longest, run)
    return longest


def test_a_printable_character_drawn_blank_is_escaped() -> None:
    for ch in ("\u2800", "\U0001d159"):  # BRAILLE PATTERN BLANK, MUSICAL SYMBOL NULL NOTEHEAD
        assert ch.isprintable() and not prints(ch)
    assert escaped("rm\u2800-rf /") == "rm\\u2800-rf /"
    assert escaped("note\U0001d159d") == "note\\ud834\\udd59d"
    assert one_line("build\u2800\u2800host.example", 50) == "build host.example"
    assert prints("\u2801\u28ff")  # Braille that has dots is text


def test_every_character_of_the_usual_invisible_lists_but_the_space_is_escaped() -> None:
    # invisible-characters.com's list, which the blank pair above completes.
    invisible = [0x09, 0xA0, 0xAD, 0x34F, 0x61C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E,
                 *range(0x2000, 0x2010), 0x202F, 0x205F, *range(0x2060, 0x2065),
                 *range(0x206A, 0x2070), 0x3000, 0x2800, 0x3164, 0xFEFF, 0xFFA0, 0x1D159,
                 *range(0x1D173, 0x1D17B), 0x2028, 0x2029, *range(0xE0020, 0xE0080)]
    for code in invisible:
        ch = chr(code)
        assert not prints(ch) and escaped(ch) == json.dumps(ch)[1:-1] != ch, hex(code)
    assert escaped("a\u3164\uffa0\U0001d173\U000e0020b") == (
        "a\\u3164\\uffa0\\ud834\\udd73\\udb40\\udc20b")


def test_each_mark_past_the_bound_in_a_row_is_escaped() -> None:
    assert MARKS_IN_A_ROW == 8
    smear = "a" + ACUTE * 12 + "b"
    assert not prints(smear)
    assert escaped(smear) == "a" + ACUTE * 8 + "\\u0301" * 4 + "b"
    assert one_line(smear, 100) == "a" + ACUTE * 8 + " b"
    # The run counts marks, not one mark repeated, and restarts after any other character.
    assert escaped("x" + ACUTE * 8 + GRAVE * 2 + "y" + GRAVE * 9) == (
        "x" + ACUTE * 8 + "\\u0300" * 2 + "y" + GRAVE * 8 + "\\u0300")
    assert escaped("o" + "\u20dd" * 9) == "o" + "\u20dd" * 8 + "\\u20dd"  # enclosing (Me)
    assert escaped("q" + TREMOLO * 9) == "q" + TREMOLO * 8 + "\\ud834\\udd67"
    # What is escaped between two runs is no mark: each run stacks on its own base.
    assert escaped("a" + ACUTE * 8 + "\u200b" + ACUTE * 8) == (
        "a" + ACUTE * 8 + "\\u200b" + ACUTE * 8)
    assert escaped(ACUTE * 8 + "\n" + ACUTE * 9, one_line=False) == (
        ACUTE * 8 + "\n" + ACUTE * 8 + "\\u0301")


def test_real_scripts_and_a_short_stack_show_as_themselves() -> None:
    for text in (
        unicodedata.normalize("NFD", "Tiếng Việt"),  # two marks on a letter
        "\u05e9\u05bc\u05c1\u05b8\u05bd\u0591",  # shin, dagesh, dot, qamats, meteg, etnahta
        "\u0f67\u0fb9\u0fa8\u0fb3\u0fad\u0fb2\u0fbb\u0f7e",  # the Kalachakra monogram: 7
        "हिन्दी, ภาษาไทย, العَرَبِيَّة",
        "1\u20e3 e" + ACUTE * 8,
    ):
        assert longest_run_of_marks(text) <= MARKS_IN_A_ROW
        assert prints(text) and escaped(text) == text and one_line(text, 100) == text


def test_the_mark_classes_agree_with_unicodedata_on_every_printable_code_point() -> None:
    # Through the fast path and its exact check both: a run of nine of one character prints
    # unless it is a mark, whatever the Unicode version of the Python that runs it.
    for code in range(0x110000):
        ch = chr(code)
        if not ch.isprintable() or not prints(ch):
            continue
        assert prints(ch * MARKS_IN_A_ROW), hex(code)
        assert prints(ch * (MARKS_IN_A_ROW + 1)) is not is_mark(ch), hex(code)


MARKS = [ACUTE, GRAVE, "\u0323", "\u20dd", "\u05b8", "\u0f7e", TREMOLO, "\U000e0100"]
#: Bases, what does not show, and runs of marks around the bound, in any order.
PIECES = st.lists(st.one_of(
    st.sampled_from(["a", "ש", "\U0001f600", "\u2800", "\u200b", "\n", '"', "\\"]),
    st.text(st.sampled_from(MARKS), min_size=MARKS_IN_A_ROW - 2, max_size=MARKS_IN_A_ROW + 9),
)).map("".join)


@given(st.one_of(PIECES, st.text()), st.booleans())
def test_an_escaped_text_shows_every_character_and_no_smear(text: str, lines: bool) -> None:
    shown = escaped(text, one_line=not lines)
    assert all(prints(ch) for ch in shown.replace("\n", ""))
    assert longest_run_of_marks(shown) <= MARKS_IN_A_ROW
    if not lines:  # the fast path (``prints``) skips exactly the texts escaping leaves alone
        assert prints(shown) and (shown == text) is prints(text)
        if '"' not in text and "\\" not in text:
            assert json.loads(f'"{shown}"') == text


@given(st.one_of(PIECES, st.text()), st.integers(min_value=1, max_value=60))
def test_one_line_shows_every_character_and_no_smear(text: str, limit: int) -> None:
    line = one_line(text, limit)
    assert prints(line) and longest_run_of_marks(line) <= MARKS_IN_A_ROW
