"""A real S3-compatible server for the tests: moto's standalone server on a loopback port.

A test module imports the fixtures (``from s3_server import s3_bucket_fixture,
s3_server_fixture``) and asks for them by name, ``s3_server`` and ``s3_bucket``.

``s3_server`` (session-scoped) starts ``python -m moto.server -H 127.0.0.1 -p PORT`` on a free
port and waits until it answers; ``s3_bucket`` makes a fresh bucket for one test. Fault tests
``stop()`` the server (the process is killed, as a crashed or unreachable service would be)
and ``start()`` it again on the same port. moto keeps nothing across a restart, so a test that
restarts it makes its bucket again with ``create_bucket``.

Without moto installed the tests that need it are skipped with a line saying what to install,
unless ``TOOLHOST_REQUIRE_SERVERS=1`` (CI), where they fail instead: CI always runs them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from loopback_ports import free_port

__all__ = ["S3Server", "require_moto", "s3_bucket_fixture", "s3_server_fixture"]

#: How long a started server has to answer before the session gives up on it.
_START_TIMEOUT_S = 30.0
_MISSING = ("the S3 tests need moto's server and boto3: "
            "pip install 'moto[server]' boto3 (or toolhost-core[s3] plus moto[server])")
_buckets = itertools.count(1)


def require_moto() -> None:
    """Skip (or, with TOOLHOST_REQUIRE_SERVERS=1, fail) when moto's server cannot run."""
    missing = [m for m in ("moto", "boto3", "flask") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    message = f"{_MISSING} (missing: {', '.join(missing)})"
    if os.environ.get("TOOLHOST_REQUIRE_SERVERS") == "1":
        pytest.fail(f"TOOLHOST_REQUIRE_SERVERS=1 but {message}", pytrace=False)
    pytest.skip(message)


class S3Server:
    """One moto server process on ``127.0.0.1:port``, stoppable and restartable."""

    # Fixed, fake credentials: moto accepts any, and a test must never reach real AWS with
    # the developer's own.
    ACCESS_KEY = "toolhost-test-access-key"
    SECRET_KEY = "toolhost-test-secret-key"  # moto's: any will do
    REGION = "us-east-1"

    def __init__(self, port: int | None = None) -> None:
        self.port = port if port is not None else free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._client: Any = None
        self._store_client: Any = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server (again) on the same port and wait until it answers."""
        if self.running:
            return
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self._process.returncode} "
                                   f"on port {self.port}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on port {self.port} "
                           f"within {_START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        """Kill the server and wait for it: connections are refused until ``start``."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def env(self, bucket: str, prefix: str = "artifacts") -> dict[str, str]:
        """The settings a host needs to keep its artifacts in ``bucket`` under ``prefix``."""
        return {
            "TOOLHOST_ARTIFACT_STORE": f"s3://{bucket}/{prefix}",
            "TOOLHOST_S3_ENDPOINT_URL": self.endpoint_url,
            "AWS_REGION": self.REGION,
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
        }

    def client(self) -> Any:
        """A plain boto3 client on the server, for looking behind the store's back. One per
        server (a client costs about 0.1 s to build, and reconnects after a restart)."""
        if self._client is None:
            import boto3  # type: ignore[import-untyped, unused-ignore]
            from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

            self._client = boto3.client(
                "s3", endpoint_url=self.endpoint_url, region_name=self.REGION,
                aws_access_key_id=self.ACCESS_KEY, aws_secret_access_key=self.SECRET_KEY,
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
            )
        return self._client

    def store_client(self) -> Any:
        """A client configured exactly as the host configures its own (``s3_client``), built
        once: for tests that open many stores. Any bucket of this server."""
        if self._store_client is None:
            from toolhost._adapters.s3_artifacts import s3_client

            self._store_client = s3_client(self.env("any-bucket"))
        return self._store_client

    def create_bucket(self, bucket: str) -> None:
        self.client().create_bucket(Bucket=bucket)

    def new_bucket(self) -> str:
        bucket = f"toolhost-test-{next(_buckets)}"
        self.create_bucket(bucket)
        return bucket


@pytest.fixture(scope="session", name="s3_server")
def s3_server_fixture() -> Iterator[S3Server]:
    """A moto server for the whole session (about 2 s to start); skipped without moto."""
    require_moto()
    server = S3Server()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(name="s3_bucket")
def s3_bucket_fixture(s3_server: S3Server) -> str:
    """A fresh, empty bucket on a running server (a fault test may have stopped it)."""
    s3_server.start()
    return s3_server.new_bucket()
