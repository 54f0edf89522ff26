"""What an HTTP upstream's answer may bring (D313), against tests/gateway_upstream.py served
over Streamable HTTP on loopback: as an event stream (the SDK server's default) and as JSON
bodies (``--json``), with ``huge`` sized by GW_HUGE_BYTES."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from gateway_support import free_port, port_open, wait_for

from toolhost._adapters.mcp_upstream import McpUpstreams
from toolhost._model.upstream import ServerState, UpstreamError, UpstreamFailure, UpstreamServer

UPSTREAM = Path(__file__).with_name("gateway_upstream.py")
HUGE = 2 * 1024 * 1024


@contextlib.contextmanager
def http_upstream(tmp_path: Path, *, json_bodies: bool,
                  max_result_bytes: int = 64 * 1024 * 1024) -> Iterator[McpUpstreams]:
    port = free_port()
    argv = [sys.executable, str(UPSTREAM), "beta", "--http", str(port),
            *(["--json"] if json_bodies else [])]
    with (tmp_path / "beta.err").open("w") as err:
        beta = subprocess.Popen(argv, env={**os.environ, "GW_HUGE_BYTES": str(HUGE)},
                                stdout=subprocess.DEVNULL, stderr=err)
    upstreams = McpUpstreams((UpstreamServer(name="beta", url=f"http://127.0.0.1:{port}/mcp"),),
                             max_result_bytes=max_result_bytes)
    try:
        assert wait_for(lambda: port_open(port)), (tmp_path / "beta.err").read_text()
        upstreams.start(30)
        assert upstreams.status()[0].state is ServerState.CONNECTED
        yield upstreams
    finally:
        upstreams.close()
        beta.terminate()
        beta.wait(10)


def huge(upstreams: McpUpstreams) -> str | UpstreamError:
    async def main() -> str | UpstreamError:
        try:
            return (await upstreams.call("beta", "huge", {}, timeout_s=60)).text
        except UpstreamError as exc:
            return exc

    return asyncio.run(main())


@pytest.mark.parametrize("json_bodies", [False, True], ids=["events", "json"])
def test_a_result_over_1_mib_arrives_whole(tmp_path: Path, json_bodies: bool) -> None:
    """Over an event stream it failed as the server's own error: the SDK's default bound on
    one event is 1 MiB, below what the gateway accepts (64 MiB of text)."""
    with http_upstream(tmp_path, json_bodies=json_bodies) as upstreams:
        answer = huge(upstreams)
        assert isinstance(answer, str), answer
        assert len(answer) == HUGE and answer.startswith("HEAD") and answer.endswith("TAIL")


@pytest.mark.parametrize(("json_bodies", "detail"), [
    (False, "SSE stream failed: Server-sent event exceeded the 1310720 byte limit."),
    (True, "Failed to parse JSON response: a message of more than 1310720 bytes"),
], ids=["events", "json"])
def test_an_answer_past_the_bound_is_too_large_and_stops_being_read(
        tmp_path: Path, json_bodies: bool, detail: str) -> None:
    """A 128 KiB result bound is a line of 2 x 128 KiB + 1 MiB: the 2 MiB answer is refused
    as it comes (a JSON body was read whole first), and the next call is answered."""
    with http_upstream(tmp_path, json_bodies=json_bodies,
                       max_result_bytes=128 * 1024) as upstreams:
        refused = huge(upstreams)
        assert isinstance(refused, UpstreamError)
        assert (refused.failure, refused.detail) == (UpstreamFailure.TOO_LARGE, detail)

        async def echo() -> str:
            return (await upstreams.call("beta", "echo", {"text": "next"}, timeout_s=10)).text

        assert asyncio.run(echo()) == "beta says next"
