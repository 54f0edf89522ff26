"""Fixtures: a fresh data directory for the cache (toolhost-email's own directory, as a host
would hand it), and the host fixtures of the test kit over this plugin."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from toolhost_email import plugin


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data" / "plugins" / "toolhost-email"


@pytest.fixture
def toolhost_plugins() -> Mapping[str, object]:
    return {"toolhost-email": plugin}
