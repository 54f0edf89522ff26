"""Fixtures: the test kit's host over this plugin, a real workspace directory, and the call
helper.

Every test goes through the host's real pipeline (``toolhost.testing``'s ``toolhost_host``), so
trust is the effective, clamped trust, a rejected path has the pipeline's ToolValidationError
shape, and what is asserted is what a model would get.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from toolhost import Outcome
from toolhost.testing import Harness, Run
from workspace_support import PLUGINS, SECRET, Call


@pytest.fixture
def toolhost_plugins() -> Mapping[str, object]:
    """What the kit's ``toolhost_host`` runs: this plugin alone, not the installed set."""
    return PLUGINS


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The directory holding the root and what must never be reached from it: a secret beside
    the root, and a sibling whose name shares the root's prefix (``root-evil``)."""
    space = tmp_path / "space"
    (space / "root").mkdir(parents=True)
    (space / "secret").write_bytes(SECRET)
    (space / "root-evil").mkdir()
    (space / "root-evil" / "secret").write_bytes(SECRET)
    return space


@pytest.fixture
def root(base: Path) -> Path:
    return base / "root"


@pytest.fixture
def run(toolhost_host: Harness, root: Path) -> Iterator[Run]:
    """A run whose workspace is ``root``. The kit enables every registered tool, so
    list_files (not in the default roster) is on too."""
    r = toolhost_host.start_run(workspace=root)
    yield r
    toolhost_host.end_run(r)


@pytest.fixture
def call(toolhost_host: Harness, run: Run) -> Call:
    """``call(name, **arguments)``: one invocation through the pipeline in ``run``."""

    def invoke(name: str, /, **arguments: Any) -> Outcome:
        return toolhost_host.call(name, arguments, run=run)

    return invoke
