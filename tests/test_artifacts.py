"""The SQLite ArtifactStore: the port's contract, then what is particular to this backend.

Real SQLite files and real content files in tmp_path throughout; no mocks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import toolhost._adapters.sqlite_artifacts
import toolhost._model.artifacts
import toolhost._pipeline.artifacts
import toolhost._ports.artifacts
from toolhost._adapters.sqlite_artifacts import MIGRATIONS, SQLiteArtifactStore, open_artifact_store
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._model.artifacts import (
    ARTIFACT_CEILING,
    ArtifactCorrupted,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactRef,
)
from toolhost._model.spec import Trust
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._testing.artifact_store_contract import T0, ArtifactStoreContract
from toolhost._testing.clocks import FixedClock, ScriptedClock

SECOND = dt.timedelta(seconds=1)


class TestSQLiteArtifactStoreContract(ArtifactStoreContract):
    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        return open_artifact_store(tmp_path, clock)


# --------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(tmp_path, FixedClock(T0))
    yield s
    s.close()


def writer_for(store: SQLiteArtifactStore, run_id: str = "run-1", at: dt.datetime = T0,
               **kwargs: Any) -> RunArtifactWriter:
    return RunArtifactWriter(store, run_id, FixedClock(at), **kwargs)


def write(writer: RunArtifactWriter, **overrides: Any) -> ArtifactRef:
    fields: dict[str, Any] = dict(
        origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE,
        name="output.txt",
        media_type="text/plain",
        content=b"captured output",
        trust=Trust.INTERNAL_TOOL,
    )
    fields.update(overrides)
    return writer.write(**fields)


def row_count(store: SQLiteArtifactStore) -> int:
    return int(store._conn.execute("SELECT count(*) FROM artifacts").fetchone()[0])


def content_files(store: SQLiteArtifactStore) -> list[Path]:
    """Every file under the content root, temp files included (they must not linger)."""
    return sorted(p for p in store.root.rglob("*") if p.is_file())


def blob_path(store: SQLiteArtifactStore, ref: ArtifactRef | ArtifactRecord) -> Path:
    hexdigest = ref.checksum.removeprefix("sha256:")
    return store.root / "sha256" / hexdigest[:2] / hexdigest[2:]


# --------------------------------------------------------------------------------------------
# Layout and the module surface
# --------------------------------------------------------------------------------------------


def test_public_names() -> None:
    # Values, the port, the SQLite adapter and the run-bound writer each live in their layer.
    surfaces = {
        toolhost._model.artifacts: {
            "ARTIFACT_CEILING", "ArtifactCorrupted", "ArtifactError", "ArtifactNotFound",
            "ArtifactOrigin", "ArtifactRecord", "ArtifactRef", "ArtifactTooLarge",
            "ArtifactUnavailable", "as_utc", "as_utc_or_none"},
        toolhost._ports.artifacts: {"ArtifactStore", "ArtifactUpload"},
        toolhost._adapters.sqlite_artifacts: {
            "MIGRATIONS", "SQLiteArtifactStore", "SQLiteArtifactUpload", "open_artifact_store"},
        toolhost._pipeline.artifacts: {"ArtifactResolver", "RunArtifactStream",
                                       "RunArtifactWriter"},
    }
    for module, names in surfaces.items():
        assert set(module.__all__) == names, module.__name__
        assert all(hasattr(module, name) for name in names)
    assert ARTIFACT_CEILING == 512 * 1024 * 1024
    assert [o.value for o in ArtifactOrigin] == [
        "TOOL_OUTPUT_CAPTURE", "EXPORT", "MODEL_OUTPUT", "UPLOAD",
    ]
    # The spec's ArtifactRef: id, name, media_type, byte_count, checksum (DESIGN §8.1).
    assert [f.name for f in attrs.fields(ArtifactRef)] == [
        "id", "name", "media_type", "byte_count", "checksum",
    ]


def test_open_lays_out_the_data_dir(tmp_path: Path, store: SQLiteArtifactStore) -> None:
    assert (tmp_path / DATABASE_NAME).is_file()
    assert store.root == tmp_path / "artifacts"
    ref = write(writer_for(store), content=b"abc")
    digest = hashlib.sha256(b"abc").hexdigest()
    path = tmp_path / "artifacts" / "sha256" / digest[:2] / digest[2:]
    assert path.read_bytes() == b"abc"
    assert content_files(store) == [path]  # no temp file left behind
    assert ref.checksum == "sha256:" + digest


def test_schema_has_every_field_and_the_indexes(store: SQLiteArtifactStore) -> None:
    conn = store._conn
    columns = [r[1] for r in conn.execute("PRAGMA table_info(artifacts)")]
    assert columns == [
        "id", "run_id", "conversation_id", "origin", "name", "media_type", "size", "checksum",
        "trust", "created_at", "expires_at", "principal_id", "claimed",
    ]
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(artifacts)")}
    assert {"artifacts_identity", "artifacts_conversation"} <= indexes
    indexed = [r[2] for r in conn.execute("PRAGMA index_info(artifacts_identity)")]
    assert indexed == ["run_id", "origin", "name", "media_type", "checksum"]
    indexed = [r[2] for r in conn.execute("PRAGMA index_info(artifacts_conversation)")]
    assert indexed == ["conversation_id", "principal_id", "created_at", "id"]


def test_claimed_is_stored_as_zero_or_one(store: SQLiteArtifactStore) -> None:
    unsent = store.put(run_id="run-1", origin=ArtifactOrigin.UPLOAD, name="photo.jpg",
                       media_type="image/jpeg", content=b"jpeg", trust=Trust.USER,
                       principal_id="alice", claimed=False)
    raw = "SELECT principal_id, claimed FROM artifacts WHERE id = ?"
    assert store._conn.execute(raw, (unsent.id,)).fetchone() == ("alice", 0)
    store.claim(unsent.id)
    assert store._conn.execute(raw, (unsent.id,)).fetchone() == ("alice", 1)
    with pytest.raises(sqlite3.IntegrityError):
        store._conn.execute("UPDATE artifacts SET claimed = 2 WHERE id = ?", (unsent.id,))


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    SQLiteArtifactStore(tmp_path / "artifacts", conn, FixedClock(T0))
    migrate(conn, MIGRATIONS)
    migrate(conn, MIGRATIONS)
    store = SQLiteArtifactStore(tmp_path / "artifacts", conn, FixedClock(T0))
    rows = conn.execute(
        "SELECT version FROM schema_migrations WHERE component = 'artifacts'"
    ).fetchall()
    assert sorted(rows) == [(1,), (2,)]
    assert store.list_run("run-1") == []
    conn.close()


def test_version_2_upgrades_a_version_1_database(tmp_path: Path) -> None:
    # A database written before principals and claims: its rows come through with no principal
    # (the resolver then refuses them: fail closed) and claimed (none was an unsent upload).
    conn = connect(tmp_path / DATABASE_NAME)
    migrate(conn, MIGRATIONS[:1])
    checksum = "sha256:" + hashlib.sha256(b"old").hexdigest()
    conn.execute(
        "INSERT INTO artifacts (id, run_id, conversation_id, origin, name, media_type, size, "
        "checksum, trust, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ("old-1", "run-1", "conv-1", "UPLOAD", "old.txt", "text/plain", 3, checksum, "USER",
         "2026-07-25T13:03:11.482913+00:00", None),
    )
    store = SQLiteArtifactStore(tmp_path / "artifacts", conn, FixedClock(T0))
    record = store.get("old-1")
    assert (record.principal_id, record.claimed) == (None, True)
    assert record.ref.byte_count == 3
    rows = conn.execute(
        "SELECT version FROM schema_migrations WHERE component = 'artifacts' ORDER BY version"
    ).fetchall()
    assert rows == [(1,), (2,)]
    conn.close()


# --------------------------------------------------------------------------------------------
# The identity rule, observed on rows and files
# --------------------------------------------------------------------------------------------


def test_same_write_returns_the_same_ref_and_stores_nothing(store: SQLiteArtifactStore) -> None:
    writer = writer_for(store)
    ref = write(writer)
    path = blob_path(store, ref)
    before = path.stat()
    assert write(writer) == ref
    assert row_count(store) == 1
    assert content_files(store) == [path]
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize(
    "change",
    [
        {"name": "other.txt"},
        {"media_type": "application/json"},
        {"origin": ArtifactOrigin.EXPORT},
        {"content": b"different output"},
    ],
)
def test_any_identity_difference_makes_a_new_artifact(
    store: SQLiteArtifactStore, change: dict[str, Any]
) -> None:
    writer = writer_for(store)
    first = write(writer)
    second = write(writer, **change)
    assert second.id != first.id
    assert row_count(store) == 2
    # Only new content makes a new file.
    assert len(content_files(store)) == (2 if "content" in change else 1)


def test_trust_and_expiry_are_not_identity(store: SQLiteArtifactStore) -> None:
    writer = writer_for(store)
    first = write(writer, trust=Trust.USER, expires_at=T0 + 60 * SECOND)
    assert write(writer, trust=Trust.USER, expires_at=T0 + 3600 * SECOND) == first
    assert store.get(first.id).expires_at == T0 + 60 * SECOND  # the first expiry stands


def test_an_expired_original_gives_way_to_a_new_artifact(store: SQLiteArtifactStore) -> None:
    first = write(writer_for(store, at=T0), expires_at=T0 + 10 * SECOND)
    assert write(writer_for(store, at=T0 + 9 * SECOND)) == first
    fresh = write(writer_for(store, at=T0 + 10 * SECOND))
    assert fresh.id != first.id and fresh.checksum == first.checksum
    assert row_count(store) == 2
    assert len(content_files(store)) == 1
    assert store.get(fresh.id).created_at == T0 + 10 * SECOND


def test_another_run_gets_its_own_artifact_over_the_same_file(
    store: SQLiteArtifactStore,
) -> None:
    a = write(writer_for(store, "run-1"))
    path = blob_path(store, a)
    inode = path.stat().st_ino
    b = write(writer_for(store, "run-2"))
    assert a.id != b.id
    assert [r.id for r in store.list_run("run-1")] == [a.id]
    assert [r.id for r in store.list_run("run-2")] == [b.id]
    assert content_files(store) == [path] and path.stat().st_ino == inode


def test_identical_content_is_one_file_across_runs_and_origins(
    store: SQLiteArtifactStore,
) -> None:
    for i, origin in enumerate(ArtifactOrigin):
        write(writer_for(store, f"run-{i}"), origin=origin, name=f"n{i}", content=b"shared")
    assert row_count(store) == len(ArtifactOrigin)
    assert len(content_files(store)) == 1


def test_writer_binds_run_conversation_and_clock(tmp_path: Path) -> None:
    store = open_artifact_store(tmp_path, FixedClock(T0 - 99 * SECOND))
    at = [T0 + SECOND, T0 + 2 * SECOND]
    writer = RunArtifactWriter(store, "run-7", ScriptedClock(at), conversation_id="conv-7")
    refs = [write(writer, name="a"), write(writer, name="b")]
    records = [store.get(r.id) for r in refs]
    assert [r.created_at for r in records] == at  # the writer's instants, one read per write
    assert {(r.run_id, r.conversation_id) for r in records} == {("run-7", "conv-7")}
    assert store.list_run("run-7") == records
    store.close()


def test_timestamps_are_stored_as_utc(store: SQLiteArtifactStore) -> None:
    plus_five = dt.timezone(dt.timedelta(hours=5))
    ref = write(writer_for(store, at=T0.astimezone(plus_five)),
                expires_at=(T0 + SECOND).astimezone(plus_five))
    raw = store._conn.execute(
        "SELECT created_at, expires_at FROM artifacts WHERE id = ?", (ref.id,)
    ).fetchone()
    assert raw == ("2026-07-25T13:03:11.482913+00:00", "2026-07-25T13:03:12.482913+00:00")
    record = store.get(ref.id)
    assert record.created_at == T0 and record.created_at.tzinfo is dt.UTC


# --------------------------------------------------------------------------------------------
# Reads verify; corruption fails loudly
# --------------------------------------------------------------------------------------------


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1])


def _extend(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"!")


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _delete(path: Path) -> None:
    path.unlink()


def _delete_shard(path: Path) -> None:
    path.unlink()
    path.parent.rmdir()


CORRUPTIONS = [_flip_a_byte, _truncate, _extend, _empty, _delete, _delete_shard]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.strip("_"))
def test_a_corrupted_file_fails_the_read_loudly(
    store: SQLiteArtifactStore, corrupt: Any
) -> None:
    ref = write(writer_for(store), content=b"precious bytes " * 100)
    corrupt(blob_path(store, ref))
    result: bytes | None = None
    with pytest.raises(ArtifactCorrupted) as info:
        result = store.read(ref.id)
    assert result is None  # nothing was returned
    assert info.value.artifact_id == ref.id
    assert b"precious" not in str(info.value).encode()  # the content never leaks into errors


def test_corruption_is_reported_for_every_record_sharing_the_file(
    store: SQLiteArtifactStore,
) -> None:
    a = write(writer_for(store, "run-1"), content=b"shared")
    b = write(writer_for(store, "run-2"), content=b"shared")
    _flip_a_byte(blob_path(store, a))
    for ref in (a, b):
        with pytest.raises(ArtifactCorrupted):
            store.read(ref.id)


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.strip("_"))
def test_writing_the_content_again_repairs_a_damaged_file(
    store: SQLiteArtifactStore, corrupt: Any
) -> None:
    content = b"precious bytes " * 100
    ref = write(writer_for(store), content=content)
    corrupt(blob_path(store, ref))
    # The identity rule still returns the same ref, and the file is healed on the way.
    assert write(writer_for(store), content=content) == ref
    assert store.read(ref.id) == content
    assert row_count(store) == 1


# --------------------------------------------------------------------------------------------
# Concurrency and restart
# --------------------------------------------------------------------------------------------


def _race(writers: list[RunArtifactWriter], content: bytes) -> list[ArtifactRef]:
    barrier = threading.Barrier(len(writers))
    refs: list[ArtifactRef] = []
    errors: list[BaseException] = []

    def work(writer: RunArtifactWriter) -> None:
        try:
            barrier.wait()
            refs.append(write(writer, content=content))
        except BaseException as exc:  # re-raised below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return refs


def test_concurrent_writers_sharing_a_connection_leave_one_row(
    store: SQLiteArtifactStore,
) -> None:
    refs = _race([writer_for(store) for _ in range(16)], b"racing bytes" * 4096)
    assert len(set(refs)) == 1
    assert row_count(store) == 1
    assert len(content_files(store)) == 1  # no temp file survives the race


def test_concurrent_writers_on_separate_connections_leave_one_row(tmp_path: Path) -> None:
    # Like separate processes: one database file, one content root, a connection each.
    stores = [open_artifact_store(tmp_path, FixedClock(T0)) for _ in range(8)]
    try:
        refs = _race([writer_for(s) for s in stores], b"racing bytes" * 4096)
        assert len(set(refs)) == 1
        assert row_count(stores[0]) == 1
        assert len(content_files(stores[0])) == 1
    finally:
        for s in stores:
            s.close()


def test_records_survive_a_restart(tmp_path: Path) -> None:
    first = open_artifact_store(tmp_path, FixedClock(T0))
    writer = RunArtifactWriter(first, "run-1", FixedClock(T0), conversation_id="conv-1")
    refs = [
        write(writer, content=b"one", expires_at=T0 + 60 * SECOND),
        write(writer, content=b"two", trust=Trust.EXTERNAL_UNTRUSTED),
    ]
    before = first.list_run("run-1")
    first.close()

    reopened = open_artifact_store(tmp_path, FixedClock(T0 + SECOND))
    assert reopened.list_run("run-1") == before
    assert [reopened.read(r.id) for r in refs] == [b"one", b"two"]
    # The identity rule holds across the restart too.
    assert write(RunArtifactWriter(reopened, "run-1", FixedClock(T0 + SECOND)), content=b"one") == (
        refs[0]
    )
    reopened.close()


def test_a_store_over_a_given_connection_leaves_it_open(tmp_path: Path) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    store = open_artifact_store(tmp_path, FixedClock(T0), conn=conn)
    write(writer_for(store))
    store.close()
    assert conn.execute("SELECT count(*) FROM artifacts").fetchone() == (1,)
    conn.close()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
