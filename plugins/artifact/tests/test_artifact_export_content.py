"""artifact.export 2.0.0's content: text the model wrote, saved as UTF-8 under a bare file
name, exactly one of path and content, and the 1 MiB bound in bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from artifact_support import Call, Store
from toolhost import Trust

SCHEMA = "tool.invalid_arguments.schema"


def code(outcome: Any) -> str | None:
    return outcome.failure.reason_code if outcome.failure is not None else None


def test_content_is_saved_as_utf8_text(call: Call, run: Any, store: Store) -> None:
    text = "Résumé: naïve ✓\r\nno newline added"
    outcome = call({"content": text})

    assert outcome.ok, outcome.to_json()
    ref = outcome.structured
    assert ref is not None
    data = text.encode("utf-8")
    assert ref == {"id": ref["id"], "name": "export.txt", "media_type": "text/plain; charset=utf-8",
                   "byte_count": len(data),
                   "checksum": "sha256:" + hashlib.sha256(data).hexdigest()}
    assert store.read(ref["id"]) == data
    assert store.origin_and_run(ref["id"]) == ("EXPORT", run.id)
    # The model wrote it: the artifact and the result are INTERNAL_TOOL.
    assert (outcome.output_trust, store.trust(ref["id"])) == (Trust.INTERNAL_TOOL,
                                                              Trust.INTERNAL_TOOL)
    assert outcome.content == (
        f'Exported "export.txt" ({len(data)} bytes, text/plain; charset=utf-8). '
        "It is attached to your reply.")


@pytest.mark.parametrize(("name", "media_type"), [
    ("notes.md", "text/markdown; charset=utf-8"),
    ("table.CSV", "text/csv; charset=utf-8"),
    ("data.json", "application/json; charset=utf-8"),
    ("page.html", "text/html; charset=utf-8"),
    ("drawing.svg", "image/svg+xml; charset=utf-8"),
    ("données 2024.txt", "text/plain; charset=utf-8"),
])
def test_the_name_and_its_text_media_type(call: Call, name: str, media_type: str) -> None:
    outcome = call({"content": "x", "name": name})
    assert outcome.structured is not None, outcome.to_json()
    assert (outcome.structured["name"], outcome.structured["media_type"]) == (name, media_type)
    assert outcome.content == (
        f'Exported "{name}" (1 byte, {media_type}). It is attached to your reply.')


def test_empty_content_is_an_empty_file(call: Call, store: Store) -> None:
    outcome = call({"content": ""})
    assert outcome.structured is not None
    assert outcome.structured["byte_count"] == 0
    assert store.read(outcome.structured["id"]) == b""


def test_the_same_content_twice_is_one_artifact(call: Call, store: Store) -> None:
    first = call({"content": "report", "name": "r.md"})
    rows, files = store.rows(), store.files()
    second = call({"content": "report", "name": "r.md"})
    assert second.structured == first.structured
    assert (rows, len(files)) == (1, 1)
    assert (store.rows(), store.files()) == (rows, files)


def test_other_content_under_the_same_name_is_a_new_artifact(call: Call, store: Store) -> None:
    first = call({"content": "v1", "name": "r.md"})
    second = call({"content": "v2", "name": "r.md"})
    assert first.structured is not None and second.structured is not None
    assert first.structured["id"] != second.structured["id"]
    assert (store.rows(), len(store.files())) == (2, 2)


# ------------------------------------------------------------------------ the arguments' shape


@pytest.mark.parametrize(("arguments", "expected", "message"), [
    ({"path": "a.txt", "content": "x"}, "tool.invalid_arguments.both_path_and_content",
     "Give either path (a workspace file) or content (text to save), not both."),
    ({}, "tool.invalid_arguments.no_path_or_content",
     "Give path (a workspace file) or content (text to save)."),
    ({"path": ""}, "tool.invalid_arguments.no_path_or_content",
     "Give path (a workspace file) or content (text to save)."),
    ({"name": "a.txt"}, "tool.invalid_arguments.no_path_or_content",
     "Give path (a workspace file) or content (text to save)."),
    ({"path": "a.txt", "name": "b.txt"}, "tool.invalid_arguments.name_with_path",
     "name only names content. An exported file keeps its own name; omit name."),
])
def test_exactly_one_of_path_and_content(
    call: Call, root: Path, store: Store, arguments: dict[str, str], expected: str, message: str
) -> None:
    (root / "a.txt").write_bytes(b"a")
    outcome = call(arguments)
    assert (code(outcome), outcome.content) == (expected, message)
    assert outcome.failure is not None and outcome.failure.retryable is False
    assert store.rows() == 0


def test_path_with_empty_content_is_both(call: Call, root: Path) -> None:
    (root / "a.txt").write_bytes(b"a")
    assert code(call({"path": "a.txt", "content": ""})) == (
        "tool.invalid_arguments.both_path_and_content")


# ------------------------------------------------------------------------ 1 MiB of UTF-8

LIMIT = 1048576
TOO_LONG = "tool.invalid_arguments.content_too_long"


def test_exactly_1_mib_of_bytes_exports(call: Call) -> None:
    outcome = call({"content": "a" * (LIMIT - 2) + "é"})
    assert outcome.structured is not None, outcome.to_json()
    assert outcome.structured["byte_count"] == LIMIT


def test_over_1_mib_of_bytes_under_1_mib_of_characters_is_too_long(
    call: Call, store: Store
) -> None:
    content = "a" * (LIMIT - 1) + "é"  # LIMIT characters, LIMIT + 1 bytes
    assert (len(content), len(content.encode())) == (LIMIT, LIMIT + 1)
    outcome = call({"content": content})
    assert code(outcome) == TOO_LONG
    assert outcome.content == ("content is longer than 1 MiB (1048576 bytes of UTF-8). Export "
                               "less text, or write it to a workspace file and export that by "
                               "path.")
    assert store.rows() == 0


def test_over_1_mib_of_characters_fails_at_the_schema_with_the_same_code(call: Call) -> None:
    outcome = call({"content": "a" * (LIMIT + 1)})
    assert code(outcome) == TOO_LONG
    assert outcome.failure is not None and outcome.failure.detail["rule"] == "maxLength"


# ------------------------------------------------------------------------ the file name rule

INVALID = "tool.invalid_arguments.invalid_name"


@pytest.mark.parametrize("name", [
    "", ".", "..", ".hidden.txt", "a/b.txt", "/b.txt", "a\\b.txt", "a\x00.txt", "a\x1f.txt",
    "a\x7f.txt", "a\x85.txt",  # C1 (NEL)
    "a.txt\n",  # "$" in the schema's pattern matches before a final newline: the body refuses
    "a\u202etxt.exe.txt",  # RIGHT-TO-LEFT OVERRIDE: a format character
    "a\u200b.txt",  # ZERO WIDTH SPACE
    "a\u2028.txt",  # LINE SEPARATOR
    "x" * 252 + ".txt",  # 256 characters: over the schema's maxLength
    "é" * 126 + ".txt",  # 130 characters, 256 bytes: the body's byte check
    # What hides a second extension or does not survive the save on the owner's machine:
    "invoice.pdf" + "\u3164" * 40 + ".txt",  # HANGUL FILLER padding (a letter, Lo)
    "invoice.pdf" + "\u2000" * 40 + ".txt",  # EN QUAD: a space (Zs) that is not U+0020
    "a\u00a0b.txt", "a\u115fb.txt", "a\u1160b.txt", "a\uffa0b.txt",
    "report.txt.", "report.txt ", "noextension.",  # Windows drops a trailing dot or space
    "CON", "con.txt", "NUL.txt", "Aux.md", "prn.tar.txt", "COM1.txt", "lpt9.txt", "CON .txt",
    *(f"a{c}b.txt" for c in '<>:"|?*'),
])
def test_names_the_rule_refuses(call: Call, store: Store, name: str) -> None:
    outcome = call({"content": "x", "name": name})
    assert code(outcome) == INVALID, outcome.to_json()
    assert outcome.content == (
        "name must be a bare file name such as report.txt: no / or \\, no control characters, "
        "no <>:\"|?*, no space but the plain one, no two spaces in a row, not starting with a "
        "dot, not ending with a dot or space, not a device name such as CON or NUL, at most 255 "
        "bytes.")
    assert store.rows() == 0


@pytest.mark.parametrize("name", ["x" * 251 + ".txt", "é" * 125 + "a.txt", "a..b.txt",
                                  "trailing dot.txt", "UPPER.TXT", "a b c.md",
                                  "CONSOLE.txt", "COM10.txt", "a.con.txt", "my con.txt",
                                  "한글.txt"])
def test_names_the_rule_accepts(call: Call, name: str) -> None:
    outcome = call({"content": "x", "name": name})
    assert outcome.ok, outcome.to_json()
    assert outcome.structured is not None and outcome.structured["name"] == name


@pytest.mark.parametrize("name", ["image.png", "report.pdf", "archive.tar.gz", "README",
                                  "noextension", "data.bin"])
def test_a_name_whose_type_is_not_text_is_refused(call: Call, store: Store, name: str) -> None:
    outcome = call({"content": "x", "name": name})
    assert code(outcome) == "tool.invalid_arguments.name_not_text"
    assert outcome.content == ("content is saved as text, so name needs a text extension such "
                               "as .txt, .md, .csv, .json or .html.")
    assert store.rows() == 0
