"""The writer thread (``toolhost_media.background``) against the host's real streaming writer:
the bytes arrive whole and in order, at most ``depth`` batches wait, and every way out but
``finish`` then commit (past the bound, a failure in the body, a cancellation) leaves no
artifact, no staged file and no thread behind."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

from toolhost import (
    ArtifactOrigin,
    ArtifactRef,
    ArtifactStream,
    ArtifactTooLarge,
    ToolExecutionContext,
    Trust,
)
from toolhost.testing import Harness, Run
from toolhost_media.background import BackgroundWrite

WRITER = "toolhost-media-writer"


def open_stream(context: ToolExecutionContext, max_bytes: int = 1 << 20) -> ArtifactStream:
    return context.artifacts.stream(origin=ArtifactOrigin.MODEL_OUTPUT, name="image-t.png",
                                    media_type="image/png", trust=Trust.EXTERNAL_UNTRUSTED,
                                    max_bytes=max_bytes)


def chunks() -> Iterator[bytes]:
    """2,000 bytes in chunks of 1 to 63 bytes, each byte its position mod 251."""
    position = 0
    size = 1
    while position < 2000:
        size = size % 63 + 1
        chunk = bytes((position + i) % 251 for i in range(min(size, 2000 - position)))
        position += len(chunk)
        yield chunk


WHOLE = b"".join(chunks())


def left_behind(data_dir: Path) -> list[Path]:
    """Staged uploads still on disk."""
    return [p for p in data_dir.rglob("*.upload")]


def writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER]


@pytest.fixture
def run(host: Harness) -> Run:
    return host.start_run()


def test_every_byte_arrives_in_order(host: Harness, run: Run) -> None:
    context = host.context(run=run)

    async def body() -> ArtifactRef:
        with open_stream(context) as out:
            async with BackgroundWrite(out, batch=100, depth=2) as writer:
                for chunk in chunks():
                    await writer.write(chunk)
                await writer.finish()
            return out.commit()

    ref = asyncio.run(body())
    assert host.host.pipeline.artifacts.read(ref.id) == WHOLE
    assert ref.byte_count == len(WHOLE)
    assert host.host.attachments(run) == (ref,)
    assert writers() == []


def test_past_the_bound_publishes_nothing(host: Harness, run: Run, data_dir: Path) -> None:
    context = host.context(run=run)

    async def body() -> None:
        with open_stream(context, max_bytes=len(WHOLE) - 1) as out:
            async with BackgroundWrite(out, batch=100, depth=2) as writer:
                for chunk in chunks():
                    await writer.write(chunk)
                await writer.finish()
            out.commit()

    with pytest.raises(ArtifactTooLarge):
        asyncio.run(body())
    assert host.host.attachments(run) == ()
    assert left_behind(data_dir) == []
    assert writers() == []


def test_a_failure_in_the_body_aborts_and_joins(host: Harness, run: Run, data_dir: Path) -> None:
    context = host.context(run=run)

    async def body() -> None:
        with open_stream(context) as out:
            async with BackgroundWrite(out, batch=100, depth=2) as writer:
                for chunk in chunks():
                    await writer.write(chunk)
                raise ConnectionError("the provider hung up")

    with pytest.raises(ConnectionError):
        asyncio.run(body())
    assert host.host.attachments(run) == ()
    assert left_behind(data_dir) == []
    assert writers() == []


class Held:
    """An ArtifactStream whose writes wait for ``release``: a disk that has stalled."""

    def __init__(self, out: ArtifactStream) -> None:
        self.out = out
        self.release = threading.Event()
        self.writes = 0

    def write(self, chunk: bytes) -> None:
        self.release.wait()
        self.writes += 1
        self.out.write(chunk)

    def commit(self) -> ArtifactRef:
        return self.out.commit()

    def abort(self) -> None:
        self.release.set()
        self.out.abort()

    def __enter__(self) -> Held:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.out.__exit__(exc_type, exc, tb)


def test_at_most_depth_batches_wait_for_a_stalled_disk(host: Harness, run: Run) -> None:
    context = host.context(run=run)

    async def body() -> ArtifactRef:
        with open_stream(context) as out:
            held = Held(out)
            async with BackgroundWrite(held, batch=10, depth=2) as writer:
                # Two batches in flight (one held by the stalled writer): the third waits.
                for _ in range(2):
                    await writer.write(bytes(10))
                third = asyncio.ensure_future(writer.write(bytes(10)))
                for _ in range(20):
                    await asyncio.sleep(0)
                assert not third.done()
                held.release.set()
                await third
                await writer.finish()
            assert held.writes == 3
            return out.commit()

    ref = asyncio.run(body())
    assert ref.byte_count == 30
    assert writers() == []


def test_a_cancellation_while_waiting_aborts_and_joins(
    host: Harness, run: Run, data_dir: Path
) -> None:
    context = host.context(run=run)

    async def body() -> None:
        with open_stream(context) as out:
            held = Held(out)
            async with BackgroundWrite(held, batch=10, depth=1) as writer:
                for _ in range(10):  # the 2nd batch waits for room that never comes
                    await writer.write(bytes(10))

    async def cancelled() -> None:
        task = asyncio.ensure_future(body())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    assert host.host.attachments(run) == ()
    assert left_behind(data_dir) == []
    assert writers() == []
