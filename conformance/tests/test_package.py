"""The distribution's public surface: names, entry points, and what loading it costs."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import toolhost_conformance
from toolhost_conformance import CHECKS, ConformanceSuite


def test_public_names() -> None:
    assert toolhost_conformance.__all__ == [
        "CHECKS",
        "ConformanceSuite",
        "KnownFailureError",
        "UnsupportedSchema",
        "distribution_files",
        "find_ambient_reads",
        "from_schema",
    ]
    for name in toolhost_conformance.__all__:
        assert getattr(toolhost_conformance, name) is not None


def test_every_check_is_a_test_method() -> None:
    assert set(CHECKS) == {
        "registration",
        "tools_registered",
        "reasons",
        "messages_static",
        "schemas_closed",
        "parallel_only_read_only",
        "forced_trust",
        "references_resolve",
        "property_run",
        "no_ambient_reads",
    }
    for check in CHECKS:
        assert callable(getattr(ConformanceSuite, f"test_{check}"))


def test_the_suite_class_is_not_collected_itself() -> None:
    # Importing it into a test module must not run an empty suite: pytest collects Test*.
    assert not ConformanceSuite.__name__.startswith("Test")
    assert "__init__" not in vars(ConformanceSuite)


def test_entry_points() -> None:
    dist = metadata.distribution("toolhost-conformance")
    points = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert points[("pytest11", "toolhost_conformance")] == "toolhost_conformance.pytest_plugin"
    assert points[("console_scripts", "toolhost-conformance")] == "toolhost_conformance.cli:main"


def test_typed() -> None:
    assert (Path(toolhost_conformance.__file__).parent / "py.typed").is_file()


def test_the_pytest_plugin_loads_no_suite() -> None:
    # Every pytest run in an environment with the suite installed loads the plugin.
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys, toolhost_conformance.pytest_plugin\n"
         "print([m for m in ('toolhost_conformance.suite', 'hypothesis', 'toolhost._composition')"
         " if m in sys.modules])"],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip() == "[]"
