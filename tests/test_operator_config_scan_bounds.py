"""Reading toolhost.toml costs time in proportion to its size (it is read up to 1 MiB): the line
scan that finds each key's line, and the check for a password in a URL, take no pattern that
backtracks on a long line. Loose bounds only: each case took minutes to hours before."""

from __future__ import annotations

import re
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost._model.config_file import MAX_CONFIG_BYTES, _key_lines, read_config
from toolhost._model.settings import redact_url_password

#: Far above what a linear scan of a mebibyte takes, far below what the cubic one did.
BOUND_S = 5.0

#: The header pattern before the fix: a reference for what a header is, on short lines only.
_OLD_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def _old_key_lines(text: str) -> dict[tuple[str, str], int]:
    from toolhost._model.config_file import (
        _lines_outside_strings,
        _note_keys,
        _split_dotted,
        _unquote,
    )

    found: dict[tuple[str, str], int] = {}
    table = ""
    for number, line in _lines_outside_strings(text):  # as the scan reads them: headers differ
        header = _OLD_HEADER.match(line)
        if header:
            table = ".".join(_unquote(part.strip()) for part in _split_dotted(header.group(1)))
            found.setdefault((table, ""), number)
            continue
        _note_keys(found, table, line, number)
    return found


def _timed(run: object) -> float:
    assert callable(run)
    started = time.monotonic()
    run()
    return time.monotonic() - started


def test_a_mebibyte_line_of_a_bracket_and_spaces_in_a_string_is_read_in_bounded_time(
        tmp_path: Path) -> None:
    head = ('[mcp.servers.files]\ncommand = "/bin/true"\n[mcp.servers.files.tools.read]\n'
            'description = """Reads a file.\n[')
    tail = 'x\n"""\n'
    path = tmp_path / "toolhost.toml"
    path.write_text(head + " " * (MAX_CONFIG_BYTES - len(head) - len(tail)) + tail)
    path.chmod(0o600)
    assert path.stat().st_size == MAX_CONFIG_BYTES
    elapsed = _timed(lambda: read_config(path, {}))
    assert elapsed < BOUND_S
    config = read_config(path, {})
    assert config.line_of("mcp.servers.files.tools.read", "description") == 4


def test_other_long_lines_the_scan_meets_are_linear_too() -> None:
    n = MAX_CONFIG_BYTES
    for line in ("[" + "\t" * n, " " * n + "[" + " " * n + "x", "[" + "a" * n,
                 "[" + " a." * (n // 3), " " * n, "a" * n + " ", '"' + "\\" * n):
        assert _timed(lambda line=line: _key_lines(line)) < BOUND_S, line[:8]


def test_a_long_run_of_question_marks_in_a_url_is_redacted_in_bounded_time() -> None:
    # Every "?" began a parameter's name that ran to the end of the run: quadratic.
    value = "postgresql://h/db" + "?" * MAX_CONFIG_BYTES + " ="
    assert _timed(lambda: redact_url_password(value)) < BOUND_S
    assert redact_url_password("postgresql://u:pw@h/db?sslpassword=s&x=1") == (
        "postgresql://u:***@h/db?sslpassword=***&x=1")
    assert redact_url_password("http://h/p?x?password=s") == "http://h/p?x?password=***"


def test_every_header_form_is_found_as_before() -> None:
    text = "\n".join([
        "[host]", "  [ mcp ]  # the server", "[mcp.servers.files]", '[ "a.b" . c ]',
        "[plugins.toolhost_people]", "[ ]", "[]", "[[array]]", "[x] y", "[\ty\t.\tz\t]",
        "key = 1", '"quoted key" = 2', "'lit' = 3", "[a#b]", "[a]#c", "[a] # c ] ",
    ])
    assert _key_lines(text) == _old_key_lines(text)
    assert ("mcp", "") in _key_lines(text) and ("a.b.c", "") in _key_lines(text)
    assert ("y.z", "") in _key_lines(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet=" \t[]a.\"'#=b\u3000", max_size=24), max_size=6))
def test_the_scan_finds_what_the_old_pattern_found(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert _key_lines(text) == _old_key_lines(text)
