"""Shared helpers: the fixture plugins on sys.path, and a pytester suite-file writer."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

import toolhost_conformance.suite  # noqa: F401
from toolhost.testing import Harness

# Imported here, before any pytester run: pytester restores sys.modules after each in-process
# run, so anything first imported inside one is imported again by the next: its classes stop
# matching (step 9 then misses a WorkspaceEscape) and it is most of a run's cost. One run of
# an empty host, through the public kit, imports what a property run does.
with Harness.over({}) as _warm:
    _warm.end_run(_warm.start_run())

pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The fixture plugins are plain modules (never installed); the suite takes them through its
# ``plugins`` attribute, exactly as a plugin team's own test fixtures would be.
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))


def write_suite(
    pytester: pytest.Pytester,
    plugins: Mapping[str, str],
    body: str = "",
    name: str = "test_subject",
) -> Path:
    """A test module subclassing ConformanceSuite over ``{distribution: fixture module}``."""
    imports = "\n".join(f"import {module}" for module in sorted(set(plugins.values())))
    mapping = ", ".join(f"{dist!r}: {module}" for dist, module in plugins.items())
    source = (
        "from toolhost_conformance import ConformanceSuite\n"
        f"{imports}\n\n\n"
        "class TestConformance(ConformanceSuite):\n"
        f"    plugins = {{{mapping}}}\n"
        f"{textwrap.indent(textwrap.dedent(body), '    ')}\n"
    )
    pytester.syspathinsert(FIXTURES)
    return pytester.makepyfile(**{name: source})


def failed_ids(result: pytest.RunResult) -> set[str]:
    """The ids of the tests that failed in a pytester run (``test_x[case]``)."""
    return {r.nodeid.split("::")[-1] for r in result.reprec.getfailures()}  # type: ignore[attr-defined]


def install_fake_plugin(site: Path, dist: str, module: str, source: str) -> None:
    """Install ``module.py`` as distribution ``dist`` the way pip lays it out: a dist-info
    directory with METADATA, entry_points.txt and a RECORD, on a path entry."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[toolhost.plugins]\n{module} = {module}\n")
    (info / "RECORD").write_text(f"{module}.py,,\n{info.name}/METADATA,,\n")


#: A self-contained conforming plugin, for installing as a fake distribution.
INSTALLABLE_GOOD = '''
from toolhost import (
    Domain, Idempotency, Kind, Reason, Risk, SideEffect, Source, TargetKind, Tool, ToolFailure,
    ToolOutput, ToolSpec, Trust, hookimpl,
)

BLANK = Reason("tool.invalid_arguments.blank_name", "The name is blank. Provide a name.")
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 64}},
    "required": ["name"],
    "additionalProperties": False,
}
OUT = {
    "type": "object",
    "properties": {"greeting": {"type": "string"}},
    "required": ["greeting"],
    "additionalProperties": False,
}
SPEC = ToolSpec(
    name="hello.greet", version="1.0.0", description="Greet someone.", input_schema=SCHEMA,
    output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.NONE,
    risk=Risk.LOW, idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=2, maximum_output_bytes=4096, allow_parallel=True,
    deprecated=False,
)


def greet(arguments, context):
    name = arguments["name"].strip()
    if not name:
        raise ToolFailure(BLANK.code)
    return ToolOutput(structured={"greeting": "Hello, " + name}, content="Hello, " + name)


@hookimpl
def toolhost_domains():
    return [Domain("hello")]


@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=greet, reasons=(BLANK,))]
'''

#: A plugin refused at step 2 (it declares the reserved domain mcp).
INSTALLABLE_MCP = '''
from toolhost import Domain, hookimpl


@hookimpl
def toolhost_domains():
    return [Domain("mcp")]
'''
