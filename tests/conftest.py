"""Shared fixtures for the host's own tests: spec and plugin factories."""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import subprocess
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs
import pytest
import structlog
import unclosed_databases

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Reason,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolOutput,
    ToolSpec,
    Trust,
    hookimpl,
)
from toolhost._composition import Host
from toolhost._pipeline.log import configure_logging
from toolhost._testing.clocks import DEFAULT_INSTANT, FixedClock

# The suite reads no operator's toolhost.toml (~/.config/toolhost): every host, and every
# command a test runs, sees only the settings the test gives it.
os.environ["TOOLHOST_CONFIG"] = ""


@pytest.fixture(autouse=True, scope="session")
def _unclosed_databases_fail() -> Iterator[None]:
    """A SQLite connection a test leaves open fails a test on 3.11 as it does on 3.13."""
    undo = unclosed_databases.report_unclosed()
    yield
    undo()


@pytest.fixture(autouse=True)
def _opened_in(request: pytest.FixtureRequest) -> None:
    """Which test a connection was opened in, for the report (3.11: see unclosed_databases)."""
    unclosed_databases.running = request.node.nodeid


@pytest.fixture(autouse=True)
def _no_workspace_left_mounted(request: pytest.FixtureRequest) -> Iterator[None]:
    """A run a test never ended keeps its workspace's filesystem mounted (D265), as a live
    run's is meant to; under the test's own tmp_path it is detached afterwards, so nothing
    outlives the test (pytest cannot remove a directory something is mounted on)."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    root = str(request.getfixturevalue("tmp_path")) + "/"
    yield
    mounts = [line.split()[4].encode().decode("unicode_escape")
              for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(root)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


@pytest.fixture(autouse=True)
def _hosts_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every Host a test makes is closed when the test ends, passed or failed: its stores'
    connections and its temporary data directory go then, never to the garbage collector.
    A host of a wider fixture is made before this starts and is its fixture's to close."""
    made: list[Host] = []
    init = Host.__init__

    def record(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Host, "__init__", record)
    yield
    while made:
        made.pop().close()


class _Closeable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closeable)


class Closes(Protocol):
    """The ``closes`` fixture's type, for a test's signature."""

    def __call__(self, thing: C, /) -> C: ...


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """The host's log, as JSON lines at info and above, written to a string while the test
    runs (structlog's defaults back after it)."""
    out = io.StringIO()
    configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
    yield out
    structlog.reset_defaults()


@pytest.fixture
def closes() -> Iterator[Closes]:
    """``closes(thing)`` is ``thing``, closed when the test ends (passed or failed), last
    opened first closed: a store or connection a test opens is never left to the collector."""
    opened: list[_Closeable] = []

    def register(thing: C) -> C:
        opened.append(thing)
        return thing

    yield register
    while opened:
        opened.pop().close()


CLOSED_IN = {
    "type": "object",
    "properties": {"x": {"type": "string", "maxLength": 8, "default": "d"}},
    "required": [],
    "additionalProperties": False,
}
CLOSED_OUT = {
    "type": "object",
    "properties": {"echo": {"type": "string"}},
    "required": ["echo"],
    "additionalProperties": False,
}


def invocation_rows(database: Path) -> list[dict[str, Any]]:
    """Every row of a SQLite record's ``tool_invocations``, oldest first, read as a person
    would with ``sqlite3`` (the connection closed after)."""
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(
            "SELECT * FROM tool_invocations ORDER BY created_at, id")]


def make_spec(**overrides: Any) -> ToolSpec:
    fields: dict[str, Any] = dict(
        name="fx.echo",
        version="1.0.0",
        description="Echo x back.",
        input_schema=CLOSED_IN,
        output_schema=CLOSED_OUT,
        kind=Kind.CAPABILITY,
        source=Source.BUILTIN,
        target_kind=TargetKind.IN_PROCESS,
        server_id=None,
        side_effect=SideEffect.NONE,
        risk=Risk.LOW,
        idempotency=Idempotency.READ_ONLY,
        output_trust=Trust.INTERNAL_TOOL,
        required_scopes=(),
        timeout_s=2,
        maximum_output_bytes=4096,
        allow_parallel=True,
        deprecated=False,
    )
    fields.update(overrides)
    return ToolSpec(**fields)


def echo_build(services: Any) -> Callable[..., ToolOutput]:
    def echo(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

    return echo


def make_tool(spec: ToolSpec | None = None, build: Callable[..., Any] | None = echo_build,
              reasons: Sequence[Reason] = (), *, call: Callable[..., Any] | None = None) -> Tool:
    """A Tool over ``spec`` (default: fx.echo). Pass ``call=`` for a body that needs nothing
    (``build`` is then left out unless given explicitly)."""
    if call is not None and build is echo_build:
        build = None
    return Tool(spec or make_spec(), call=call, build=build, reasons=tuple(reasons))


def make_plugin(domains: Sequence[str] = ("fx",), tools: Sequence[Tool] = ()) -> object:
    """A plugin object with the two hookimpls returning exactly what it is given."""

    @hookimpl
    def toolhost_domains() -> list[Domain]:
        return [Domain(d) for d in domains]

    @hookimpl
    def toolhost_tools(settings: Any) -> list[Tool]:
        return list(tools)

    return types.SimpleNamespace(
        toolhost_domains=toolhost_domains,
        toolhost_tools=toolhost_tools,
    )


@pytest.fixture
def spec() -> Callable[..., ToolSpec]:
    return make_spec


def evolve(spec: ToolSpec, **changes: Any) -> ToolSpec:
    return attrs.evolve(spec, **changes)


def nothing_left(workspaces: Path) -> bool:
    """No run's workspace is left under ``workspaces``: only the host's own entries (its
    lock, and the empty trash and detached folders)."""
    leftovers = [p.name for p in workspaces.iterdir() if not p.name.startswith(".")]
    emptied = all(not any((workspaces / d).iterdir())
                  for d in (".trash", ".detached") if (workspaces / d).exists())
    return not leftovers and emptied


@pytest.fixture(scope="module")
def ca() -> Any:
    """A throwaway certificate authority (``trustme``) for loopback TLS servers."""
    import trustme

    return trustme.CA()


@pytest.fixture
def bundle(ca: Any, tmp_path: Path) -> Path:
    """``ca``'s certificate as a PEM file: what TOOLHOST_CA_BUNDLE names."""
    path = tmp_path / "extra-roots.pem"
    ca.cert_pem.write_to_path(str(path))
    return path
