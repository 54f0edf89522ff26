"""Fixtures: a fake TensorScale on loopback HTTPS, its CA bundle, and the test kit's host over
this plugin configured to use them (stores in the test's own data directory, so a test can
look at every file the host wrote)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import trustme

from media_support import LOOPBACK, PLUGINS, FakeTensorScale, Handler, settings
from toolhost.testing import Harness, loopback_tls_server


@pytest.fixture
def toolhost_plugins() -> Mapping[str, object]:
    return PLUGINS


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def bundle(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "extra-roots.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def server(ca: trustme.CA, tmp_path: Path) -> Iterator[FakeTensorScale]:
    with loopback_tls_server(Handler, tmp_path, names=(LOOPBACK,), ca=ca,
                             server_class=FakeTensorScale) as httpd:
        yield httpd


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def env(server: FakeTensorScale, bundle: Path) -> dict[str, str]:
    """The host's settings; a test changes them before asking for ``host``."""
    return settings(server, bundle)


@pytest.fixture
def host(env: dict[str, str], data_dir: Path) -> Iterator[Harness]:
    with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as harness:
        yield harness
