"""Fixtures of the journeys: the transport every journey runs over (stdio, streamable HTTP,
two hosts behind a balancer), and the fake outside services. The harness itself is
journey_support.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)

from .fake_services import FakeTensorScale, Receiver, one_click_receiver, tensorscale
from .journey_support import PEOPLE, TRANSPORTS, Deployment, Transport

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name


_PARAMS = [pytest.param((t, None), id=t) for t in TRANSPORTS if t != "hosts"] + [
    pytest.param(("hosts", person), id=f"hosts-{person}") for person in PEOPLE]


@pytest.fixture(params=_PARAMS)
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Transport:
    """Every journey runs over stdio, over streamable HTTP, and through two hosts on one
    PostgreSQL database and S3 bucket behind a balancer that pins nothing, once as each of
    two people (each with a token; the mail is each one's own)."""
    value: Transport
    value, person = request.param
    if value == "hosts":
        monkeypatch.setattr(Deployment, "principal", person)
        database = request.getfixturevalue("pg_database")
        s3: S3Server = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("s3_bucket")
        monkeypatch.setattr(Deployment, "shared_record",
                            {"TOOLHOST_DATABASE_URL": database, **s3.env(bucket)})
    return value


@pytest.fixture
def fake_tensorscale(tmp_path: Path) -> Iterator[FakeTensorScale]:
    with tensorscale(tmp_path) as fake:
        yield fake


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with one_click_receiver(tmp_path) as r:
        yield r
