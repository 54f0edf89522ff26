"""The writer thread (``toolhost_media.background``) against the host's real streaming writer:
the bytes arrive whole and in order, at most ``depth`` batches wait, and every way out but
``finish`` then commit (past the bound, a failure in the download) leaves no artifact, no
staged file and no thread behind."""

from __future__ import annotations

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
from toolhost_media.background import WRITER, BackgroundWrite


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
    with open_stream(context) as out:
        with BackgroundWrite(out, batch=100, depth=2) as writer:
            for chunk in chunks():
                writer.write(chunk)
            writer.finish()
        ref = out.commit()
    assert host.host.pipeline.artifacts.read(ref.id) == WHOLE
    assert ref.byte_count == len(WHOLE)
    assert host.host.attachments(run) == (ref,)
    assert writers() == []


def test_past_the_bound_publishes_nothing(host: Harness, run: Run, data_dir: Path) -> None:
    context = host.context(run=run)
    with pytest.raises(ArtifactTooLarge), open_stream(context, max_bytes=len(WHOLE) - 1) as out:
        with BackgroundWrite(out, batch=100, depth=2) as writer:
            for chunk in chunks():
                writer.write(chunk)
            writer.finish()
        out.commit()
    assert host.host.attachments(run) == ()
    assert left_behind(data_dir) == []
    assert writers() == []


def test_a_failure_in_the_download_aborts_and_joins(
    host: Harness, run: Run, data_dir: Path
) -> None:
    context = host.context(run=run)
    with pytest.raises(ConnectionError), open_stream(context) as out, \
            BackgroundWrite(out, batch=100, depth=2) as writer:
        for chunk in chunks():
            writer.write(chunk)
        raise ConnectionError("the provider hung up")
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
    with open_stream(context) as out:
        held = Held(out)
        with BackgroundWrite(held, batch=10, depth=2) as writer:
            # One batch held by the stalled writer, two in the queue: the fourth waits.
            for _ in range(3):
                writer.write(bytes(10))
            fourth = threading.Thread(target=writer.write, args=(bytes(10),))
            fourth.start()
            fourth.join(0.2)
            assert fourth.is_alive()
            held.release.set()
            fourth.join(5)
            assert not fourth.is_alive()
            writer.finish()
        assert held.writes == 4
        ref = out.commit()
    assert ref.byte_count == 40
    assert writers() == []


def test_a_download_that_stops_while_the_disk_is_stalled_aborts_and_joins(
    host: Harness, run: Run, data_dir: Path
) -> None:
    context = host.context(run=run)
    with pytest.raises(ConnectionError), open_stream(context) as out:
        held = Held(out)
        with BackgroundWrite(held, batch=10, depth=1) as writer:
            writer.write(bytes(10))  # taken by the writer, whose disk never answers
            writer.write(bytes(10))  # waits in the queue
            raise ConnectionError("interrupted")
    assert host.host.attachments(run) == ()
    assert left_behind(data_dir) == []
    assert writers() == []
