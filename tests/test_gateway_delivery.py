"""Whether a call to an upstream was sent, when the server is gone: a call that provably never
left (an HTTP connection that could not be made, a stdio server whose output had ended) is
``unreachable`` (retryable); one under way when the server died may have taken effect
(``connection_lost``). Against tests/gateway_upstream.py over stdio, and served over HTTP on
loopback as an event stream and as JSON bodies. No pings: the call is the first to find the
server gone, as it is between two pings."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from gateway_support import free_port, port_open, processes_with, wait_for

from toolhost._adapters import mcp_upstream
from toolhost._adapters.mcp_upstream import McpUpstreams
from toolhost._model.secrets import Secret
from toolhost._model.upstream import ServerState, UpstreamError, UpstreamFailure, UpstreamServer

UPSTREAM = Path(__file__).with_name("gateway_upstream.py")


class Beta:
    """``beta`` over HTTP, and an adapter connected to it."""

    def __init__(self, tmp_path: Path, *, json_bodies: bool) -> None:
        self.tmp_path = tmp_path
        self.log = tmp_path / "upstream.log"
        self.port = free_port()
        self.argv = [sys.executable, str(UPSTREAM), "beta", "--http", str(self.port),
                     *(["--json"] if json_bodies else [])]
        self.process = self.start()
        self.upstreams = McpUpstreams(
            (UpstreamServer(name="beta", url=f"http://127.0.0.1:{self.port}/mcp"),))

    def start(self) -> subprocess.Popen[bytes]:
        with (self.tmp_path / "beta.err").open("a") as err:
            process = subprocess.Popen(self.argv, env={**os.environ, "GW_LOG": str(self.log)},
                                       stdout=subprocess.DEVNULL, stderr=err)
        assert wait_for(lambda: port_open(self.port)), (self.tmp_path / "beta.err").read_text()
        return process

    def logged(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def call(self, tool: str) -> str | UpstreamError:
        return call(self.upstreams, "beta", tool)

    def close(self) -> None:
        self.upstreams.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@pytest.fixture(autouse=True)
def no_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_upstream, "PING_INTERVAL_S", 3600.0)


def call(upstreams: McpUpstreams, server: str, tool: str) -> str | UpstreamError:
    async def main() -> str | UpstreamError:
        try:
            return (await upstreams.call(server, tool, {"text": "t"}, timeout_s=30)).text
        except UpstreamError as exc:
            return exc

    return asyncio.run(main())


@pytest.fixture(params=[False, True], ids=["events", "json"])
def beta(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Beta]:
    server = Beta(tmp_path, json_bodies=request.param)
    try:
        server.upstreams.start(30)
        assert server.upstreams.status()[0].state is ServerState.CONNECTED
        yield server
    finally:
        server.close()


def test_a_call_to_a_stopped_http_server_was_never_sent_and_is_unreachable(beta: Beta) -> None:
    """The server stopped between two calls, before a ping noticed: the next call's POST finds
    the port closed. It failed ``connection_lost`` (may have taken effect, do not retry),
    though nothing was sent; it is ``unreachable`` (retryable), and so is the one after."""
    assert beta.call("echo") == "beta says t"
    beta.process.terminate()
    beta.process.wait(10)
    assert not port_open(beta.port)
    refused = beta.call("echo")
    assert isinstance(refused, UpstreamError), refused
    assert refused.failure is UpstreamFailure.UNREACHABLE, refused.detail
    assert refused.detail == "the connection could not be made; the call was not sent"
    again = beta.call("echo")
    assert isinstance(again, UpstreamError) and again.failure is UpstreamFailure.UNREACHABLE
    # Back on its port, it is reached again: nothing was left marked.
    beta.process = beta.start()
    assert wait_for(lambda: beta.upstreams.status()[0].state is ServerState.CONNECTED, 60)
    assert beta.call("echo") == "beta says t"
    assert beta.logged().count("beta echo called") == 2


def test_a_call_under_way_when_the_http_server_dies_is_connection_lost(beta: Beta) -> None:
    """The request was delivered (the server logged it) and the server was killed while it
    ran: whether it took effect is unknown, so it stays ``connection_lost``."""
    async def main() -> str | UpstreamError:
        call = asyncio.create_task(beta.upstreams.call("beta", "hang", {}, timeout_s=60))
        while "beta hang called" not in beta.logged():
            await asyncio.sleep(0.05)
        beta.process.kill()
        try:
            return (await call).text
        except UpstreamError as exc:
            return exc

    lost = asyncio.run(main())
    assert isinstance(lost, UpstreamError), lost
    assert lost.failure is UpstreamFailure.CONNECTION_LOST, lost.detail


def test_a_call_to_a_stdio_server_that_exited_is_refused_unsent(tmp_path: Path) -> None:
    """alpha exited between two calls: its output ended at once, but the connection counted as
    up until a ping failed, and the next call was written to the dead server and failed
    ``connection_lost``. The end of its output now ends the connection: that call is
    ``unreachable``, nothing is written, and the server is started again."""
    marker = f"gwdelivery-{tmp_path.name}"
    log = tmp_path / "upstream.log"
    upstreams = McpUpstreams((UpstreamServer(
        name="alpha", command=sys.executable, args=(str(UPSTREAM), "alpha", marker),
        env={"GW_LOG": Secret(str(log))}),))
    try:
        upstreams.start(30)
        assert call(upstreams, "alpha", "echo") == "alpha says t"
        (pid,) = processes_with(marker)
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: not processes_with(marker))
        assert wait_for(lambda: upstreams.status()[0].state is not ServerState.CONNECTED,
                        10), "the end of the server's output went unnoticed"
        refused = call(upstreams, "alpha", "echo")
        assert isinstance(refused, UpstreamError), refused
        assert refused.failure is UpstreamFailure.UNREACHABLE, refused.detail
        assert wait_for(lambda: upstreams.status()[0].state is ServerState.CONNECTED, 60)
        assert call(upstreams, "alpha", "echo") == "alpha says t"
    finally:
        upstreams.close()
    assert log.read_text().splitlines().count("alpha echo called") == 2
