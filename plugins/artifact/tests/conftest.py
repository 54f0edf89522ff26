"""Fixtures: the test kit's host over this plugin, with its stores in the test's own data
directory (so a test can count the artifact store's rows and files), a real workspace
directory, and the call helper.

Every call goes through the host's real pipeline, so trust is the effective, clamped trust, a
refused path has the pipeline's validation shape, and what is asserted is what a model gets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from artifact_support import PLUGINS, SECRET, Call, Store, make_call
from toolhost.testing import Harness, Run


@pytest.fixture
def toolhost_plugins() -> Mapping[str, object]:
    """What the kit's host runs: this plugin alone, not the installed set."""
    return PLUGINS


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def host(toolhost_plugins: Mapping[str, object], data_dir: Path) -> Iterator[Harness]:
    """The kit's Harness over this plugin, its database and artifacts under ``data_dir``."""
    with Harness.over(toolhost_plugins, data_dir=data_dir) as harness:
        yield harness


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The directory holding the root and a secret beside it that must never be exported."""
    space = tmp_path / "space"
    (space / "root").mkdir(parents=True)
    (space / "secret").write_bytes(SECRET)
    return space


@pytest.fixture
def root(base: Path) -> Path:
    return base / "root"


@pytest.fixture
def run(host: Harness, root: Path) -> Iterator[Run]:
    """A run whose workspace is ``root``, every registered tool enabled."""
    r = host.start_run(workspace=root)
    yield r
    host.end_run(r)


@pytest.fixture
def call(host: Harness, run: Run) -> Call:
    """``call(arguments, version=None)``: one invocation of artifact.export in ``run``."""
    return make_call(host, run)


@pytest.fixture
def store(host: Harness, data_dir: Path) -> Store:
    """The artifact store as the tests see it: rows, files, records and verified bytes."""
    return Store(host, data_dir)
