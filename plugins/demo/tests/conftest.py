"""Fixtures: a real host over the plugin with its stores in the test's own data directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhost._host import Host
from toolhost.testing import host_for
from toolhost_demo import plugin


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def host(data_dir: Path) -> Iterator[Host]:
    with host_for({"toolhost-demo": plugin}, data_dir=data_dir) as h:
        yield h
