"""A host starting against an S3 endpoint that accepts connections and never answers (a wedged
MinIO node, a half-open balancer): it stops with its one line within seconds.

Before: the start-up read of the bucket's marker went through the content client (a 60 s read
timeout, four attempts), so ``toolhost call ... --timeout 5`` said nothing for about 4 minutes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import S3Server, require_moto

from toolhost._adapters.s3_artifacts import open_s3_artifact_store
from toolhost._model.settings import StoreUnavailable
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock
from toolhost.testing import run_toolhost

#: A safety bound on the whole refusal, loose for a loaded machine (the store's own is about
#: 2 x QUICK_TIMEOUT_S); the content client's timeouts took 240 s.
BOUND_S = 30.0


class SilentServer:
    """A loopback port that accepts every connection and never answers on any, until closed."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            with contextlib.suppress(TimeoutError):
                self._held.append(self._listener.accept()[0])

    def close(self) -> None:
        """Stop accepting and close what was held: a client still waiting gets its EOF."""
        self._closed.set()
        self._thread.join(5)
        self._listener.close()
        for held in self._held:
            held.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    try:
        yield server
    finally:
        server.close()


def _env(server: SilentServer) -> dict[str, str]:
    require_moto()  # boto3, the S3 extra
    return S3Server(server.port).env("toolhost-silent")  # the tests' fake credentials


def test_opening_the_store_is_refused_within_seconds(silent: SilentServer,
                                                      tmp_path: Path) -> None:
    env = _env(silent)
    outcome: list[BaseException | None] = []

    def open_store() -> None:
        try:
            open_s3_artifact_store(env["TOOLHOST_ARTIFACT_STORE"], env, tmp_path,
                                   FixedClock(T0)).close()
            outcome.append(None)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    # On a thread of its own, so a start that still waits minutes fails the test at the bound
    # (closing the server then ends the wait) rather than holding the run.
    opening = threading.Thread(target=open_store, daemon=True)
    started = time.monotonic()
    opening.start()
    opening.join(BOUND_S)
    took = time.monotonic() - started
    assert outcome, f"the store was still opening after {took:.0f} s"
    [refused] = outcome
    assert isinstance(refused, StoreUnavailable), refused
    assert str(refused) == (
        "cannot use the artifact store s3://toolhost-silent/artifacts (GetObject: "
        "ReadTimeoutError): cannot reach it: check TOOLHOST_S3_ENDPOINT_URL (or "
        "AWS_ENDPOINT_URL), the network and the server")


def test_toolhost_call_refuses_in_one_line_within_seconds(silent: SilentServer,
                                                          tmp_path: Path) -> None:
    started = time.monotonic()
    # The child's own timeout is twice the bound: past it, the child is killed and the test
    # fails with TimeoutExpired rather than waiting the old 4 minutes.
    result = run_toolhost("call", "math.calculate", "--timeout", "5", "--args",
                          '{"expression": "1+1"}', data_dir=tmp_path / "data",
                          plugins="toolhost-math", env=_env(silent), drop=("AWS_",),
                          timeout=2 * BOUND_S)
    took = time.monotonic() - started
    assert (result.returncode, result.stdout) == (1, ""), result
    assert result.stderr == (
        "toolhost: cannot use the artifact store s3://toolhost-silent/artifacts (GetObject: "
        "ReadTimeoutError): cannot reach it: check TOOLHOST_S3_ENDPOINT_URL (or "
        "AWS_ENDPOINT_URL), the network and the server\n")
    assert took < BOUND_S, took
