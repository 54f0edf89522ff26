"""A local artifact store whose disk fails (full, read-only, failing, over a file size limit) is
the store's outage, ``FileStoreUnavailable``, an ``ArtifactStoreUnavailable`` as an object
store's is: the pipeline then answers the host's retryable ARTIFACT_STORE failure rather than
INTERNAL_UNEXPECTED. A content file that is missing or not a regular file stays the artifact's
damage (``ArtifactCorrupted``).

The disk's failure is real where a test can make one: RLIMIT_FSIZE makes the kernel refuse a
write past the limit with EFBIG, as a full disk refuses it with ENOSPC.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_artifact_stream import blob_path, row_count, staged

from toolhost._adapters import file_artifacts
from toolhost._adapters.file_artifacts import FileStoreUnavailable
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactOrigin,
    ArtifactStoreUnavailable,
    NewArtifact,
)
from toolhost._model.spec import Trust
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock
from toolhost.testing import file_size_limit

LIMIT = 1024 * 1024
BIG = b"x" * (2 * LIMIT)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(tmp_path / "data", FixedClock(T0))
    yield s
    s.close()


def _new() -> NewArtifact:
    return NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="big.bin",
                       media_type="application/octet-stream", trust=Trust.INTERNAL_TOOL)


def test_a_put_the_disk_refuses_is_the_store_unavailable(store: SQLiteArtifactStore) -> None:
    with file_size_limit(LIMIT), pytest.raises(FileStoreUnavailable) as info:
        store.put_or_reuse(_new(), BIG, now=T0)
    assert isinstance(info.value, ArtifactStoreUnavailable)
    assert (info.value.operation, info.value.problem) == ("write", "EFBIG")
    assert row_count(store) == 0
    # The disk back, the same write succeeds: retrying was right.
    assert store.read(store.put_or_reuse(_new(), BIG, now=T0).id) == BIG


def test_a_stream_the_disk_refuses_is_the_store_unavailable(store: SQLiteArtifactStore) -> None:
    upload = store.begin(_new(), max_bytes=len(BIG))
    with file_size_limit(LIMIT), pytest.raises(FileStoreUnavailable) as info:
        for _ in range(2):
            upload.write(BIG[:LIMIT])
            upload._file.flush()  # type: ignore[attr-defined]  # what reaches the disk now
    assert (info.value.operation, info.value.problem) == ("stage", "EFBIG")
    assert row_count(store) == 0
    assert staged(store) == []


def test_a_stream_that_cannot_stage_is_the_store_unavailable(
    store: SQLiteArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(self: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_artifacts.FileContent, "stage", no_room)
    with pytest.raises(FileStoreUnavailable) as info:
        store.begin(_new(), max_bytes=10)
    assert (info.value.operation, info.value.problem) == ("stage", "ENOSPC")


def test_a_read_the_disk_fails_is_the_store_unavailable_not_damage(
    store: SQLiteArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = store.put(_new(), b"stored bytes")
    real_open = file_artifacts._open_content

    class Failing:
        def __init__(self, path: Path) -> None:
            self._f = real_open(path)

        def read(self, n: int) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

        def close(self) -> None:
            self._f.close()

    monkeypatch.setattr(file_artifacts, "_open_content", Failing)
    with pytest.raises(FileStoreUnavailable) as info:
        store.read(record.id)
    assert (info.value.operation, info.value.problem) == ("read", "EIO")
    monkeypatch.undo()
    # A missing content file is still the artifact's damage.
    blob_path(store, record.checksum).unlink()
    with pytest.raises(ArtifactCorrupted):
        store.read(record.id)


def test_a_shard_replaced_by_a_file_is_the_artifacts_damage_not_an_outage(
    store: SQLiteArtifactStore,
) -> None:
    """ENOTDIR, EEXIST: the store's layout is damaged, and a retry would meet it again: the
    read is corrupted content, the write the error itself, never "unavailable, retry"."""
    record = store.put_or_reuse(_new(), b"hello", now=T0)
    shard = blob_path(store, record.checksum).parent
    for child in shard.iterdir():
        child.unlink()
    shard.rmdir()
    shard.write_bytes(b"junk")
    with pytest.raises(ArtifactCorrupted):
        store.read(record.id)
    with pytest.raises(OSError) as info:
        store.put_or_reuse(attrs.evolve(_new(), name="other.bin"), b"hello", now=T0)
    assert not isinstance(info.value, ArtifactStoreUnavailable)


def test_a_network_mount_gone_is_an_outage(
    store: SQLiteArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOTCONN (sshfs, gcsfuse, s3fs gone) and its kind are the store not serving, like a full
    disk: only a damaged layout is not (a third review found the first list of outages short)."""
    for code in (errno.ENOTCONN, errno.EREMOTEIO, errno.EHOSTDOWN):
        def gone(self: Any, code: int = code) -> Any:
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(file_artifacts.FileContent, "stage", gone)
        with pytest.raises(FileStoreUnavailable) as info:
            store.begin(_new(), max_bytes=10)
        assert info.value.problem == errno.errorcode[code]
