"""Fixtures of the journeys: the transport every journey runs over (stdio, then streamable
HTTP), and the fake outside services. The harness itself is journey_support.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .fake_services import FakeTensorScale, Receiver, one_click_receiver, tensorscale
from .journey_support import TRANSPORTS, Transport


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    """Every journey runs once over stdio and once over streamable HTTP."""
    value: Transport = request.param
    return value


@pytest.fixture
def fake_tensorscale(tmp_path: Path) -> Iterator[FakeTensorScale]:
    with tensorscale(tmp_path) as fake:
        yield fake


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with one_click_receiver(tmp_path) as r:
        yield r
