"""The fixed media type table: the same answer on every host, never the machine's mime files."""

from __future__ import annotations

import pytest

from toolhost._model import media_types
from toolhost._model.media_types import OCTET_STREAM, extension_of, media_type_for

# The table, stated again: a changed entry changes artifact identity, so it changes here too.
EXPECTED = {
    "txt": ("text/plain", True), "log": ("text/plain", True), "md": ("text/markdown", True),
    "csv": ("text/csv", True), "tsv": ("text/tab-separated-values", True),
    "json": ("application/json", True), "jsonl": ("application/jsonl", True),
    "xml": ("application/xml", True), "yaml": ("application/yaml", True),
    "yml": ("application/yaml", True), "html": ("text/html", True),
    "htm": ("text/html", True), "css": ("text/css", True), "js": ("text/javascript", True),
    "py": ("text/x-python", True), "svg": ("image/svg+xml", True),
    "pdf": ("application/pdf", False), "png": ("image/png", False),
    "jpg": ("image/jpeg", False), "jpeg": ("image/jpeg", False), "gif": ("image/gif", False),
    "webp": ("image/webp", False), "mp3": ("audio/mpeg", False), "wav": ("audio/wav", False),
    "mp4": ("video/mp4", False), "webm": ("video/webm", False),
    "zip": ("application/zip", False), "gz": ("application/gzip", False),
    "tar": ("application/x-tar", False),
}


def test_the_table() -> None:
    assert {k: (v.name, v.textual) for k, v in media_types.TABLE.items()} == EXPECTED


@pytest.mark.parametrize(("name", "expected"), [
    ("report.txt", "text/plain"), ("REPORT.PDF", "application/pdf"),
    ("photo.JpEg", "image/jpeg"), ("archive.tar.gz", "application/gzip"),
    ("a.b.c.md", "text/markdown"), ("noext", "application/octet-stream"),
    (".bashrc", "application/octet-stream"), ("file.", "application/octet-stream"),
    ("data.bin", "application/octet-stream"), ("x.docx", "application/octet-stream"),
])
def test_media_type_for(name: str, expected: str) -> None:
    assert media_type_for(name).name == expected


def test_a_non_ascii_extension_is_no_extension() -> None:
    # KELVIN SIGN lower-cases to an ASCII "k": a lookalike must not select a table entry.
    assert "\u212a".lower() == "k"
    assert extension_of("a.\u212a") is None
    assert media_type_for("a.m\u212a") is OCTET_STREAM


def test_text_saved_as_utf8_says_so() -> None:
    assert media_types.TABLE["csv"].utf8() == "text/csv; charset=utf-8"
    with pytest.raises(ValueError):
        media_types.TABLE["png"].utf8()


def test_the_table_reads_no_mime_files() -> None:
    import ast
    from pathlib import Path

    tree = ast.parse(Path(media_types.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "mimetypes" not in imported
