"""Fixtures from the toolhost test kit (``toolhost.testing``, a pytest plugin the host installs).

``toolhost_plugins`` tells the kit's ``toolhost_host`` fixture which plugins to run: this one
alone, not whatever else is installed. A test that takes ``toolhost_host: Harness`` calls the
tools through the host's real pipeline.
"""

from __future__ import annotations

import pytest

from toolhost_DOMAIN import plugin


@pytest.fixture
def toolhost_plugins() -> dict[str, object]:
    return {"toolhost-DOMAIN": plugin}
