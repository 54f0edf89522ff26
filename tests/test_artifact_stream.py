"""Streamed uploads on the SQLite ArtifactStore: how staging looks on disk and what it leaves.

The port's semantics (publish on commit, nothing on abort, the identity rule) are in the
contract suite (``toolhost._testing.artifact_store_contract``); this module covers what only this backend can
show: the staging file, its removal on every path that does not publish, the rename to the
content address, repair of a damaged content file, and that content is never held whole.
Real SQLite files and real content files in tmp_path throughout; no mocks.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhost._adapters.file_artifacts import FileArtifactUpload as SQLiteArtifactUpload
from toolhost._adapters.file_artifacts import FileStoreUnavailable
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model.artifacts import (
    ArtifactError,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactTooLarge,
    NewArtifact,
)
from toolhost._model.spec import Trust
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock

SECOND = dt.timedelta(seconds=1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(tmp_path, FixedClock(T0))
    yield s
    s.close()


def begin(store: SQLiteArtifactStore, *, max_bytes: int = 64 * 1024 * 1024,
          **overrides: Any) -> SQLiteArtifactUpload:
    fields: dict[str, Any] = dict(
        run_id="run-1",
        origin=ArtifactOrigin.MODEL_OUTPUT,
        name="image.png",
        media_type="image/png",
        trust=Trust.EXTERNAL_UNTRUSTED,
        principal_id="alice",
    )
    fields.update(overrides)
    upload = store.begin(NewArtifact(**fields), max_bytes=max_bytes)
    assert isinstance(upload, SQLiteArtifactUpload)  # the file content's upload
    return upload


def row_count(store: SQLiteArtifactStore) -> int:
    return int(store._conn.execute("SELECT count(*) FROM artifacts").fetchone()[0])


def content_files(store: SQLiteArtifactStore) -> list[Path]:
    """Every file under the content root, staging files included."""
    return sorted(p for p in store.root.rglob("*") if p.is_file())


def staged(store: SQLiteArtifactStore) -> list[Path]:
    return [p for p in content_files(store) if p.name.endswith(".upload")]


def blob_path(store: SQLiteArtifactStore, checksum: str) -> Path:
    hexdigest = checksum.removeprefix("sha256:")
    return store.root / "sha256" / hexdigest[:2] / hexdigest[2:]


def checksum_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------
# Staging and publishing
# --------------------------------------------------------------------------------------------


def test_bytes_are_staged_beside_the_shards_until_commit(store: SQLiteArtifactStore) -> None:
    upload = begin(store)
    (staging,) = staged(store)  # created at begin, so a bad disk fails before any bytes flow
    # Beside the shards, under a name no content address can have (those are hex only).
    assert staging.parent == store.root / "sha256"
    assert staging.name.startswith(".")
    upload.write(b"first ")
    upload.write(b"second")
    assert content_files(store) == [staging]
    assert row_count(store) == 0
    record = upload.commit(T0)
    path = blob_path(store, record.checksum)
    assert content_files(store) == [path]  # renamed to its address; nothing staged remains
    assert path.read_bytes() == b"first second"
    assert record.checksum == checksum_of(b"first second")
    assert row_count(store) == 1


def test_staging_files_are_private(store: SQLiteArtifactStore) -> None:
    upload = begin(store)
    upload.write(b"x")
    (staging,) = staged(store)
    assert staging.stat().st_mode & 0o777 == 0o600
    upload.abort()


@pytest.mark.parametrize("how", ["abort", "over_max", "failed_commit", "dropped"])
def test_every_unpublished_path_removes_the_staging_file(
    store: SQLiteArtifactStore, how: str
) -> None:
    upload = begin(store, max_bytes=10, expires_at=T0 + SECOND)
    upload.write(b"0123456789")
    assert len(staged(store)) == 1
    if how == "abort":
        upload.abort()
    elif how == "over_max":
        with pytest.raises(ArtifactTooLarge):
            upload.write(b"!")
    elif how == "failed_commit":
        with pytest.raises(ValueError):
            upload.commit(T0 + SECOND)  # born expired
    else:
        del upload
        gc.collect()
    assert content_files(store) == []
    assert row_count(store) == 0


def test_a_failed_insert_leaves_no_row_and_no_staging_file(store: SQLiteArtifactStore) -> None:
    # A real SQLite failure inside the commit's transaction, from a trigger on this connection.
    store._conn.execute(
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON artifacts "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )
    upload = begin(store)
    upload.write(b"content")
    with pytest.raises(Exception, match="refused by the test"):
        upload.commit(T0)
    assert row_count(store) == 0
    assert staged(store) == []
    # Content already renamed to its address may stay: it is only ever the bytes its name says.
    assert content_files(store) in ([], [blob_path(store, checksum_of(b"content"))])
    with pytest.raises(ArtifactError):
        upload.commit(T0)  # the failed commit aborted the upload
    store._conn.execute("DROP TRIGGER refuse")
    again = begin(store)
    again.write(b"content")
    assert store.read(again.commit(T0).id) == b"content"


def test_a_failed_rename_leaves_no_row_and_no_staging_file(store: SQLiteArtifactStore) -> None:
    # Something that is not a file sits at the content address, so the rename cannot happen.
    blocker = blob_path(store, checksum_of(b"content"))
    blocker.mkdir(parents=True)
    (blocker / "occupied").write_bytes(b"")
    upload = begin(store)
    upload.write(b"content")
    # A directory where the content belongs is the store's damage, not an outage a retry
    # would get past: the error itself, not FileStoreUnavailable.
    with pytest.raises(OSError) as info:
        upload.commit(T0)
    assert not isinstance(info.value, FileStoreUnavailable)
    assert row_count(store) == 0
    assert staged(store) == []


def test_commit_over_an_intact_file_keeps_it(store: SQLiteArtifactStore) -> None:
    first = store.put(NewArtifact(
            run_id="run-0", origin=ArtifactOrigin.EXPORT, name="a.bin",
            media_type="application/octet-stream", trust=Trust.USER), b"shared")
    path = blob_path(store, first.checksum)
    before = path.stat()
    upload = begin(store)
    upload.write(b"shared")
    record = upload.commit(T0)
    assert record.id != first.id and record.checksum == first.checksum
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert content_files(store) == [path]


def test_commit_repairs_a_damaged_content_file(store: SQLiteArtifactStore) -> None:
    first = store.put(NewArtifact(
            run_id="run-0", origin=ArtifactOrigin.EXPORT, name="a.bin",
            media_type="application/octet-stream", trust=Trust.USER), b"precious")
    path = blob_path(store, first.checksum)
    path.write_bytes(b"tampered")
    upload = begin(store)
    upload.write(b"precious")
    upload.commit(T0)
    assert store.read(first.id) == b"precious"  # every record sharing the file is healed
    assert content_files(store) == [path]


def test_the_twin_rule_on_commit_stores_no_second_row(store: SQLiteArtifactStore) -> None:
    writer = RunArtifactWriter(store, "run-1", FixedClock(T0), principal_id="alice")
    ref = writer.write(origin=ArtifactOrigin.MODEL_OUTPUT, name="image.png",
                       media_type="image/png", content=b"pixels", trust=Trust.USER)
    with writer.stream(origin=ArtifactOrigin.MODEL_OUTPUT, name="image.png",
                       media_type="image/png", trust=Trust.USER, max_bytes=100) as s:
        s.write(b"pixels")
        assert s.commit() == ref
    assert row_count(store) == 1
    assert content_files(store) == [blob_path(store, ref.checksum)]


# --------------------------------------------------------------------------------------------
# Memory, threads, restart
# --------------------------------------------------------------------------------------------


def test_a_large_stream_is_never_held_in_memory_whole(store: SQLiteArtifactStore) -> None:
    chunk = bytes(range(256)) * 256  # 64 KiB
    count = 256  # 16 MiB in all
    digest = hashlib.sha256()
    upload = begin(store)
    tracemalloc.start()
    try:
        for _ in range(count):
            upload.write(chunk)
            digest.update(chunk)
        record = upload.commit(T0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert record.size == len(chunk) * count
    assert record.checksum == "sha256:" + digest.hexdigest()  # hashed as it went
    assert peak < 2 * 1024 * 1024  # a few chunks' worth at most, never the 16 MiB
    assert blob_path(store, record.checksum).stat().st_size == record.size


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_writeback_points_keep_the_staged_bytes_exact(
    store: SQLiteArtifactStore, end: str
) -> None:
    """Every 4 MiB the upload asks the kernel to start writing back (so commit's fsync waits
    for the last stretch only); chunks the file object still buffers (under 8 KiB) and a point
    falling mid-chunk must change nothing about the bytes, the checksum, or an abort."""
    block = bytes(range(251)) * 40  # 10,040 bytes
    sizes = [1, 4095, 8191, 8192, 8193, 10040, 3]
    upload = begin(store)
    sent = bytearray()
    while len(sent) < 9 * 1024 * 1024 + 7:
        chunk = block[: sizes[len(sent) % len(sizes)]]
        upload.write(chunk)
        sent += chunk
    assert upload._written_back > 8 * 1024 * 1024  # the points were passed, twice
    if end == "abort":
        upload.abort()
        assert content_files(store) == []
        return
    record = upload.commit(T0)
    assert record.checksum == checksum_of(bytes(sent))
    assert blob_path(store, record.checksum).read_bytes() == sent
    assert staged(store) == []


def test_an_abort_from_another_thread_stops_the_producer(store: SQLiteArtifactStore) -> None:
    writer = RunArtifactWriter(store, "run-1", FixedClock(T0), principal_id="alice")
    started = threading.Event()
    failures: list[BaseException] = []

    with writer.stream(origin=ArtifactOrigin.MODEL_OUTPUT, name="clip.mp4",
                       media_type="video/mp4", trust=Trust.EXTERNAL_UNTRUSTED,
                       max_bytes=1 << 30) as s:

        def produce() -> None:
            try:
                while True:
                    s.write(b"frame" * 1000)
                    started.set()
            except ArtifactError as exc:  # the abort surfaces as the next write's failure
                failures.append(exc)

        producer = threading.Thread(target=produce)
        producer.start()
        assert started.wait(10)
        s.abort()  # a cancellation, say
        producer.join(10)
        assert not producer.is_alive()
    assert len(failures) == 1 and not isinstance(failures[0], ArtifactTooLarge)
    assert row_count(store) == 0
    assert content_files(store) == []


def test_only_committed_streams_survive_a_restart(tmp_path: Path) -> None:
    first = open_artifact_store(tmp_path, FixedClock(T0))
    pending = begin(first, name="pending.png")
    pending.write(b"not yet")
    done = begin(first)
    done.write(b"committed")
    record: ArtifactRecord = done.commit(T0)
    first.close()

    reopened = open_artifact_store(tmp_path, FixedClock(T0))
    assert reopened.list_run("run-1") == [record]
    assert reopened.read(record.id) == b"committed"
    pending.abort()
    assert staged(reopened) == []
    reopened.close()
