"""The disk under the artifacts' SQLite metadata failing (D359 left it: "the SQLite metadata's
own disk-full still surfaces as before") is the store's outage, ``FileStoreUnavailable``, as the
content files' own disk failing is: the pipeline answers the retryable ARTIFACT_STORE failure,
not INTERNAL_UNEXPECTED. Before, ``sqlite3.OperationalError`` ("database or disk is full",
"disk I/O error") reached the model as ``tool.internal.unexpected``.

Nothing is half-published: a write the database refused leaves no row; the content it placed
first is referenced by nothing (no read, list or identity finds it) until purge removes it,
and content another row references is kept.

The disks are real. A tmpfs of a few MiB, filled with a file until the kernel refuses
(ENOSPC), makes SQLite's own SQLITE_FULL (where this machine may mount; elsewhere those tests
skip, and fail under TOOLHOST_REQUIRE_SERVERS=1, as CI runs them). RLIMIT_FSIZE (``file_size_limit``) makes the kernel refuse the WAL's write past the
limit with EFBIG, which SQLite reports as SQLITE_IOERR_WRITE, with no mount at all.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from test_artifact_stream import blob_path, row_count, staged

from toolhost import ArtifactOrigin, Tool, ToolExecutionContext, ToolOutput, Trust
from toolhost._adapters.file_artifacts import FileStoreUnavailable
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model.artifacts import ArtifactStoreUnavailable, NewArtifact
from toolhost._model.data_layout import DATABASE_NAME
from toolhost._model.digest import sha256_digest
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock
from toolhost.testing import file_size_limit, host_for

#: The tmpfs: room for the database, its WAL and the content, and quick to fill.
DISK_SIZE = "4m"


def _new(name: str) -> NewArtifact:
    return NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name=name,
                       media_type="application/octet-stream", trust=Trust.INTERNAL_TOOL)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A real filesystem of DISK_SIZE (a tmpfs), unmounted when the test ends."""
    point = tmp_path / "disk"
    point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE},mode=0700",
                              "tmpfs", str(point)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        problem = f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'mount failed'}"
        if os.environ.get("TOOLHOST_REQUIRE_SERVERS") == "1":  # CI: never a skip counted
            pytest.fail(f"TOOLHOST_REQUIRE_SERVERS=1 but {problem}", pytrace=False)
        pytest.skip(problem)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


@pytest.fixture
def store(disk: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(disk / "data", FixedClock(T0))
    yield s
    s.close()


def fill(disk: Path, *, leave: int) -> Path:
    """Write a file on ``disk`` until the kernel refuses it (ENOSPC), then give back ``leave``
    blocks: the file, to remove when the disk should have room again."""
    block = os.statvfs(disk).f_bsize
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with pytest.raises(OSError) as full:
            while True:
                os.write(fd, bytes(block))
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, (filler.stat().st_size // block - leave) * block)
    assert os.statvfs(disk).f_bavail == leave
    return filler


def test_a_full_disk_under_the_metadata_is_the_store_unavailable_and_publishes_nothing(
    disk: Path, store: SQLiteArtifactStore,
) -> None:
    kept = store.put_or_reuse(_new("kept.bin"), b"stored before", now=T0)
    # One block free: the new content's file fits, the WAL's frame for its row does not.
    filler = fill(disk, leave=1)
    with pytest.raises(FileStoreUnavailable) as info:
        store.put_or_reuse(_new("new.bin"), b"the new content", now=T0)
    assert isinstance(info.value, ArtifactStoreUnavailable)
    assert (info.value.location, info.value.operation, info.value.problem) == (
        disk / "data" / DATABASE_NAME, "write", "SQLITE_FULL")
    # No row: nothing finds the content the write placed first.
    assert row_count(store) == 1
    assert [r.id for r in store.list_artifacts()] == [kept.id]
    orphan = blob_path(store, sha256_digest(b"the new content"))
    assert orphan.exists()
    assert store.find_live(run_id="run-1", conversation_id=None, principal_id=None,
                           origin=ArtifactOrigin.EXPORT, name="new.bin",
                           media_type="application/octet-stream",
                           checksum=sha256_digest(b"the new content"), now=T0) is None
    # The disk back: purge takes the orphan and nothing else; the same write then succeeds.
    filler.unlink()
    report = store.purge(T0)
    assert (report.artifacts, report.content_files) == (0, 1)
    assert not orphan.exists()
    assert store.read(kept.id) == b"stored before"
    again = store.put_or_reuse(_new("new.bin"), b"the new content", now=T0)
    assert store.read(again.id) == b"the new content"


def test_a_full_disk_refusing_a_row_for_stored_content_keeps_that_content(
    disk: Path, store: SQLiteArtifactStore,
) -> None:
    first = store.put_or_reuse(_new("first.bin"), b"shared bytes", now=T0)
    filler = fill(disk, leave=0)
    with pytest.raises(FileStoreUnavailable) as info:
        store.put_or_reuse(_new("second.bin"), b"shared bytes", now=T0)
    assert info.value.problem == "SQLITE_FULL"
    assert row_count(store) == 1
    assert store.read(first.id) == b"shared bytes"  # another row's content is never taken
    filler.unlink()
    assert store.purge(T0).content_files == 0
    second = store.put_or_reuse(_new("second.bin"), b"shared bytes", now=T0)
    assert store.read(second.id) == store.read(first.id) == b"shared bytes"


def test_a_stream_whose_row_the_full_disk_refuses_leaves_nothing_staged_or_visible(
    disk: Path, store: SQLiteArtifactStore,
) -> None:
    store.put_or_reuse(_new("warm.bin"), b"warm", now=T0)
    upload = store.begin(_new("streamed.bin"), max_bytes=1024)
    upload.write(b"streamed bytes")
    upload._file.flush()  # type: ignore[attr-defined]  # staged on the disk before it fills
    filler = fill(disk, leave=0)
    with pytest.raises(FileStoreUnavailable) as info:
        upload.commit(T0)
    assert info.value.problem == "SQLITE_FULL"
    assert row_count(store) == 1 and staged(store) == []
    filler.unlink()
    # The content went to its address before the row was refused: referenced by nothing.
    assert store.purge(T0).content_files == 1


def test_a_disk_refusing_the_wal_past_a_size_limit_is_the_store_unavailable(
    tmp_path: Path,
) -> None:
    """No mount needed: EFBIG on the WAL's write (SQLite's SQLITE_IOERR_WRITE)."""
    store = open_artifact_store(tmp_path / "data", FixedClock(T0))
    try:
        store.put_or_reuse(_new("warm.bin"), b"warm", now=T0)
        wal = tmp_path / "data" / f"{DATABASE_NAME}-wal"
        # The new content's file is far below the limit; the WAL's next frame lies past it.
        with file_size_limit(wal.stat().st_size), pytest.raises(FileStoreUnavailable) as info:
            store.put_or_reuse(_new("new.bin"), b"new", now=T0)
        assert (info.value.operation, info.value.problem) == ("write", "SQLITE_IOERR_WRITE")
        assert row_count(store) == 1
        assert store.read(store.put_or_reuse(_new("new.bin"), b"new", now=T0).id) == b"new"
    finally:
        store.close()


# --------------------------------------------------------------------------- the pipeline

OUT = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
       "additionalProperties": False}
IN = {"type": "object", "properties": {"disk": {"enum": ["failing", "back"]}},
      "required": ["disk"], "additionalProperties": False}
#: Below any write of a WAL frame (4 KiB pages, each frame with its 24-byte header), even one
#: at the start of a WAL a checkpoint let restart; above the content file's few bytes.
PAGE = 4096


async def _save(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    # Async, so on the loop's (the test's main) thread, where the limit may ignore SIGXFSZ.
    def save() -> str:
        return context.artifacts.write(
            origin=ArtifactOrigin.EXPORT, name="saved.txt", media_type="text/plain",
            content="saved text", trust=Trust.INTERNAL_TOOL).id

    if arguments["disk"] == "failing":
        with file_size_limit(PAGE):
            saved = save()
    else:
        saved = save()
    return ToolOutput(structured={"id": saved}, content=saved)


def test_the_pipeline_answers_the_retryable_artifact_store_failure(tmp_path: Path) -> None:
    plugin = make_plugin(tools=[Tool(make_spec(name="fx.save", input_schema=IN,
                                               output_schema=OUT), call=_save)])
    with host_for({"fx-dist": plugin}, data_dir=tmp_path / "data") as host:
        run = host.start_run()
        outcome = host.invoke_sync("fx.save", {"disk": "failing"}, run=run)
        assert outcome.failure is not None, outcome.to_json()
        assert outcome.failure.reason_code == "tool.upstream_unavailable.artifact_store"
        assert outcome.failure.retryable is True  # fx.save is READ_ONLY
        assert outcome.failure.detail["exception"] == "FileStoreUnavailable"
        assert "SQLITE_IOERR_WRITE" in outcome.failure.detail["error"]
        assert "unexpectedly" not in outcome.content
        assert host.pipeline.artifacts.list_run(run.id) == []
        # The disk back, the same call succeeds and its artifact reads back.
        again = host.invoke_sync("fx.save", {"disk": "back"}, run=run)
        assert again.ok, again.to_json()
        assert host.pipeline.artifacts.read(again.content) == b"saved text"
        host.end_run(run)
