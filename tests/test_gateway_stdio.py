"""The gateway's stdio transport (``_adapters/mcp_stdio.py``): lines cut in linear time, a line
past the bound refused before it is whole, and the server started again after it."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolhost._adapters.mcp_stdio import LineFramer, LineTooLong
from toolhost._model.upstream import UpstreamError, UpstreamFailure, UpstreamServer

pytest.importorskip("mcp")

UPSTREAM = Path(__file__).with_name("gateway_upstream.py")


def framed(chunks: list[bytes], bound: int = 1 << 20) -> list[bytes]:
    framer = LineFramer(bound)
    return [line for chunk in chunks for line in framer.feed(chunk)]


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
       st.lists(st.integers(min_value=0, max_value=200), max_size=30))
def test_any_cutting_of_the_stream_gives_the_same_lines(lines: list[bytes],
                                                        cuts: list[int]) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in itertools.pairwise(points)]
    assert framed(chunks) == [line for line in lines if line.strip()]


def test_a_line_without_its_newline_is_held_not_given() -> None:
    framer = LineFramer(100)
    assert framer.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert framer.feed(b": 2}") == []
    assert framer.feed(b"\n\n  \n") == [b'{"b": 2}']  # blank lines are no messages


def test_a_line_past_the_bound_is_refused_before_its_newline() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"0123456789") == []  # exactly the bound is a line still
    with pytest.raises(LineTooLong, match="more than 10 bytes"):
        framer.feed(b"x")
    with pytest.raises(LineTooLong):
        LineFramer(10).feed(b"0123456789x\n")  # whole in one chunk: refused all the same


def test_a_result_past_the_bound_fails_too_large_and_the_server_comes_back(
        tmp_path: Path) -> None:
    """alpha's ``huge`` is a 50 MiB line; with a 1 MiB result bound (a 3 MiB line) the read
    stops at the bound, the call fails ``too_large`` (not ``connection_lost``), and the
    supervisor starts the server again for the next call."""
    from toolhost._adapters.mcp_upstream import McpUpstreams

    upstreams = McpUpstreams((UpstreamServer(name="alpha", command=sys.executable,
                                             args=(str(UPSTREAM), "alpha")),),
                             max_result_bytes=1 << 20)
    upstreams.start(30)
    try:
        async def huge() -> UpstreamError:
            with pytest.raises(UpstreamError) as refused:
                await upstreams.call("alpha", "huge", {}, timeout_s=60)
            return refused.value

        refused = anyio.run(huge)
        assert refused.failure is UpstreamFailure.TOO_LARGE
        assert "more than 3145728 bytes" in refused.detail

        async def echo() -> str:
            for _ in range(200):  # the supervisor's first retry is 0.5 s away
                try:
                    return (await upstreams.call("alpha", "echo", {"text": "back"},
                                                 timeout_s=10)).text
                except UpstreamError as exc:
                    assert exc.failure is UpstreamFailure.UNREACHABLE
                    await anyio.sleep(0.05)
            raise AssertionError("alpha did not come back")

        assert anyio.run(echo) == "alpha says back"
    finally:
        upstreams.close()


def test_a_50_mib_line_is_read_in_linear_time(tmp_path: Path) -> None:
    """A loose bound, for the bug it guards: the SDK's transport re-joined the whole line to
    every 64 KiB chunk, 19 s for this call on a quiet machine and past the 60 s deadline
    beside CI's other work; read once, it takes ~0.5 s."""
    from toolhost._adapters.mcp_upstream import McpUpstreams

    upstreams = McpUpstreams((UpstreamServer(name="alpha", command=sys.executable,
                                             args=(str(UPSTREAM), "alpha")),))
    upstreams.start(30)
    try:
        async def huge() -> tuple[float, int]:
            began = time.monotonic()
            result = await upstreams.call("alpha", "huge", {}, timeout_s=120)
            return time.monotonic() - began, len(result.text)

        took, size = anyio.run(huge)
        assert size == 50 * 1024 * 1024
        assert took < 8, f"{took:.1f} s for one 50 MiB line"
    finally:
        upstreams.close()
