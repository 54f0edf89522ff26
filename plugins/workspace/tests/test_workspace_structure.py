"""Hard gate 10: the three workspace modules import no os, os.path, pathlib, shutil or glob, call
no open, and touch files only through ``context.workspace``, asserted over the import graph and
the call graph.

The check is static (an AST walk over the installed modules' source) and runs both ways: the
real modules pass it, and each way of breaking the rule, injected into a real module, fails it.
A gate that only ever sees passing code cannot tell a strict check from one that checks nothing.

What it enforces, per tool module and every first-party module it imports:

- imports: only an allow-list (``codecs``, ``hashlib``, ``json``, ``errno``, typing, exactly
  the public ``toolhost`` names the modules use, by ``from toolhost import ...``, and this
  package's own checked modules). os, os.path, pathlib, shutil and glob are named in the gate;
  io, builtins, importlib and the rest are refused by not being on the list, because each is a
  way around it. Every private host module (``toolhost._workspace`` and the rest) is refused,
  whatever name is taken from it, and so is a bare ``import toolhost`` (its attributes reach
  the private modules). ``WorkspaceHandle`` may not be named at all: a tool that builds its
  own handle chooses its own root.
- names: no ``open`` (called or not), no ``__import__``/``exec``/``eval``/``compile``/
  ``getattr``/``globals``/``vars``, no ``.open`` attribute (``codecs.open`` opens a file), and
  no dunder attribute (``context.workspace.__class__`` is the handle's class).
- the context: a tool's ``ToolExecutionContext`` parameter is used only as
  ``context.workspace`` (never another attribute, never passed whole to a helper).
- the call graph: every ``read_chunks``/``read``/``write``/``listdir``/``provenance`` call is
  made on ``context.workspace`` or on a value that came from it: a local bound to it, or a
  parameter of a module function that every call site passes it to. And the handle is used
  only through those methods (``workspace.root`` is a path the tool could open itself).
- ``WorkspaceEscape`` is never caught: no handler names it, ``Exception`` or ``BaseException``,
  and there is no bare ``except:``, so step 9 of the pipeline always sees it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import toolhost
from toolhost_workspace import list_files, read_text, write_text

TOOL_MODULES: dict[str, ModuleType] = {
    "read_text": read_text,
    "write_text": write_text,
    "list_files": list_files,
}

#: Named by hard gate 10.
GATE_MODULES = frozenset({"os", "os.path", "pathlib", "shutil", "glob"})

ALLOWED_IMPORTS = frozenset({
    "__future__", "codecs", "collections.abc", "errno", "hashlib", "json", "typing",
})
HOST = "toolhost"
#: Exactly the public names the modules take ``from toolhost``: the spec's vocabulary, the
#: outcome types, the workspace's exceptions and Provenance, the checksum helper, Reason
#: (messages) and the pipeline's hard output ceiling (read_text stops reading past it). Not
#: WorkspaceEscape or WorkspaceUnavailable (a tool never catches them: the pipeline turns
#: each into the host's failure), not the Workspace protocol (a tool is handed one), and
#: nothing private.
ALLOWED_HOST_NAMES = frozenset({
    "HARD_OUTPUT_CEILING", "Idempotency", "Provenance", "Reason", "Risk", "SideEffect",
    "ToolExecutionContext", "ToolFailure", "ToolOutput", "ToolSpec", "Trust",
    "WorkspaceIsDirectory", "WorkspaceNotDirectory", "WorkspaceNotFound", "provenance_of",
    "sha256_checksum",
})
FIRST_PARTY = "toolhost_workspace"
BANNED_NAMES = frozenset({
    "open", "__import__", "exec", "eval", "compile", "getattr", "setattr", "globals", "locals",
    "vars", "__builtins__", "breakpoint", "WorkspaceHandle",
})
BANNED_ATTRIBUTES = frozenset({"open", "fdopen", "__import__", "WorkspaceHandle"})
FILE_METHODS = frozenset({"read_chunks", "read", "write", "listdir", "provenance"})
NEVER_CAUGHT = frozenset({"WorkspaceEscape", "Exception", "BaseException"})


# ---------------------------------------------------------------------------- the checker


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _context_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters that receive the ToolExecutionContext: annotated so, or named ``context``."""
    names = set()
    for arg in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
        annotation = _dotted(arg.annotation) if arg.annotation is not None else None
        if arg.arg == "context" or (annotation or "").endswith("ToolExecutionContext"):
            names.add(arg.arg)
    return names


class _Module:
    """One module's tree, with parents, functions and the handle-bearing names per function."""

    def __init__(self, name: str, tree: ast.Module) -> None:
        self.name = name
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.functions = [
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        self.top_level = {
            n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        self.contexts: dict[ast.AST, set[str]] = {fn: _context_params(fn) for fn in self.functions}
        self.handles: dict[ast.AST, set[str]] = {fn: set() for fn in self.functions}
        self._propagate()

    def enclosing(self, node: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions around ``node``, innermost first (closures see outer names)."""
        out = []
        current = self.parent.get(node)
        while current is not None:
            if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append(current)
            current = self.parent.get(current)
        return out

    def _visible(self, node: ast.AST, table: dict[ast.AST, set[str]]) -> set[str]:
        visible: set[str] = set()
        for fn in self.enclosing(node):
            visible |= table[fn]
        return visible

    def is_context(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self._visible(node, self.contexts)

    def is_handle(self, node: ast.AST) -> bool:
        """``context.workspace``, or a name bound to a value that came from it."""
        if isinstance(node, ast.Attribute) and node.attr == "workspace":
            return self.is_context(node.value)
        return isinstance(node, ast.Name) and node.id in self._visible(node, self.handles)

    def _propagate(self) -> None:
        # A fixpoint over assignments and module-local calls: the call graph's half of the gate.
        # A helper's parameter carries the handle only when every call site passes it one.
        sites: dict[str, list[ast.Call]] = {}
        for node in ast.walk(self.tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in self.top_level):
                sites.setdefault(node.func.id, []).append(node)
        changed = True
        while changed:
            changed = False
            for node in ast.walk(self.tree):
                fns = self.enclosing(node)
                if isinstance(node, ast.Assign) and fns and self.is_handle(node.value):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and target.id not in self.handles[fns[0]]:
                            self.handles[fns[0]].add(target.id)
                            changed = True
            for name, calls in sites.items():
                callee = self.top_level[name]
                params = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
                for index, param in enumerate(params):
                    if param in self.handles[callee]:
                        continue
                    if all(self._passes_handle(call, index, param) for call in calls):
                        self.handles[callee].add(param)
                        changed = True

    def _passes_handle(self, call: ast.Call, index: int, param: str) -> bool:
        if index < len(call.args):
            return self.is_handle(call.args[index])
        return any(kw.arg == param and self.is_handle(kw.value) for kw in call.keywords)

    def where(self, node: ast.AST) -> str:
        return f"{self.name}:{getattr(node, 'lineno', '?')}"


def _import_problems(m: _Module, imported: set[str]) -> Iterator[str]:
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in GATE_MODULES or alias.name.split(".")[0] in GATE_MODULES:
                    yield f"{m.where(node)}: imports {alias.name} (hard gate 10)"
                elif alias.name.startswith(FIRST_PARTY + "."):
                    imported.add(alias.name)
                elif alias.name == HOST or alias.name.startswith(HOST + "."):
                    yield (f"{m.where(node)}: imports {alias.name}; take public names with "
                           f"`from toolhost import ...` only")
                elif alias.name not in ALLOWED_IMPORTS:
                    yield f"{m.where(node)}: imports {alias.name}, which is not on the allow-list"
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([FIRST_PARTY, module]) if module else FIRST_PARTY
            names = [a.name for a in node.names]
            if module in GATE_MODULES or module.split(".")[0] in GATE_MODULES:
                yield f"{m.where(node)}: imports from {module} (hard gate 10)"
            elif module == FIRST_PARTY or module.startswith(FIRST_PARTY + "."):
                imported.update(
                    f"{FIRST_PARTY}.{n}" if module == FIRST_PARTY else module for n in names
                )
            elif module == HOST:
                for name in sorted(set(names) - ALLOWED_HOST_NAMES):
                    yield (f"{m.where(node)}: imports {name} from toolhost, which is not on "
                           f"the allow-list of public names")
            elif module.startswith(HOST + "."):
                yield (f"{m.where(node)}: imports from {module}; a tool takes public names "
                       f"with `from toolhost import ...` only")
            elif module not in ALLOWED_IMPORTS:
                yield f"{m.where(node)}: imports from {module}, which is not on the allow-list"


def _name_problems(m: _Module) -> Iterator[str]:
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            yield f"{m.where(node)}: names {node.id}"
        elif isinstance(node, ast.Attribute) and (
                node.attr in BANNED_ATTRIBUTES
                or (node.attr.startswith("__") and node.attr.endswith("__"))):
            yield f"{m.where(node)}: names .{node.attr}"
        elif isinstance(node, ast.ExceptHandler):
            caught = node.type
            names = ([] if caught is None else
                     [_dotted(e) for e in caught.elts] if isinstance(caught, ast.Tuple) else
                     [_dotted(caught)])
            if caught is None:
                yield f"{m.where(node)}: a bare except would catch WorkspaceEscape"
            for name in names:
                if name and name.rsplit(".", 1)[-1] in NEVER_CAUGHT:
                    yield (f"{m.where(node)}: catches {name}; WorkspaceEscape must reach "
                           f"pipeline step 9 uncaught")


def _context_problems(m: _Module) -> Iterator[str]:
    for node in ast.walk(m.tree):
        if m.is_context(node):
            parent = m.parent.get(node)
            assert isinstance(node, ast.Name)
            if isinstance(node.ctx, ast.Del):
                continue  # `del context`: the tool declares it needs nothing from it
            if isinstance(parent, ast.Attribute) and parent.value is node:
                if parent.attr != "workspace":
                    yield (f"{m.where(node)}: touches context.{parent.attr}; a workspace tool "
                           f"reaches files only through context.workspace")
            else:
                yield (f"{m.where(node)}: uses the context other than as context.workspace "
                       f"(passed or aliased whole)")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in FILE_METHODS and not m.is_handle(node.func.value)):
            yield (f"{m.where(node)}: calls .{node.func.attr}() on something that is not "
                   f"context.workspace")
        if (isinstance(node, ast.Attribute) and node.attr not in FILE_METHODS
                and m.is_handle(node.value)):
            yield (f"{m.where(node)}: takes .{node.attr} from the workspace; a tool uses "
                   f"only its {', '.join(sorted(FILE_METHODS))}")
        elif m.is_handle(node) and not _handle_use_is_tracked(m, node):
            yield (f"{m.where(node)}: hands the workspace to something the gate cannot follow; "
                   f"call its methods, bind it to a local, or pass it to a module function")


def _handle_use_is_tracked(m: _Module, node: ast.AST) -> bool:
    """Whether a handle-bearing expression is used in a way the call graph follows: a method
    taken from it, a plain name bound to it, an argument to one of this module's functions."""
    parent = m.parent.get(node)
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return True  # the name being bound
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return True  # the attribute rule above checks which one
    if isinstance(parent, ast.Assign) and parent.value is node:
        return all(isinstance(t, ast.Name) for t in parent.targets)
    if isinstance(parent, ast.keyword):
        parent = m.parent.get(parent)
    return (isinstance(parent, ast.Call) and parent.func is not node
            and isinstance(parent.func, ast.Name) and parent.func.id in m.top_level)


def boundary_problems(modules: dict[str, str]) -> list[str]:
    """Problems in ``{module name: source}`` and in every first-party module they import."""
    problems: list[str] = []
    seen: set[str] = set()
    queue = list(modules.items())
    while queue:
        name, source = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        m = _Module(name, ast.parse(source))
        imported: set[str] = set()
        problems += _import_problems(m, imported)
        problems += _name_problems(m)
        problems += _context_problems(m)
        for dep in sorted(imported - seen):
            try:
                module = importlib.import_module(dep)
            except ImportError:
                problems.append(f"{name}: imports {dep}, which does not exist")
                continue
            if dep in {f"{FIRST_PARTY}.{t}" for t in TOOL_MODULES} or not hasattr(
                    module, "__file__"):
                continue
            queue.append((dep, Path(inspect.getsourcefile(module) or "").read_text()))
    return problems


def sources() -> dict[str, str]:
    return {
        f"{FIRST_PARTY}.{short}": Path(inspect.getsourcefile(module) or "").read_text()
        for short, module in TOOL_MODULES.items()
    }


# ---------------------------------------------------------------------------- the gate


def test_the_three_tool_modules_pass() -> None:
    assert boundary_problems(sources()) == []


def test_the_host_names_allowed_are_public_and_all_used() -> None:
    # The allow-list is the public API and no wider than what the modules take from it.
    assert set(toolhost.__all__) >= ALLOWED_HOST_NAMES
    used: set[str] = set()
    modules = [*TOOL_MODULES.values(), *(importlib.import_module(f"{FIRST_PARTY}.{m}")
                                         for m in ("messages", "specs"))]
    for module in modules:
        tree = ast.parse(Path(inspect.getsourcefile(module) or "").read_text())
        used |= {a.name for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module == HOST for a in n.names}
    assert used == ALLOWED_HOST_NAMES


def test_the_walk_follows_first_party_imports() -> None:
    # messages and specs are reached through the import graph and held to the same rules.
    module = _Module("m", ast.parse(sources()[f"{FIRST_PARTY}.read_text"]))
    imported: set[str] = set()
    assert list(_import_problems(module, imported)) == []
    assert imported == {f"{FIRST_PARTY}.messages", f"{FIRST_PARTY}.specs"}


def test_each_tool_touches_its_handle_through_the_context() -> None:
    # The call-graph half is not vacuous: each body really does reach the handle this way.
    for short in TOOL_MODULES:
        m = _Module(short, ast.parse(sources()[f"{FIRST_PARTY}.{short}"]))
        calls = [n for n in ast.walk(m.tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr in FILE_METHODS]
        assert calls and all(m.is_handle(c.func.value) for c in calls), short  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------- the gate bites

MODULE_LEVEL = [
    "import os",
    "import os.path",
    "from os import path",
    "from os.path import join",
    "import pathlib",
    "from pathlib import Path",
    "import shutil",
    "import glob",
    "from glob import glob as g",
    "import io",
    "import builtins",
    "import importlib",
    "import tempfile",
    "import subprocess",
    "from toolhost_workspace import nowhere",
    # The host: a private module, whatever is taken from it, even a name that is public...
    "from toolhost._workspace import WorkspaceHandle",
    "from toolhost._workspace import Provenance",
    "from toolhost._model.digest import sha256_checksum",
    "from toolhost._workspace import WorkspaceEscape",
    "import toolhost._workspace",
    "import toolhost._workspace as ws",
    "from toolhost import _workspace",
    "import toolhost",
    "import toolhost as th",
    "from toolhost.testing import Harness",
    "from toolhost.hookspecs import hookimpl",
    # ...and public names that are not on the list: the handle's exception, its protocol,
    # and names the host does not export at all.
    "from toolhost import WorkspaceEscape",
    "from toolhost import Workspace",
    "from toolhost import WorkspaceHandle",
    "from toolhost import Provenance, WorkspaceHandle",
    "from toolhost import *",
]

IN_THE_BODY = [
    "open(path)",
    "handle = open",
    "codecs.open(path)",
    "__import__('os')",
    "getattr(context, 'artifacts')",
    "context.artifacts.write(origin=None, name='x', media_type='t', content=b'', trust=None)",
    "context.run_id",
    "helper = context",
    "_sneak(context)",
    "other = object(); other.read_chunks(path)",
    "path.write('x')",
    "WorkspaceHandle(path)",
    "handle = toolhost.WorkspaceHandle",
    "root = context.workspace.root",
    "alias = context.workspace\nalias.root / path",
    "kind = type(context.workspace)",
    "kind = context.workspace.__class__",
    "context.workspace._root_fd",
    "try:\n    pass\nexcept Exception:\n    pass",
    "try:\n    pass\nexcept:\n    pass",
    "try:\n    pass\nexcept (KeyError, WorkspaceEscape):\n    pass",
]


def _inject(source: str, tool: str, snippet: str, *, module_level: bool) -> str:
    tree = ast.parse(source)
    extra = ast.parse(snippet).body
    if module_level:
        tree.body[1:1] = extra
    else:
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == tool)
        fn.body[1:1] = extra
    return ast.unparse(ast.fix_missing_locations(tree))


@pytest.mark.parametrize("tool", sorted(TOOL_MODULES))
@pytest.mark.parametrize("snippet", MODULE_LEVEL)
def test_a_forbidden_import_fails_the_gate(tool: str, snippet: str) -> None:
    mutated = dict(sources())
    key = f"{FIRST_PARTY}.{tool}"
    mutated[key] = _inject(mutated[key], tool, snippet, module_level=True)
    assert boundary_problems(mutated) != []


@pytest.mark.parametrize("tool", sorted(TOOL_MODULES))
@pytest.mark.parametrize("snippet", IN_THE_BODY)
def test_a_forbidden_touch_fails_the_gate(tool: str, snippet: str) -> None:
    mutated = dict(sources())
    key = f"{FIRST_PARTY}.{tool}"
    mutated[key] = _inject(mutated[key], tool, snippet, module_level=False)
    assert boundary_problems(mutated) != []


def test_a_helper_may_use_the_handle_only_when_every_caller_passes_it() -> None:
    ok = (
        "from toolhost import ToolExecutionContext\n"
        "def _read(workspace, path):\n"
        "    return workspace.read(path)\n"
        "def tool(arguments, context: ToolExecutionContext):\n"
        "    handle = context.workspace\n"
        "    return _read(handle, arguments['path'])\n"
    )
    assert boundary_problems({"m": ok}) == []
    # A second caller hands _read something else: the read inside _read is no longer through
    # the context, whichever caller reached it.
    sneaky = ok + "def elsewhere(thing):\n    return _read(thing, 'x')\n"
    assert boundary_problems({"m": sneaky}) == ["m:3: calls .read() on something that is not "
                                                "context.workspace"]
