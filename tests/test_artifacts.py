"""The SQLite ArtifactStore: the port's contract, then what is particular to this backend.

Real SQLite files and real content files in tmp_path throughout; no mocks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import toolhost._adapters.file_artifacts
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
    NewArtifact,
)
from toolhost._model.spec import Trust
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._testing.artifact_store_contract import T0, ArtifactStoreContract
from toolhost._testing.clocks import FixedClock, ScriptedClock

SECOND = dt.timedelta(seconds=1)


def _damage_file(
    _: ArtifactStoreContract, store: ArtifactStore, record: ArtifactRecord, stored: bytes | None
) -> None:
    """The contract's ``damage_content``: the content file rewritten or removed on disk."""
    assert isinstance(store, SQLiteArtifactStore)
    path = store._blob_path(record.checksum)
    if stored is None:
        path.unlink()
    else:
        path.write_bytes(stored)


class TestSQLiteArtifactStoreContract(ArtifactStoreContract):
    damage_content = _damage_file

    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        return open_artifact_store(tmp_path, clock)


class TestSQLiteArtifactStoreWithRetentionContract(ArtifactStoreContract):
    damage_content = _damage_file

    # The host's configuration (TOOLHOST_ARTIFACT_RETENTION_DAYS unset): the whole contract
    # holds with a retention too.
    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        return open_artifact_store(tmp_path, clock, retention=dt.timedelta(days=30))


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
            "ArtifactOrigin", "ArtifactRecord", "ArtifactRef", "ArtifactStoreUnavailable",
            "ArtifactTooLarge", "ArtifactUnavailable", "MAX_ATTACHED_BYTES", "NewArtifact",
            "PurgeReport", "as_utc", "as_utc_or_none"},
        toolhost._ports.artifacts: {"LIST_LIMIT", "READ_CHUNK", "STAGING_STALE_AFTER",
                                    "ArtifactChunks", "ArtifactStore", "ArtifactUpload",
                                    "DamagedArtifact"},
        toolhost._adapters.sqlite_artifacts: {
            "BUCKET_MIGRATIONS", "MIGRATIONS", "ArtifactRecordDamaged", "SQLiteArtifactMetadata",
            "SQLiteArtifactStore", "open_artifact_store"},
        toolhost._pipeline.artifacts: {"ArtifactResolver", "CallArtifactWriter",
                                       "RunArtifactStream", "RunArtifactWriter"},
    }
    for module, names in surfaces.items():
        assert set(module.__all__) == names, module.__name__
        assert all(hasattr(module, name) for name in names)
    assert ARTIFACT_CEILING == 512 * 1024 * 1024
    assert [o.value for o in ArtifactOrigin] == [
        "TOOL_OUTPUT_CAPTURE", "EXPORT", "MODEL_OUTPUT", "UPLOAD",
    ]
    # The specification's ArtifactRef: id, name, media_type, byte_count, checksum
    # (host/toolhost/_model/artifacts.py).
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
    unsent = store.put(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.UPLOAD, name="photo.jpg",
            media_type="image/jpeg", trust=Trust.USER, principal_id="alice", claimed=False),
        b"jpeg")
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
    assert sorted(rows) == [(1,), (2,), (3,)]
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
    assert rows == [(1,), (2,), (3,)]
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


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_read_chunks_hold_one_descriptor_until_done_closed_or_dropped(
    store: SQLiteArtifactStore,
) -> None:
    ref = write(writer_for(store), content=b"precious bytes " * 100)
    before = _open_fds()
    exhausted = store.read_chunks(ref.id, 64)
    assert len(_open_fds() - before) == 1  # opened at the call
    assert b"".join(exhausted) == b"precious bytes " * 100
    assert _open_fds() == before  # released with the last chunk
    closed = store.read_chunks(ref.id, 64)
    next(closed)
    closed.close()
    assert _open_fds() == before
    dropped = store.read_chunks(ref.id, 64)
    next(dropped)
    del dropped
    assert _open_fds() == before
    _flip_a_byte(blob_path(store, ref))
    with pytest.raises(ArtifactCorrupted):
        b"".join(store.read_chunks(ref.id, 64))
    assert _open_fds() == before  # a mismatch releases it too


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
    # The identity rule holds across the restart too (the same run and conversation).
    again = RunArtifactWriter(reopened, "run-1", FixedClock(T0 + SECOND), conversation_id="conv-1")
    assert write(again, content=b"one") == refs[0]
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


# --------------------------------------------------------------------------------------------
# Retention: the writer's default expiry
# --------------------------------------------------------------------------------------------


def test_the_writer_expires_what_it_stores_after_the_retention(tmp_path: Path) -> None:
    store = open_artifact_store(tmp_path, FixedClock(T0), retention=dt.timedelta(days=7))
    assert store.retention == dt.timedelta(days=7)
    ref = write(writer_for(store, at=T0 + SECOND))
    assert store.get(ref.id).expires_at == T0 + SECOND + dt.timedelta(days=7)
    # Live until then, so the identity rule still finds it a second before.
    later = writer_for(store, at=T0 + dt.timedelta(days=7))
    assert write(later) == ref
    # Written again once expired: a new artifact, with its own week.
    fresh = write(writer_for(store, at=T0 + SECOND + dt.timedelta(days=7)))
    assert fresh != ref
    assert store.get(fresh.id).expires_at == T0 + SECOND + dt.timedelta(days=14)
    store.close()


@pytest.mark.parametrize(
    ("retention", "error"),
    [(dt.timedelta(0), ValueError), (-SECOND, ValueError), (30, TypeError)],
)
def test_a_retention_must_be_a_positive_timedelta(
    tmp_path: Path, retention: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        open_artifact_store(tmp_path, FixedClock(T0), retention=retention)
    assert not (tmp_path / DATABASE_NAME).exists()  # refused before anything was opened


# --------------------------------------------------------------------------------------------
# Listing and purging, on disk
# --------------------------------------------------------------------------------------------


def _plan(store: SQLiteArtifactStore, sql: str, params: tuple[Any, ...]) -> list[str]:
    return [row[3] for row in store._conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


def test_listing_and_purging_are_served_by_indexes(store: SQLiteArtifactStore) -> None:
    # The statements the store runs, planned by this SQLite: each uses the index named (a
    # search, or an ordered walk of the index for the unfiltered page), never a table scan, and
    # never an in-memory sort, except a conversation's page: sorted after the index search,
    # bounded by one conversation's artifacts.
    page = "SELECT * FROM artifacts {}ORDER BY created_at, id LIMIT ?"
    after = "(created_at, id) > (?, ?)"
    statements = [
        (page.format(""), (10,), "artifacts_order", False),
        (page.format(f"WHERE {after} "), ("t", "i", 10), "artifacts_order", False),
        (page.format(f"WHERE run_id = ? AND {after} "), ("r", "t", "i", 10),
         "artifacts_run_order", False),
        (page.format("WHERE run_id = ? AND conversation_id = ? "), ("r", "c", 10),
         "artifacts_run_order", False),
        (page.format(f"WHERE conversation_id = ? AND {after} "), ("c", "t", "i", 10),
         "artifacts_conversation", True),
        ("SELECT count(*), coalesce(sum(size), 0) FROM artifacts WHERE expires_at <= ?", ("t",),
         "artifacts_expiry", False),
        ("DELETE FROM artifacts WHERE expires_at <= ?", ("t",), "artifacts_expiry", False),
        ("SELECT 1 FROM artifacts WHERE checksum = ? LIMIT 1", ("c",), "artifacts_checksum",
         False),
    ]
    for sql, params, index, sorted_after in statements:
        plan = _plan(store, sql, params)
        assert f"INDEX {index} " in plan[0] + " ", (sql, plan)
        assert plan[0].startswith("SEARCH") or "WHERE" not in sql, (sql, plan)
        assert any("TEMP B-TREE" in step for step in plan) is sorted_after, (sql, plan)
        assert len(plan) == 1 + sorted_after, (sql, plan)


def test_list_run_is_served_by_the_run_index_and_sorts_only_ties(
    store: SQLiteArtifactStore,
) -> None:
    sql = "SELECT * FROM artifacts WHERE run_id = ? ORDER BY created_at, rowid"
    plan = _plan(store, sql, ("r",))
    assert plan[0].startswith("SEARCH") and "INDEX artifacts_run_order " in plan[0] + " ", plan
    assert plan[1:] == ["USE TEMP B-TREE FOR RIGHT PART OF ORDER BY"], plan


def test_list_run_keeps_insertion_order_when_purge_frees_the_largest_rowid(
    store: SQLiteArtifactStore,
) -> None:
    # The store's clock is fixed: created_at ties throughout, so rowid alone orders the run.
    def put(name: str, expires_at: dt.datetime | None = None) -> ArtifactRecord:
        return store.put(NewArtifact(
                run_id="run-1", origin=ArtifactOrigin.EXPORT, name=name, media_type="text/plain",
                trust=Trust.INTERNAL_TOOL, expires_at=expires_at), name.encode())

    def rowid(record: ArtifactRecord) -> int:
        row = store._conn.execute("SELECT rowid FROM artifacts WHERE id = ?", (record.id,))
        return int(row.fetchone()[0])

    first, second = put("a"), put("b")
    last = put("c", expires_at=T0 + SECOND)
    freed = rowid(last)
    assert store.purge(T0 + SECOND).artifacts == 1
    later = put("d")
    assert rowid(later) == freed  # the purged row's number, taken again...
    assert store.list_run("run-1") == [first, second, later]  # ...still after the live ones


def test_purge_removes_expired_rows_and_only_their_unshared_files(
    store: SQLiteArtifactStore,
) -> None:
    soon = T0 + SECOND
    expired_alone = store.put(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a.txt", media_type="text/plain",
            trust=Trust.INTERNAL_TOOL, expires_at=soon), b"mine alone")
    expired_shared = store.put(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.EXPORT, name="b.txt", media_type="text/plain",
            trust=Trust.INTERNAL_TOOL, expires_at=soon), b"shared")
    kept = store.put(NewArtifact(
            run_id="run-2", origin=ArtifactOrigin.UPLOAD, name="c.txt", media_type="text/plain",
            trust=Trust.USER), b"shared")
    assert content_files(store) == sorted([blob_path(store, expired_alone),
                                           blob_path(store, kept)])
    report = store.purge(soon)
    assert (report.artifacts, report.artifact_bytes) == (2, 16)
    assert (report.content_files, report.freed_bytes, report.staged_uploads) == (1, 10, 0)
    assert content_files(store) == [blob_path(store, kept)]
    assert row_count(store) == 1 and store.read(kept.id) == b"shared"
    assert expired_shared.checksum == kept.checksum


def test_an_interrupted_purge_leaves_no_row_without_content(
    store: SQLiteArtifactStore,
) -> None:
    # A purge killed after its row transaction committed leaves exactly this state: the
    # expired rows gone, their files still there, nothing recording which files they were.
    expired = [write(writer_for(store, f"run-{i}"), content=b"old %d" % i,
                     expires_at=T0 + SECOND) for i in range(3)]
    kept = write(writer_for(store, "run-9"), content=b"kept")
    store._conn.execute("DELETE FROM artifacts WHERE expires_at <= ?",
                        ((T0 + SECOND).isoformat(timespec="microseconds"),))
    assert len(content_files(store)) == 4
    # Every row left still has its content.
    for row in store.list_artifacts():
        assert store.read(row.id)
    # The next purge finds the files nothing references and finishes the job.
    report = store.purge(T0 + SECOND)
    assert (report.artifacts, report.content_files, report.freed_bytes) == (0, 3, 15)
    assert content_files(store) == [blob_path(store, kept)]
    assert [store.read(r.id) for r in store.list_artifacts()] == [b"kept"]
    assert all(blob_path(store, r) not in content_files(store) for r in expired)


def test_purge_leaves_what_it_did_not_write_alone(store: SQLiteArtifactStore) -> None:
    note = store.root / "sha256" / "README"
    note.write_text("an operator's note")
    odd_dir = store.root / "sha256" / "ab" / ("c" * 62)
    odd_dir.mkdir(parents=True)
    report = store.purge(T0 + dt.timedelta(days=1))
    assert (report.content_files, report.staged_uploads) == (0, 0)
    assert note.exists() and odd_dir.is_dir()


def _age(path: Path, when: dt.datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def test_purge_removes_stale_staging_left_by_a_dead_process(tmp_path: Path) -> None:
    store = open_artifact_store(tmp_path, FixedClock(T0))
    # What a process that died mid-upload leaves: a staged upload and a content temp file.
    dead = open_artifact_store(tmp_path, FixedClock(T0))
    abandoned = dead.begin(NewArtifact(
            run_id="run-0", origin=ArtifactOrigin.MODEL_OUTPUT, name="v.mp4",
            media_type="video/mp4", trust=Trust.EXTERNAL_UNTRUSTED), max_bytes=64)
    abandoned.write(b"12345")
    abandoned._file.flush()
    stale_upload = abandoned._tmp
    dead._in_use.clear()  # the process is gone: nothing holds it any more
    stale_tmp = store.root / "sha256" / "ab" / ".0123.tmp"
    stale_tmp.parent.mkdir()
    stale_tmp.write_bytes(b"half a blob")
    # A live process's upload, written to moments ago; and one of this store, idle for long.
    recent = store.root / "sha256" / f".recent{'.upload'}"
    recent.write_bytes(b"still coming")
    mine = store.begin(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.MODEL_OUTPUT, name="w.mp4",
            media_type="video/mp4", trust=Trust.EXTERNAL_UNTRUSTED), max_bytes=64)
    mine.write(b"mine")
    now = T0 + dt.timedelta(days=1)
    for path in (stale_upload, stale_tmp, mine._tmp):
        _age(path, now - dt.timedelta(hours=1))  # untouched for exactly the stale time
    _age(recent, now - dt.timedelta(minutes=59))

    report = store.purge(now)
    assert (report.staged_uploads, report.freed_bytes) == (2, 5 + 11)
    assert not stale_upload.exists() and not stale_tmp.exists()
    assert recent.exists() and mine._tmp.exists()
    assert store.read(mine.commit(now).id) == b"mine"
    abandoned.abort()  # harmless: its file is already gone
    dead.close()
    store.close()


def test_a_write_whose_content_a_purge_took_puts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process purges between a write's check of the existing content file and the
    # write's row: the row must not commit without its content.
    store = open_artifact_store(tmp_path, FixedClock(T0))
    purger = open_artifact_store(tmp_path, FixedClock(T0))
    matches = toolhost._adapters.file_artifacts._file_matches
    purged: list[int] = []

    def check_then_purge(path: Path, size: int, checksum: str) -> bool:
        found = matches(path, size, checksum)
        purged.append(purger.purge(T0 + dt.timedelta(days=1)).content_files)
        return found

    expired = store.put(NewArtifact(
            run_id="run-0", origin=ArtifactOrigin.EXPORT, name="a.bin",
            media_type="application/octet-stream", trust=Trust.USER, expires_at=T0 + SECOND),
        b"contested")
    monkeypatch.setattr(toolhost._adapters.file_artifacts, "_file_matches", check_then_purge)
    whole = store.put(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a.bin",
            media_type="application/octet-stream", trust=Trust.USER), b"contested")
    assert purged == [1]  # the purge took the file after the put had seen it intact
    assert store.read(whole.id) == b"contested"

    store._conn.execute("UPDATE artifacts SET expires_at = ? WHERE id = ?",
                        ((T0 + SECOND).isoformat(timespec="microseconds"), whole.id))
    upload = store.begin(NewArtifact(
            run_id="run-2", origin=ArtifactOrigin.EXPORT, name="a.bin",
            media_type="application/octet-stream", trust=Trust.USER), max_bytes=64)
    upload.write(b"contested")
    streamed = upload.commit(T0)
    assert purged == [1, 1]
    assert store.read(streamed.id) == b"contested"
    assert content_files(store) == [blob_path(store, expired)]  # no staging file left
    purger.close()
    store.close()


def test_a_ref_as_a_tools_result_matches_its_closed_schema() -> None:
    # One shape for every tool that returns a ref (artifact.export, image/video.generate).
    import fastjsonschema

    from toolhost import ArtifactRef

    ref = ArtifactRef(id="a" * 32, name="report.csv", media_type="text/csv", byte_count=3,
                      checksum="sha256:" + "0" * 64)
    assert ref.to_json() == {"id": "a" * 32, "name": "report.csv", "media_type": "text/csv",
                             "byte_count": 3, "checksum": "sha256:" + "0" * 64}
    schema = ArtifactRef.json_schema()
    fastjsonschema.compile(schema)(ref.to_json())
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        fastjsonschema.compile(schema)({**ref.to_json(), "path": "/etc/passwd"})
    schema["properties"].clear()  # a caller's copy: the next one is whole
    assert set(ArtifactRef.json_schema()["properties"]) == set(ref.to_json())
