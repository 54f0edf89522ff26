"""Packaging that cannot drift: every plugin's pyproject.toml has the template's shape.

The template (templates/plugin) is what a new plugin team copies; the first-party plugins and
the README's example are held to it, key for key, so a fix to one is a fix to all. The host
and the conformance suite are distributions of their own shape, checked for what they share:
the license, the listed paths, and the pin that ties the suite to this host.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import toolhost
from toolhost.testing import Harness

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "templates" / "plugin"
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
EXAMPLE = ROOT / "examples" / "toolhost-greet"
SHAPED = [*PLUGINS, EXAMPLE, TEMPLATE]
DISTRIBUTIONS = [ROOT, ROOT / "conformance", *SHAPED]

# What every shaped pyproject.toml says, word for word: the template's values.
#: Keys a plugin's pyproject may have that the template does not.
OPTIONAL_KEYS = [("project", "scripts"), ("project", "scripts", "<name>")]
SHARED = [
    ("build-system",),
    ("project", "readme"),
    ("project", "requires-python"),
    ("project", "license"),
    ("project", "license-files"),
    ("project", "classifiers"),
    ("project", "optional-dependencies"),
    ("tool", "ruff", "extend"),
    ("tool", "ruff", "src"),
    ("tool", "pytest"),
    ("tool", "mypy"),
]
CLASSIFIERS = [
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
    "Typing :: Typed",
]
# Directories no pyproject.toml of the repository lives in.
SKIPPED_DIRS = {"build", "dist", "node_modules", "__pycache__"}


def _load(project: Path) -> dict[str, Any]:
    return tomllib.loads((project / "pyproject.toml").read_text())


def _ids(projects: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) or "." for p in projects]


def _get(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = doc
    for key in path:
        value = value[key]
    return value


def _package(doc: Mapping[str, Any]) -> str:
    (package,) = doc["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    return Path(package).name


def _keys(doc: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path of the document, with the plugin's own entry point name as ``<name>``."""
    for key, value in doc.items():
        if prefix in (("project", "entry-points", "toolhost.plugins"), ("project", "scripts")):
            key = "<name>"
        path = (*prefix, key)
        yield path
        if isinstance(value, dict):
            yield from _keys(value, path)


def _pyprojects() -> Iterator[Path]:
    for directory, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        if "pyproject.toml" in files:
            yield Path(directory) / "pyproject.toml"


def _requirements(doc: Mapping[str, Any]) -> Iterator[str]:
    yield from doc.get("build-system", {}).get("requires", [])
    project = doc.get("project", {})
    yield from project.get("dependencies", [])
    for extra in project.get("optional-dependencies", {}).values():
        yield from extra
    for group in doc.get("dependency-groups", {}).values():
        yield from (r for r in group if isinstance(r, str))


def test_every_plugin_is_checked() -> None:
    assert {p.name for p in PLUGINS} >= {"demo", "math", "system", "workspace"}
    assert (TEMPLATE / "pyproject.toml").is_file()
    # The template is outside plugins/: nox makes a session for every plugins/*/pyproject.toml.
    assert TEMPLATE not in PLUGINS


@pytest.mark.parametrize("project", SHAPED, ids=_ids(SHAPED))
def test_the_template_shape(project: Path) -> None:
    doc, template = _load(project), _load(TEMPLATE)
    keys, expected = set(_keys(doc)), set(_keys(template))
    # A plugin may ship its own operator commands (toolhost-email import, toolhost-people
    # link): the one key a plugin adds beyond the template.
    keys -= set(OPTIONAL_KEYS)
    assert (keys - expected, expected - keys) == (set(), set())
    for path in SHARED:
        assert _get(doc, path) == _get(template, path), ".".join(path)
    assert template["project"]["classifiers"] == CLASSIFIERS


@pytest.mark.parametrize("project", SHAPED, ids=_ids(SHAPED))
def test_names_entry_point_and_dependencies(project: Path) -> None:
    doc = _load(project)
    package = _package(doc)
    domain = package.removeprefix("toolhost_")
    assert package == f"toolhost_{domain}"
    assert doc["project"]["name"] == f"toolhost-{domain}"
    assert doc["project"]["entry-points"]["toolhost.plugins"] == {domain: f"{package}.plugin"}
    assert doc["project"]["dependencies"][0] == "toolhost-core>=0.5"
    assert doc["tool"]["ruff"]["lint"]["isort"]["known-first-party"] == [
        "toolhost", "toolhost_conformance", package,
    ]
    assert (project / "src" / package / "plugin.py").is_file()
    # Its tests run the conformance suite on it (nox runs them; the suite's CLI is not rerun).
    suites = [p.read_text() for p in project.glob("tests/test_*conformance.py")]
    assert [s for s in suites if f'distributions = ("toolhost-{domain}",)' in s], suites


@pytest.mark.parametrize("project", DISTRIBUTIONS, ids=_ids(DISTRIBUTIONS))
def test_every_listed_path_exists_and_the_package_is_typed(project: Path) -> None:
    doc = _load(project)
    targets = doc["tool"]["hatch"]["build"]["targets"]
    listed = [*targets["wheel"]["packages"], *targets.get("sdist", {}).get("include", []),
              *doc["project"].get("license-files", []), doc["project"]["readme"]]
    missing = [p for p in listed if not (project / p.lstrip("/")).exists()]
    assert missing == []
    for package in targets["wheel"]["packages"]:
        assert (project / package / "py.typed").is_file(), package


@pytest.mark.parametrize("project", DISTRIBUTIONS, ids=_ids(DISTRIBUTIONS))
def test_every_distribution_carries_the_license(project: Path) -> None:
    project_table = _load(project)["project"]
    assert project_table["license"] == "MIT"
    assert project_table["license-files"] == ["LICENSE"]
    # A license expression and a License :: classifier together are an error under PEP 639.
    assert not [c for c in project_table.get("classifiers", []) if c.startswith("License ::")]
    # license-files may not leave the project, so each distribution has a copy of the one
    # license: the same bytes.
    assert (project / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert "Copyright (c) 2026 the toolhost developers" in (ROOT / "LICENSE").read_text()


def test_the_conformance_suite_pins_this_host() -> None:
    doc = _load(ROOT / "conformance")
    assert doc["project"]["dynamic"] == ["version"]
    (pin,) = [Requirement(r) for r in doc["project"]["dependencies"]
              if canonicalize_name(Requirement(r).name) == "toolhost-core"]
    assert str(pin.specifier) == f"=={toolhost.__version__}"


def test_nothing_depends_on_the_unrelated_pypi_toolhost() -> None:
    """``toolhost`` on PyPI is another project: the host's distribution is toolhost-core."""
    found = {path.relative_to(ROOT): _load(path.parent) for path in _pyprojects()}
    assert {ROOT / p.parent for p in found} >= set(DISTRIBUTIONS)
    bare = [(str(path), r) for path, doc in found.items() for r in _requirements(doc)
            if canonicalize_name(Requirement(r).name) == "toolhost"]
    assert bare == []


@pytest.fixture
def rendered_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The template renamed as its README says (DOMAIN -> the domain), then imported."""
    project = tmp_path / "tmpl"
    shutil.copytree(TEMPLATE, project, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    (project / "src" / "toolhost_DOMAIN").rename(project / "src" / "toolhost_tmpl")
    for path in project.rglob("*"):
        if path.is_file():
            text = path.read_text().replace("  # noqa: N999", "")  # as the README's sed does
            path.write_text(text.replace("DOMAIN", "tmpl"))
    assert "DOMAIN" not in str(sorted(project.rglob("*")))
    monkeypatch.syspath_prepend(str(project / "src"))
    yield importlib.import_module("toolhost_tmpl.plugin")
    for name in [m for m in sys.modules if m.partition(".")[0] == "toolhost_tmpl"]:
        del sys.modules[name]


def test_the_renamed_template_registers_and_runs(rendered_template: ModuleType) -> None:
    with Harness.over({"toolhost-tmpl": rendered_template}) as harness:
        assert harness.invoke("tmpl.echo", text=" hi ").structured == {"text": "hi"}
        blank = harness.invoke("tmpl.echo", text=" ")
        assert blank.failure is not None
        assert blank.failure.reason_code == "tool.invalid_arguments.blank_text"
