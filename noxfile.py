"""Sessions: one per plugin (host + that plugin alone, its tests and conformance), the host's
tests, the conformance suite's own tests, the documented example plugin, lint, typing, and
the demo.

Plugins are discovered from plugins/*/pyproject.toml, so a new plugin gets its session by
existing. Every session builds a fresh virtualenv and installs real distributions, the way an
operator or a plugin team's CI would.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100"]

nox.options.sessions = ["lint", "typing", "host", "conformance", "plugin", "example"]
nox.options.error_on_missing_interpreters = True
# uv builds a virtualenv and installs into it about ten times faster than pip; where uv is not
# installed, nox falls back to virtualenv and pip.
nox.options.default_venv_backend = "uv|virtualenv"


def _dist_name(project: Path) -> str:
    return tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"]


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session
def typing(session: nox.Session) -> None:
    """mypy --strict over the host, the conformance suite, every plugin and the example."""
    example = ROOT / "examples" / "toolhost-greet"
    session.install("mypy", *TEST_DEPS, "trustme", ".[mcp]", "./conformance",
                    *map(str, PLUGINS), str(example))
    session.run("mypy", "--strict", "host/toolhost")
    for project in [ROOT / "conformance", *PLUGINS, example]:
        session.run("mypy", "--strict", str(project.relative_to(ROOT) / "src"))


@nox.session
def host(session: nox.Session) -> None:
    """The host's own tests, with every first-party plugin installed beside it."""
    session.install(*TEST_DEPS, "hatchling", "pip", "trustme", ".[mcp]", "./conformance",
                    *map(str, PLUGINS))
    session.run("pytest", "tests", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite's own tests (its negative fixtures), with no plugin installed."""
    session.install(*TEST_DEPS, ".", "./conformance")
    session.run("pytest", "conformance/tests", *session.posargs)


@nox.session
@nox.parametrize("name", [p.name for p in PLUGINS], ids=[p.name for p in PLUGINS])
def plugin(session: nox.Session, name: str) -> None:
    """One plugin alone: the host, this plugin and the suite; its tests, then conformance."""
    project = ROOT / "plugins" / name
    session.install(*TEST_DEPS, ".", "./conformance", str(project))
    session.run("pytest", str(project / "tests"), *session.posargs)
    session.run("toolhost-conformance", _dist_name(project))


@nox.session
def example(session: nox.Session) -> None:
    """The README's "Writing a plugin" example, exactly as a third-party team would run it."""
    project = ROOT / "examples" / "toolhost-greet"
    session.install(*TEST_DEPS, ".", "./conformance", str(project))
    session.run("pytest", str(project / "tests"), *session.posargs)
    session.run("toolhost-conformance", _dist_name(project))


@nox.session
def demo(session: nox.Session) -> None:
    """The Milestone 1 run: "What is 17 multiplied by 23?" → math.calculate → 391."""
    session.install(".", "./plugins/math", "./plugins/system")
    session.run("toolhost", "demo")
