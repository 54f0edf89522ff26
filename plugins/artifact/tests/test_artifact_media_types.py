"""The tool's modules reach files only through the Workspace port, and take media types from
the host's one fixed table (``toolhost.media_type_for``, tested with the host), never from the
machine's mime files."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import toolhost_artifact

SRC = Path(toolhost_artifact.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _calls(path: Path) -> set[str]:
    return {node.func.id for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


MODULES = sorted(SRC.glob("*.py"))
# What the tool's modules may import: the host's public API, this package, and standard
# modules that touch no filesystem, environment or mime database.
ALLOWED = {"__future__", "collections", "contextlib", "dataclasses", "json", "typing",
           "unicodedata", "toolhost", "toolhost_artifact"}


def test_there_is_no_table_of_the_plugins_own() -> None:
    assert not (SRC / "media_types.py").exists()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_the_tool_reaches_files_only_through_the_workspace_port(path: Path) -> None:
    # No os, pathlib, shutil, glob or mimetypes, and no open(): the file's bytes come from
    # context.workspace, and its media type from the table.
    assert _imports(path) <= ALLOWED
    assert "open" not in _calls(path)


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import mimetypes\nfrom os import path\nopen('x')\n")
    assert _imports(probe) - ALLOWED == {"mimetypes", "os"}
    assert "open" in _calls(probe)
