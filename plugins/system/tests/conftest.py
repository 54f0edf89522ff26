"""Fixtures from the toolhost test kit: the kit's ``toolhost_host`` runs this plugin alone."""

from __future__ import annotations

import pytest

from toolhost_system import plugin


@pytest.fixture
def toolhost_plugins() -> dict[str, object]:
    return {"toolhost-system": plugin}
