"""The folder tree is the architecture, and these tests keep it so.

- Adapters (SQLite, the filesystem workspace, the system clock, the HTTP clients) are imported
  only by the composition root and by other adapters: the host knows ports, never a backend.
- Ports are Protocols only.
- Value objects (``_model``) depend on no layer above them at run time.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "host" / "toolhost"
COMPOSITION_ROOT = PACKAGE / "_composition.py"
ADAPTERS = PACKAGE / "_adapters"
LAYERS_ABOVE_MODEL = ("_registration", "_pipeline", "_adapters", "_composition", "_cli", "_mcp",
                      "_testing")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(tree: ast.AST, *, runtime_only: bool = False) -> Iterator[tuple[int, str]]:
    """Every ``toolhost...`` module a file imports; with ``runtime_only``, not the ones under
    ``if TYPE_CHECKING:`` (annotations only)."""
    skip: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            yield from ((node.lineno, n) for n in names if n.startswith("toolhost"))
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names
                        if a.name.startswith("toolhost"))


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(PACKAGE)}:{line}"


def test_only_the_composition_root_imports_an_adapter() -> None:
    found = [
        f"{_where(path, line)}: {name}"
        for path in _modules()
        if path != COMPOSITION_ROOT and ADAPTERS not in path.parents
        for line, name in _imports(ast.parse(path.read_text()))
        if name.startswith("toolhost._adapters")
    ]
    assert found == []


def test_the_adapter_check_sees_an_adapter_import(tmp_path: Path) -> None:
    probe = ast.parse("from toolhost._adapters.sqlite_db import connect\n"
                      "import toolhost._adapters.system_clock\n")
    assert [name for _, name in _imports(probe) if name.startswith("toolhost._adapters")] == [
        "toolhost._adapters.sqlite_db", "toolhost._adapters.sqlite_db.connect",
        "toolhost._adapters.system_clock"]


@pytest.mark.parametrize("path", sorted((PACKAGE / "_ports").glob("*.py")),
                         ids=lambda p: p.name)
def test_ports_are_protocols_only(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = {ast.unparse(b) for b in node.bases}
            assert "Protocol" in bases, f"{path.name}: {node.name} is not a Protocol"
        else:
            assert isinstance(node, (ast.Import, ast.ImportFrom, ast.If, ast.Expr, ast.Assign)), (
                f"{path.name}:{node.lineno}: a port module holds Protocols only")


def test_value_objects_depend_on_no_layer_above_them() -> None:
    found = [
        f"{_where(path, line)}: {name}"
        for path in sorted((PACKAGE / "_model").glob("*.py"))
        for line, name in _imports(ast.parse(path.read_text()), runtime_only=True)
        if name.split(".")[1] in LAYERS_ABOVE_MODEL
    ]
    assert found == []


def test_the_tree_is_a_handful_of_folders_and_the_public_modules() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert entries == [
        "__init__.py", "_adapters", "_cli", "_composition.py", "_mcp", "_model", "_pipeline",
        "_ports", "_registration", "_testing", "hookspecs.py", "py.typed", "testing.py",
    ]


#: What a front end may import of the host: the public modules, the composition root (``Host``
#: and the names it re-exports for them), and its own package. ``toolhost.testing`` is for
#: plugins' tests, not front ends.
FRONT_END_IMPORTS = ("toolhost", "toolhost.hookspecs", "toolhost._composition")


def test_the_front_ends_reach_the_host_only_through_its_public_modules_and_composition() -> None:
    # Annotations under ``if TYPE_CHECKING:`` too: the names they need are re-exported as well.
    def outside(package: str, source: str) -> list[str]:
        own = f"toolhost.{package}"
        found = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{node.lineno}: {m}" for m in modules
                      if m.split(".")[0] == "toolhost" and m not in FRONT_END_IMPORTS
                      and m != own and not m.startswith(own + ".")]
        return found

    assert outside("_mcp", "from toolhost._cli.exit_codes import ExitCode\n"
                           "import toolhost._pipeline.log\nfrom toolhost.testing import run\n"
                           "from toolhost._mcp.calls import ToolCalls\n"
                           "from toolhost import Outcome\nimport mcp\n") == [
        "1: toolhost._cli.exit_codes", "2: toolhost._pipeline.log", "3: toolhost.testing"]
    found = [f"{path.relative_to(PACKAGE)}:{where}"
             for package in ("_cli", "_mcp")
             for path in sorted((PACKAGE / package).rglob("*.py"))
             for where in outside(package, path.read_text())]
    assert found == []


def test_no_adapter_imports_another_adapters_private_names() -> None:
    # What adapters share is a public name of a shared adapter module (artifact_parts,
    # artifact_streams, artifact_rows, invocation_rows, stored_output, ...); a private name is
    # its own module's.
    def private(module: str, source: str) -> list[str]:
        found = []
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.startswith("toolhost._adapters.") and node.module != module):
                found += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                owner = ast.unparse(node.value)
                if owner.startswith("toolhost._adapters.") and owner != module:
                    found.append(f"{node.lineno}: {owner}.{node.attr}")
        return found

    assert private("toolhost._adapters.pg_artifacts",
                   "from toolhost._adapters.sqlite_artifacts import _records, MIGRATIONS\n"
                   "import toolhost._adapters.pg_invocations\n"
                   "toolhost._adapters.pg_invocations._first_line(None)\n"
                   "from toolhost._adapters.pg_artifacts import _INSERT\n") == [
        "1: toolhost._adapters.sqlite_artifacts._records",
        "3: toolhost._adapters.pg_invocations._first_line"]
    found = [f"{path.relative_to(PACKAGE)}:{where}"
             for path in sorted(ADAPTERS.glob("*.py"))
             for where in private(f"toolhost._adapters.{path.stem}", path.read_text())]
    assert found == []


def test_every_name_the_composition_root_exports_resolves() -> None:
    # Its names load lazily (the front ends' table) or are its own: one missing from both is
    # an ImportError in a front end that mypy, reading the TYPE_CHECKING block, cannot see.
    import toolhost._composition as composition

    assert [n for n in composition.__all__ if not hasattr(composition, n)] == []


def test_the_composition_roots_front_end_names_agree_in_its_three_lists() -> None:
    # Each name the front ends import from _composition is said three times, on purpose: under
    # ``if TYPE_CHECKING`` (what mypy --strict reads), in ``__all__`` (what it re-exports)
    # and in ``_FRONT_END_NAMES`` (where PEP 562's __getattr__ finds it at first use). Held
    # together here rather than made one list that one of the three could not read.
    import importlib

    import toolhost._composition as composition

    typed: set[str] = set()
    for node in ast.walk(ast.parse(COMPOSITION_ROOT.read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            typed |= {alias.asname or alias.name for sub in ast.walk(node)
                      if isinstance(sub, ast.ImportFrom) for alias in sub.names}
    lazy = set(composition._FRONT_END_NAMES)
    assert sorted(lazy - typed) == []
    assert sorted(lazy - set(composition.__all__)) == []
    assert [n for n in composition.__all__ if not hasattr(composition, n)] == []
    for name, (module, attribute) in composition._FRONT_END_NAMES.items():
        home = importlib.import_module(module)
        assert getattr(composition, name) is (home if attribute is None
                                              else getattr(home, attribute)), name


def test_test_files_are_named_by_what_they_test() -> None:
    # A file named after the review or the round that found its defects says nothing to the
    # next reader of what it covers (#28): name it by the behaviour.
    roots = [REPO / "tests", REPO / "conformance" / "tests",
             *sorted((REPO / "plugins").glob("*/tests"))]
    misnamed = sorted(str(path.relative_to(REPO)) for root in roots
                      for path in root.rglob("test_*.py")
                      if re.search(r"(^|_)(reviews?|leftovers?|round\d*)(_|$)", path.stem))
    assert misnamed == []
