"""The determinism scan: find every read of ambient time and every made-up identifier.

Determinism is a property of the ports (the injected Clock, ``toolhost._adapters.system_clock``), not of
each tool's good manners, so the suite refuses any module that reaches past them: a call to
``datetime.now``, ``time.time``, ``uuid.uuid4``, ``os.urandom``, anything in ``random`` or
``secrets``, and the imports that bind those names. The scan is static (``ast``): it imports
nothing, so it can run over a distribution that does not even import.

The host-wide static test and the conformance suite both call it::

    from toolhost._registration.ambient import find_ambient_reads

    find_ambient_reads([root / "host"], allowed=[root / "host/toolhost/_adapters/system_clock.py"])
    # -> ["host/toolhost/x.py:12: datetime.datetime.now()", ...]  ([] when clean)
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolhost._registration.scan_cache import ScanCache

__all__ = [
    "AMBIENT_CALLS",
    "AMBIENT_MODULES",
    "find_ambient_reads",
    "scan_source",
]

#: Qualified names that read the clock, the local zone, or entropy, whatever their arguments.
AMBIENT_CALLS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.process_time",
        "time.process_time_ns",
        "time.thread_time",
        "time.thread_time_ns",
        "time.clock_gettime",
        "time.clock_gettime_ns",
        # These three read the process's local zone even when given an instant.
        "time.localtime",
        "time.ctime",
        "time.mktime",
        "uuid.uuid1",
        "uuid.uuid4",
        "uuid.uuid6",
        "uuid.uuid7",
        "uuid.getnode",
        "os.urandom",
        "os.getrandom",
        # The event loop's clock is time.monotonic under another name.
        "asyncio.AbstractEventLoop.time",
    }
)

#: Functions that read the clock only when the instant argument is left out:
#: ``time.gmtime(secs)`` is a pure conversion, ``time.gmtime()`` is "now".
_NOW_WHEN_SHORT = {"time.gmtime": 1, "time.asctime": 1, "time.strftime": 2}

#: Modules every member of which is entropy (``random.Random(seed)`` included: a tool that
#: needs a seeded generator takes the seed from its arguments and says so in review).
AMBIENT_MODULES = frozenset({"random", "secrets"})


#: Every dotted prefix of an ambient name: a use resolves to an ambient name only through an
#: alias whose target is one of these, or lies in an ambient module.
_AMBIENT_PREFIXES = frozenset(
    name.rsplit(".", depth)[0]
    for name in (*AMBIENT_CALLS, *_NOW_WHEN_SHORT)
    for depth in range(name.count(".") + 1)
)


#: Calls that return the running event loop: ``asyncio.get_running_loop().time()`` is read as
#: ``asyncio.AbstractEventLoop.time``, and so is ``loop.time()`` on a name the same function
#: binds to one of them. A loop reached any other way is not knowable statically.
_LOOP_GETTERS = frozenset({"asyncio.get_running_loop", "asyncio.get_event_loop"})
_LOOP = "asyncio.AbstractEventLoop"

#: Calls that import a module named by a string: ``importlib.import_module("time")`` is the
#: module ``time``, ``__import__("a.b")`` the top-level ``a`` (as each returns).
_IMPORTERS = frozenset({"importlib.import_module", "__import__"})

#: Alias targets through which a use can reach an ambient name without being one's prefix.
_INDIRECT = frozenset({*_LOOP_GETTERS, "importlib", *_IMPORTERS})

#: Builtins the scan reads through, when the module does not rebind them.
_BUILTINS = {"__import__": "__import__", "getattr": "getattr"}


def _is_ambient(qualified: str) -> bool:
    if qualified in AMBIENT_CALLS or qualified in _NOW_WHEN_SHORT:
        return True
    head, _, rest = qualified.partition(".")
    return head in AMBIENT_MODULES and bool(rest)


class _Scan:
    """One module's scan: import aliases first (pass 1), then every use (pass 2)."""

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.found: list[tuple[int, int, str]] = []
        #: Names the function being walked binds to the running event loop.
        self.loops: frozenset[str] = frozenset()
        self.dynamic = False

    def run(self) -> list[tuple[int, int, str]]:
        # Aliases are collected over the whole module before any use is resolved, so a
        # function-local import is honoured wherever it sits. Scopes are not modelled: a
        # shadowing local that reuses an alias's name is rare, and erring towards a report
        # is the safe direction for this check.
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
            elif isinstance(node, ast.Name) and node.id == "__import__":
                self.dynamic = True
        # With no alias that can lead to an ambient name, the second walk could find nothing.
        if self.dynamic or any(
            target in _AMBIENT_PREFIXES or target in _INDIRECT
            or target.partition(".")[0] in AMBIENT_MODULES
            for target in self.aliases.values()
        ):
            self._uses(self.tree)
        return sorted(self.found)

    def _report(self, node: ast.AST, text: str) -> None:
        self.found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), text))

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".", 1)[0]
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases[top] = top
            if top in AMBIENT_MODULES:
                self._report(node, f"import {alias.name}")

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return  # a relative import names the distribution's own code, scanned itself
        for alias in node.names:
            if alias.name == "*":
                self._import_star(node, node.module)
                continue
            qualified = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = qualified
            if _is_ambient(qualified):
                self._report(node, f"from {node.module} import {alias.name}")

    def _import_star(self, node: ast.ImportFrom, module: str) -> None:
        """``from time import *`` binds ``time`` (and every other public name) unqualified:
        each ambient name it binds is an alias, and the import is reported if one is itself
        an ambient call."""
        bound = {name[len(module) + 1:].partition(".")[0] for name in
                 (*_AMBIENT_PREFIXES, *_INDIRECT) if name.startswith(f"{module}.")}
        for name in sorted(bound):
            self.aliases.setdefault(name, f"{module}.{name}")
        if module.split(".", 1)[0] in AMBIENT_MODULES or any(
            _is_ambient(f"{module}.{name}") for name in bound
        ):
            self._report(node, f"from {module} import *")

    def _qualified(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.loops:
                return _LOOP
            return self.aliases.get(node.id) or _BUILTINS.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            return self._returned(node)
        return None

    def _returned(self, call: ast.Call) -> str | None:
        """What a call returns, where it is a module, an attribute or the event loop the scan
        can name: ``importlib.import_module("time")``, ``getattr(time, "time")``,
        ``asyncio.get_running_loop()``."""
        callee = self._qualified(call.func)
        if callee in _LOOP_GETTERS:
            return _LOOP
        name = _constant_str(call.args[1]) if len(call.args) >= 2 else None
        if callee == "getattr" and name is not None:
            base = self._qualified(call.args[0])
            return f"{base}.{name}" if base else None
        module = _constant_str(call.args[0]) if call.args else None
        if callee in _IMPORTERS and module is not None:
            return module if callee != "__import__" else module.partition(".")[0]
        return None

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Walk a function with the names it binds to the running loop (``loop =
        asyncio.get_running_loop()``) known, within it alone."""
        outer = self.loops
        self.loops = frozenset()
        bound: set[str] = set()
        pending = list(ast.iter_child_nodes(node))
        while pending:
            statement = pending.pop()
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a nested function binds its own names
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call) and \
                    self._qualified(statement.value.func) in _LOOP_GETTERS:
                bound.update(t.id for t in statement.targets if isinstance(t, ast.Name))
            pending.extend(ast.iter_child_nodes(statement))
        self.loops = frozenset(bound)
        for child in ast.iter_child_nodes(node):
            self._uses(child)
        self.loops = outer

    def _uses(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(node)
            return
        if isinstance(node, ast.Call):
            qualified = self._qualified(node.func)
            if qualified and _is_ambient(qualified):
                short = _NOW_WHEN_SHORT.get(qualified)
                if short is None or len(node.args) < short:
                    self._report(node, f"{ast.unparse(node.func)}()")
                # The callee is reported (or exempted) as a call, never again as a reference.
                for child in (*node.args, *node.keywords):
                    self._uses(child)
                return
            # ``getattr(time, "time")`` hands the function on as a reference does.
            returned = self._returned(node)
            if returned and _is_ambient(returned):
                self._report(node, ast.unparse(node))
                return
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            # A reference that is not called still hands ambient state to someone
            # (``field(default_factory=uuid.uuid4)``).
            qualified = self._qualified(node)
            if qualified and _is_ambient(qualified):
                self._report(node, ast.unparse(node))
                return
        for child in ast.iter_child_nodes(node):
            self._uses(child)


def _constant_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def scan_source(source: str, filename: str = "<source>") -> list[str]:
    """Scan one module's source text.

    :param source: Python source code.
    :param filename: the name each finding starts with.
    :return: ``"filename:line: call"`` for every ambient read, in source order; a module
        that does not parse is one finding, ``"filename:line: cannot parse: ..."``.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [f"{filename}:{exc.lineno or 0}: cannot parse: {exc.msg}"]
    return [f"{filename}:{line}: {text}" for line, _, text in _Scan(tree).run()]


def _python_files(path: Path) -> list[tuple[Path, Path]]:
    """Each ``.py`` file under ``path``, as ``rglob("*.py")`` finds them (a symlinked directory
    is not entered, a symlinked file is kept), sorted, with its resolved path. Each directory
    is resolved once, not each file: resolving every file was most of a cached scan's time."""
    if not path.is_dir():
        return [(path, path.resolve())] if path.suffix == ".py" else []
    found: list[tuple[Path, Path]] = []
    pending = [(path, path.resolve())]
    while pending:
        directory, real = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError:  # as rglob: a directory it cannot list holds nothing
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((directory / entry.name, real / entry.name))
                elif entry.name.endswith(".py") and entry.is_file():
                    file = directory / entry.name
                    # Only a symlink's own target differs from its directory's real path.
                    found.append((file, file.resolve() if entry.is_symlink()
                                  else real / entry.name))
            except OSError:
                continue
    found.sort()
    return found


def find_ambient_reads(
    paths: Iterable[str | PathLike[str]],
    *,
    allowed: Iterable[str | PathLike[str]] = (),
    cache: ScanCache | None = None,
) -> list[str]:
    """Every ambient-time read and identifier made in these files, for a static test.

    :param paths: ``.py`` files and directories (searched recursively for ``*.py``).
    :param allowed: files or directories exempt from the check, e.g. the host's
        ``toolhost/_adapters/system_clock.py``, the one module that may read the clock.
    :return: ``"file:line: call"`` lines, e.g. ``"pkg/mod.py:12: datetime.datetime.now()"``,
        sorted by file then line; empty when the code is clean. Imports that bind an ambient
        name (``from time import time``, ``import random``) are reported as well as calls.
    :param cache: findings by content (``toolhost check`` keeps one in the data directory):
        a file whose bytes it has seen is not parsed again.
    """
    exempt = [Path(p).resolve() for p in allowed]
    seen: set[Path] = set()
    findings: list[str] = []
    for root in paths:
        for file, resolved in _python_files(Path(root)):
            if resolved in seen or any(
                resolved == e or resolved.is_relative_to(e) for e in exempt
            ):
                continue
            seen.add(resolved)
            try:
                data = file.read_bytes()
                key = cache.key(data) if cache is not None else ""
                if cache is not None and key in cache:
                    findings.extend(f"{file}:{line}" for line in cache[key])
                    continue
                source = data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                findings.append(f"{file}:0: cannot read: {exc}")
                continue
            found = scan_source(source, str(file))
            if cache is not None:
                cache[key] = [line.removeprefix(f"{file}:") for line in found]
            findings.extend(found)
    return findings
