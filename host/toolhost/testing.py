"""Test helpers for plugin authors and for the host's own suite.

- ``ClockContract``: subclass it with ``make_clock`` to hold any Clock to the port's contract.
- ``find_ambient_reads``: the static determinism check (only ``toolhost.determinism`` may read
  ambient time or make identifiers), usable over any plugin's source tree.
- ``host_for``: a Host over plugin objects that are not installed, with a fixed clock.
"""

from __future__ import annotations

import ast
import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path

from toolhost.clock import Clock, FixedClock
from toolhost.host import Host
from toolhost.settings import Settings

__all__ = ["AMBIENT_CALLS", "DEFAULT_INSTANT", "ClockContract", "find_ambient_reads", "host_for"]

#: The instant the deterministic harness uses unless told otherwise.
DEFAULT_INSTANT = dt.datetime(2026, 7, 25, 13, 3, 11, 482913, tzinfo=dt.UTC)

#: Dotted calls that read ambient time or entropy (module.attr, or Class.attr for datetime).
AMBIENT_CALLS = frozenset(
    {
        "datetime.now", "datetime.utcnow", "datetime.today", "date.today",
        "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
        "datetime.date.today",
        "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns",
        "time.perf_counter", "time.perf_counter_ns", "time.localtime", "time.gmtime",
        "time.ctime", "time.asctime", "time.strftime",
        "uuid.uuid1", "uuid.uuid4", "os.urandom", "os.getrandom",
    }
)
#: Modules whose every use is ambient (random state, secrets).
AMBIENT_MODULES = frozenset({"random", "secrets"})


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _scan(path: Path) -> Iterable[str]:
    tree = ast.parse(path.read_bytes(), filename=str(path))
    # Names bound by `from time import time` and the like count as the dotted call.
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                aliases[alias.asname or alias.name] = full
                if node.module in AMBIENT_MODULES or full in AMBIENT_CALLS:
                    yield f"{path}:{node.lineno}: from {node.module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in AMBIENT_MODULES:
                    yield f"{path}:{node.lineno}: import {alias.name}"
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name is None:
                continue
            head, _, rest = name.partition(".")
            full = f"{aliases[head]}.{rest}" if head in aliases and rest else aliases.get(head, name)
            if full in AMBIENT_CALLS or name in AMBIENT_CALLS:
                yield f"{path}:{node.lineno}: {name}()"


def find_ambient_reads(
    roots: Iterable[Path | str], *, allowed: Iterable[Path | str] = ()
) -> list[str]:
    """Every ``file:line: call`` under ``roots`` that reads ambient time or makes an id.

    ``allowed`` names files exempt from the check (the host exempts its determinism module).
    """
    allowed_paths = {Path(p).resolve() for p in allowed}
    found: list[str] = []
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            if path.resolve() not in allowed_paths:
                found.extend(_scan(path))
    return found


def host_for(
    plugins: Mapping[str, object],
    *,
    clock: Clock | None = None,
    settings: Settings | None = None,
) -> Host:
    """A Host over ``{distribution: plugin}`` objects, with a FixedClock by default."""
    return Host.from_plugins(
        plugins, clock=clock if clock is not None else FixedClock(DEFAULT_INSTANT),
        settings=settings,
    )


class ClockContract:
    """The Clock port's contract suite. Subclass, name it ``Test...``, define ``make_clock``."""

    def make_clock(self) -> Clock:
        raise NotImplementedError

    def test_now_is_aware(self) -> None:
        now = self.make_clock().now()
        assert isinstance(now, dt.datetime)
        assert now.tzinfo is not None and now.utcoffset() is not None

    def test_now_is_utc(self) -> None:
        now = self.make_clock().now()
        assert now.utcoffset() == dt.timedelta(0)
        assert now.tzinfo is dt.UTC
