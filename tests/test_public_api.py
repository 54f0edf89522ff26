"""The public surface is the contract (plugin API 1.0).

``toolhost.__all__`` and ``toolhost.testing.__all__`` are pinned here name by name, so a name
appears in or leaves the API only by a change to this file (and the CHANGELOG). Every
first-party plugin, the example plugin and the conformance suite (a distribution every plugin
team runs in its CI, so a host refactor must not break it) import nothing from ``toolhost``
but those names: a walk over their sources, tests included, checks it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import toolhost
import toolhost.testing

ROOT = Path(__file__).resolve().parent.parent

TOOLHOST_ALL = [
    "HARD_OUTPUT_CEILING",
    "MAX_ATTACHED_BYTES",
    "MAX_FILE_NAME_BYTES",
    "ArtifactOrigin",
    "ArtifactReader",
    "ArtifactRef",
    "ArtifactStream",
    "ArtifactTooLarge",
    "ArtifactUnavailable",
    "ArtifactWriter",
    "Cancellation",
    "Clock",
    "Doc",
    "Domain",
    "FailureInfo",
    "Idempotency",
    "Kind",
    "ListedEntry",
    "Listing",
    "MaxLen",
    "MediaType",
    "MinLen",
    "Outcome",
    "OutcomeStatus",
    "Pattern",
    "Principal",
    "ProgressLine",
    "Provenance",
    "ProvenancedChunks",
    "Range",
    "Reason",
    "Risk",
    "SandboxWorkspace",
    "SchemaRule",
    "Secret",
    "Services",
    "SettingSpec",
    "Settings",
    "SideEffect",
    "Source",
    "TargetKind",
    "Tool",
    "ToolCallable",
    "ToolExecutionContext",
    "ToolFailure",
    "ToolFailureKind",
    "ToolOutput",
    "ToolSpec",
    "ToolValidationError",
    "Trust",
    "UserWords",
    "Workspace",
    "WorkspaceEscape",
    "WorkspaceIsDirectory",
    "WorkspaceNotDirectory",
    "WorkspaceNotFound",
    "WorkspaceUnavailable",
    "WorkspaceUsage",
    "WriteResult",
    "escaped",
    "file_name_problem",
    "hookimpl",
    "make_private_dirs",
    "media_type_for",
    "not_utf8",
    "provenance_of",
    "sha256_checksum",
    "stoppable",
    "tool",
]

TESTING_ALL = [
    "DEFAULT_INSTANT",
    "ArtifactStoreContract",
    "CancellationEvent",
    "ClockContract",
    "ClockExhausted",
    "Contribution",
    "FixedClock",
    "ForwardingWorkspace",
    "Harness",
    "Host",
    "InvocationState",
    "InvocationStoreContract",
    "LoopbackTLSServer",
    "PluginError",
    "PluginSource",
    "Registered",
    "RegistrationProblem",
    "RegistrationRefused",
    "RegistrationStep",
    "Run",
    "RunOutcome",
    "ScriptedClock",
    "StartTLSServer",
    "SwappingWorkspace",
    "WatchedChunks",
    "contributions_of",
    "file_size_limit",
    "find_ambient_reads",
    "host_for",
    "load_plugins",
    "loopback_tls_server",
    "open_file_limit",
    "registration_problems",
    "remove_tree",
    "run_on_a_terminal",
    "run_toolhost",
    "toolhost_command",
    "toolhost_host",
    "toolhost_plugins",
    "toolhost_settings",
    "toolhost_tls_server",
]

PUBLIC_MODULES = {"toolhost", "toolhost.testing", "toolhost.hookspecs"}


def test_toolhost_all_is_pinned() -> None:
    assert toolhost.__all__ == TOOLHOST_ALL
    for name in toolhost.__all__:
        assert hasattr(toolhost, name), name


def test_toolhost_testing_all_is_pinned() -> None:
    assert toolhost.testing.__all__ == TESTING_ALL
    for name in toolhost.testing.__all__:
        assert hasattr(toolhost.testing, name), name


def test_every_public_module_of_the_host_is_named_here() -> None:
    # A new module without an underscore would be public by accident.
    package = ROOT / "host" / "toolhost"
    public = {
        f"toolhost.{p.stem}" for p in package.iterdir()
        if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert public | {"toolhost"} == PUBLIC_MODULES


def _label(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _violations(path: Path) -> list[str]:
    found = []
    where = _label(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = node.module
            if module.split(".")[0] != "toolhost":
                continue
            if module not in PUBLIC_MODULES:
                found.append(f"{where}:{node.lineno}: from {module} import")
                continue
            allowed = set(toolhost.__all__ if module == "toolhost" else
                          toolhost.testing.__all__ if module == "toolhost.testing" else
                          ["hookimpl", "hookspec", "PROJECT_NAME"])
            for alias in node.names:
                if alias.name not in allowed:
                    found.append(f"{where}:{node.lineno}: {module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "toolhost" and alias.name not in PUBLIC_MODULES:
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
            # A dunder (__version__, __file__) is the module's, not a private host name.
            node.value.id == "toolhost" and node.attr.startswith("_")
            and not (node.attr.startswith("__") and node.attr.endswith("__"))
        ):
            found.append(f"{where}:{node.lineno}: toolhost.{node.attr}")
    return found


def _sources() -> list[Path]:
    trees = [*sorted((ROOT / "plugins").glob("*/")), ROOT / "examples" / "toolhost-greet",
             ROOT / "conformance"]
    return [p for tree in trees for p in sorted(tree.rglob("*.py"))]


def test_the_walk_finds_the_first_party_plugins() -> None:
    names = {p.relative_to(ROOT).parts[1] for p in _sources()}
    assert {"math", "system", "workspace", "demo", "toolhost-greet"} <= names


def test_the_walk_finds_the_conformance_suite_and_its_tests() -> None:
    walked = {p.relative_to(ROOT).as_posix() for p in _sources()}
    assert {"conformance/src/toolhost_conformance/suite.py",
            "conformance/src/toolhost_conformance/_subject.py",
            "conformance/tests/conftest.py"} <= walked


def test_the_walk_would_see_the_suites_former_private_imports(tmp_path: Path) -> None:
    # What conformance/src imported before toolhost.testing had the registration kit: the
    # composition root (also under TYPE_CHECKING, which the walk does not skip), discovery and
    # the refusals.
    bad = tmp_path / "former_subject.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\n"
        "from toolhost._composition import Host\n"
        "from toolhost._registration.discovery import PluginSource, load_distributions\n"
        "from toolhost._registration.refusals import RegistrationProblem, Step\n"
        "if TYPE_CHECKING:\n"
        "    from toolhost._registration.refusals import Registered\n"
    )
    assert [v.split(": ", 1)[1] for v in _violations(bad)] == [
        "from toolhost._composition import",
        "from toolhost._registration.discovery import",
        "from toolhost._registration.refusals import",
        "from toolhost._registration.refusals import",
    ]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_import_only_public_names(path: Path) -> None:
    assert _violations(path) == []


def test_the_walk_would_see_a_private_import(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("from toolhost._pipeline.pipeline import Pipeline\nfrom toolhost import Host\n"
                   "import toolhost._composition\nfrom toolhost.testing import _source\n")
    assert len(_violations(bad)) == 4


def test_the_walk_tells_a_private_attribute_from_a_dunder(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import toolhost\nx = toolhost._composition.Host\ny = toolhost.__file__\n")
    assert [v.split(": ", 1)[1] for v in _violations(probe)] == ["toolhost._composition"]
