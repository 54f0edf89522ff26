"""Fixtures: the kit's host over this plugin with calls allowed without approval, a real
workspace directory, and the call helper.

Isolation must work where these tests run: ``isolation`` fails the session loudly (never a
skip) when it does not, so a CI machine without it cannot pass by skipping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from sandbox_support import ALLOW, NAME, PLUGINS, Call
from toolhost import Outcome, Settings
from toolhost.testing import Harness, Run, remove_tree
from toolhost_sandbox.run_command import isolation_problem


@pytest.fixture(scope="session")
def isolation() -> None:
    problem = isolation_problem(Settings())
    if problem is not None:
        pytest.fail(f"no working isolation here, so the sandbox tests cannot run: {problem}",
                    pytrace=False)


@pytest.fixture
def toolhost_plugins() -> Mapping[str, object]:
    return PLUGINS


@pytest.fixture
def toolhost_settings() -> Mapping[str, str]:
    return ALLOW


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "root"
    path.mkdir()
    yield path
    # A command may leave a tree deeper than shutil.rmtree recurses, which would crash
    # pytest's own cleanup of old temporary directories in a later session.
    remove_tree(path)


@pytest.fixture
def run(toolhost_host: Harness, root: Path) -> Iterator[Run]:
    r = toolhost_host.start_run(workspace=root)
    yield r
    toolhost_host.end_run(r)


@pytest.fixture
def call(toolhost_host: Harness, run: Run, isolation: None) -> Call:
    """``call(command, timeout_s=10)``: one invocation through the pipeline in ``run``."""

    def invoke(command: str, timeout_s: int = 10, /) -> Outcome:
        return toolhost_host.call(NAME, {"command": command, "timeout_s": timeout_s}, run=run)

    return invoke
