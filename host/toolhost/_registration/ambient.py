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
        # With no alias that can lead to an ambient name, the second walk could find nothing.
        if any(target in _AMBIENT_PREFIXES or target.partition(".")[0] in AMBIENT_MODULES
               for target in self.aliases.values()):
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
                if node.module.split(".", 1)[0] in AMBIENT_MODULES:
                    self._report(node, f"from {node.module} import *")
                continue
            qualified = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = qualified
            if _is_ambient(qualified):
                self._report(node, f"from {node.module} import {alias.name}")

    def _qualified(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _uses(self, node: ast.AST) -> None:
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
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            # A reference that is not called still hands ambient state to someone
            # (``field(default_factory=uuid.uuid4)``).
            qualified = self._qualified(node)
            if qualified and _is_ambient(qualified):
                self._report(node, ast.unparse(node))
                return
        for child in ast.iter_child_nodes(node):
            self._uses(child)


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
