"""Fixtures: a real host over the plugin, a real workspace directory, and the call helper.

Every test goes through the host's pipeline (``toolhost.testing.host_for``), so trust is the
effective, clamped trust, a rejected path has the pipeline's ToolValidationError shape, and
what is asserted is what a model would get.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhost import Outcome
from toolhost._host import Host
from toolhost._runs import Run
from workspace_support import ALL_TOOLS, SECRET, Call, make_host


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    with make_host(tmp_path / "data") as h:
        yield h


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
def run(host: Host, root: Path) -> Iterator[Run]:
    """A run whose workspace is ``root``, with all three tools enabled (list_files is not in
    the default roster, so it must be named)."""
    r = host.start_run(workspace=root, enabled_tools=ALL_TOOLS)
    yield r
    host.end_run(r)


@pytest.fixture
def call(host: Host, run: Run) -> Call:
    """``call(name, **arguments)``: one invocation through the pipeline in ``run``."""

    def invoke(name: str, /, **arguments: Any) -> Outcome:
        return host.invoke_sync(name, arguments, run=run)

    return invoke
