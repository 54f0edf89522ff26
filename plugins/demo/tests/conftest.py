"""Fixtures from the toolhost test kit: the kit's ``toolhost_host`` runs this plugin alone.

Hard gate 15 counts rows over the host's database, so it needs to know where the stores are:
``stored_host`` is a ``Harness`` over the same plugin with its data in the test's own
directory (``data_dir``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from toolhost.testing import Harness
from toolhost_demo import plugin


@pytest.fixture
def toolhost_plugins() -> dict[str, object]:
    return {"toolhost-demo": plugin}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def stored_host(toolhost_plugins: Mapping[str, object], data_dir: Path) -> Iterator[Harness]:
    with Harness.over(toolhost_plugins, data_dir=data_dir) as harness:
        yield harness

