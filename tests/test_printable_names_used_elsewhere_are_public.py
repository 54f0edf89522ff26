"""What another module takes from ``toolhost._model.printable`` is public there: registration's
text rule refuses the characters the displays escape as showing nothing through
``SHOWS_NOTHING``, not through a private name, so the two sets stay one and a rename inside
printable.py cannot go unnoticed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from toolhost._model import printable
from toolhost._model.printable import SHOWS_NOTHING, escaped

HOST = Path(__file__).parents[1] / "host" / "toolhost"


def test_no_module_imports_a_private_name_of_printable() -> None:
    private = []
    for path in sorted(HOST.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "toolhost._model.printable":
                private += [f"{path.relative_to(HOST)}: {a.name}" for a in node.names
                            if a.name.startswith("_")]
    assert private == []


def test_shows_nothing_is_public_and_every_character_in_it_is_escaped() -> None:
    assert "SHOWS_NOTHING" in printable.__all__
    nothing = re.compile(f"[{SHOWS_NOTHING}]")
    matched = [chr(c) for c in range(0x110000) if nothing.match(chr(c))]
    assert len(matched) > 4000  # the tag block alone is 4,096
    assert [ch for ch in matched if escaped(ch) == ch] == []
