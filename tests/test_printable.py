"""``toolhost._model.printable``: the one place that decides how text from elsewhere is shown
(the CLI, the MCP approval form, an upstream's stderr and errors, progress messages, an
upstream's descriptions)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from toolhost._model.printable import escaped, one_line, prints


def test_what_does_not_print_is_its_json_escape() -> None:
    assert escaped("plain text, unchanged") == "plain text, unchanged"
    assert escaped("a\x1b[2Jb") == "a\\u001b[2Jb"
    assert escaped("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert escaped("tag\U000e0041") == "tag\\udb40\\udc41"  # as JSON writes it
    assert escaped("two\nlines") == "two\\nlines"
    assert escaped("two\nlines", one_line=False) == "two\nlines"


@given(st.text())
def test_an_escaped_text_prints_and_is_the_text_inside_a_json_string(text: str) -> None:
    shown = escaped(text)
    assert prints(shown)
    if '"' not in text and "\\" not in text:
        assert json.loads(f'"{shown}"') == text


def test_what_shows_as_nothing_is_escaped_though_python_prints_it() -> None:
    # D465: Unicode's default-ignorable characters that str.isprintable passes.
    for ch in ("\ufe0f", "\U000e0131", "\u034f", "\u3164", "\u115f", "\uffa0", "\u17b4"):
        assert ch.isprintable() and not prints(ch)
    assert escaped("ok \U0001f600\ufe0f\U000e0131") == "ok \U0001f600\\ufe0f\\udb40\\udd31"
    assert one_line("a\u034fb\u3164c", 10) == "a b c"
    assert prints("ça va, 日本, \U0001f600")


def test_one_line_is_prose_without_what_does_not_print() -> None:
    assert one_line("a\x1b[31mb\r\nc", 100) == "a [31mb c"
    assert one_line("done \u202egnp.exe", 100) == "done gnp.exe"
    assert one_line("x" * 10, 5) == "xxxx…"


@given(st.text(), st.integers(min_value=1, max_value=50))
def test_one_line_is_one_printable_line_within_its_limit(text: str, limit: int) -> None:
    line = one_line(text, limit)
    assert prints(line) and len(line) <= limit and "\n" not in line
