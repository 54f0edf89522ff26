"""Cancelling ``generate.save`` (what the pipeline does at a deadline or a run's cancellation)
at each stage of the download on its thread (D321): the TLS handshake the provider never
finishes, the answer it is still working on, the body it stopped sending. Each time the
connection is shut down at once (``TensorScale.interrupt``), the download's threads end,
nothing is published, and the task ends cancelled.

``save`` alone, not through the pipeline: the pipeline stops driving a cancelled body after a
second and the client's close would then end some connections anyway. Here the body waits
for its thread as long as it takes (``STOPPING_S`` raised), so only the interrupt closes the
connection in time for the bound below."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from media_support import KEY, PNG, FakeTensorScale, no_download_left, stall, thinking
from toolhost import Secret, ToolFailure
from toolhost.testing import Harness
from toolhost_media import generate, messages
from toolhost_media.provider import ImageRequest
from toolhost_media.tensorscale import TensorScale

#: The most a cancelled download takes to stop, and its connection to be seen closed by the
#: server (loose: "at once"; without the interrupt it takes ``STOPPING_S``, raised to 60 s).
CLOSED_WITHIN_S = 10.0


class Silent:
    """A TCP server that accepts one connection and never answers (a TLS handshake that
    never ends); ``closed`` once the client's side of it is gone."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = threading.Event()
        self.closed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        connection.settimeout(0.05)
        self.accepted.set()
        with connection:
            while not self._stop.is_set():
                try:
                    if connection.recv(65536) == b"":
                        break
                except TimeoutError:
                    continue
                except OSError:
                    break
            self.closed.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


def cancelled_save(host: Harness, url: str, arm: Callable[[Callable[[], None]], None]) -> None:
    """``save`` in a task that ``arm`` is handed a way to cancel (from any thread); it must
    end cancelled, within ``CLOSED_WITHIN_S`` of the cancel (its thread stopped by the
    interrupt: waiting for it, it would take ``STOPPING_S``), with nothing published."""
    run = host.start_run()
    context = host.context(run=run, timeout_s=600)
    client = host.services("toolhost-media").http(timeout=600)
    cancelled_at: list[float] = []

    async def body() -> float:
        task = asyncio.ensure_future(generate.save(
            TensorScale(client, Secret(KEY), url), ImageRequest(prompt="x", size="1024x1024"),
            context, "image-x.png"))
        loop = asyncio.get_running_loop()

        def cancel() -> None:
            cancelled_at.append(time.monotonic())
            loop.call_soon_threadsafe(task.cancel)

        arm(cancel)
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    ended = asyncio.run(body())
    assert ended - cancelled_at[0] < CLOSED_WITHIN_S
    assert host.host.attachments(run) == ()
    no_download_left()


def later(cancel: Callable[[], None]) -> None:
    """``cancel`` a moment from now, from a thread of its own."""
    threading.Timer(0.3, cancel).start()


@pytest.fixture(autouse=True)
def waiting_as_long_as_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generate, "STOPPING_S", 60.0)


def test_cancelled_in_the_tls_handshake(host: Harness, silent: Silent) -> None:
    def arm(cancel: Callable[[], None]) -> None:
        def when_connected() -> None:
            silent.accepted.wait(CLOSED_WITHIN_S)
            later(cancel)  # the ClientHello is out: the handshake waits
        threading.Thread(target=when_connected, daemon=True).start()

    cancelled_save(host, silent.url, arm)
    assert silent.closed.wait(CLOSED_WITHIN_S)


def test_cancelled_while_the_provider_works(host: Harness, server: FakeTensorScale) -> None:
    def arm(cancel: Callable[[], None]) -> None:
        server.reply = thinking(on_request=cancel)

    cancelled_save(host, server.base_url, arm)
    assert server.client_closed.wait(CLOSED_WITHIN_S)


def test_cancelled_mid_body(host: Harness, server: FakeTensorScale) -> None:
    def arm(cancel: Callable[[], None]) -> None:
        # The headers and the first bytes, then silence: the read waits for more, and is
        # cancelled while it waits (soon after, not at once: the first bytes are read first).
        server.reply = stall(PNG[:16], "image/png", on_first=lambda: later(cancel),
                             trickle=False)

    cancelled_save(host, server.base_url, arm)


def test_an_interrupted_stream_fails_even_when_it_reads_as_ended(
    host: Harness, server: FakeTensorScale
) -> None:
    # A review's repro: an answer with no Content-Length ended with its connection, and the
    # shut-down socket read as that end (a TLS close without close_notify, which the ssl
    # module lets pass). Such an answer is now refused before its body (test_media_framing);
    # a framed one interrupted mid-body must still fail, never hand out a truncated file whole.
    first = threading.Event()
    server.reply = stall(PNG[:16], "image/png", on_first=first.set)
    got: list[bytes] = []
    ended: list[str] = []
    provider = TensorScale(host.services("toolhost-media").http(timeout=30), Secret(KEY),
                           server.base_url)

    def read() -> None:
        try:
            for chunk in provider.stream(ImageRequest(prompt="x", size="1024x1024")):
                got.append(chunk)
        except ToolFailure as failure:
            ended.append(failure.reason_code)
        else:
            ended.append("whole")

    with provider:
        reader = threading.Thread(target=read)
        reader.start()
        assert first.wait(CLOSED_WITHIN_S)
        for _ in range(int(CLOSED_WITHIN_S / 0.01)):
            if got:
                break
            threading.Event().wait(0.01)
        provider.interrupt()
        reader.join(CLOSED_WITHIN_S)
        server.release.set()
    assert ended == [messages.CONNECTION_LOST]
