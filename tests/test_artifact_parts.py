"""The artifact store as two parts joined (``toolhost._adapters.artifact_parts``,
``artifact_store``): metadata and content, each replaceable.

The three compositions the host makes (SQLite and files, SQLite and S3, PostgreSQL and S3) run
the contract in their own test files. Here a content kept in memory, joined with the SQLite
metadata, passes the same contract: the seam (``ArtifactContent``, ``ArtifactMetadata``) is all
a store is made of. And no composition inherits from another.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from toolhost._adapters.artifact_parts import ArtifactMetadata, Place
from toolhost._adapters.artifact_store import JoinedArtifactStore
from toolhost._adapters.artifact_streams import StreamedUpload, VerifiedChunks
from toolhost._adapters.s3_artifacts import S3ArtifactStore
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactMetadata, SQLiteArtifactStore
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._model.artifacts import ArtifactCorrupted, ArtifactOrigin, ArtifactRecord, NewArtifact
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._testing.artifact_store_contract import T0, ArtifactStoreContract
from toolhost._testing.clocks import FixedClock


class MemoryContent:
    """``ArtifactContent`` in a dict, by checksum: the least a content can be."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, checksum: str, content: bytes) -> Place:
        self.blobs[checksum] = content

        def place() -> None:
            self.blobs.setdefault(checksum, content)

        return place

    def chunks(self, record: ArtifactRecord, chunk_size: int) -> VerifiedChunks:
        if record.checksum not in self.blobs:
            raise ArtifactCorrupted(record.id, "the content is missing")
        body = io.BytesIO(self.blobs[record.checksum])
        return VerifiedChunks(record, body.read, body.close, chunk_size, failed=lambda e: e)

    def begin(self, new: NewArtifact, limit: int, metadata: ArtifactMetadata) -> StreamedUpload:
        return MemoryUpload(self, new, limit, metadata)

    def sweep(self, metadata: ArtifactMetadata) -> tuple[int, int]:
        return metadata.sweep([(c, c) for c in sorted(self.blobs)],
                              lambda checksum: len(self.blobs.pop(checksum)))

    def sweep_staging(self, now: dt.datetime) -> tuple[int, int]:
        return 0, 0  # nothing outlives its upload

    def close(self) -> None:
        pass


class MemoryUpload(StreamedUpload):
    def __init__(self, content: MemoryContent, new: NewArtifact, limit: int,
                 metadata: ArtifactMetadata) -> None:
        super().__init__(new, limit, metadata)
        self._content = content
        self._parts: list[bytes] = []

    def _stage_chunk(self, chunk: bytes, total: int) -> None:
        self._parts.append(chunk)

    def _staged(self, checksum: str) -> Place:
        return self._content.put(checksum, b"".join(self._parts))

    def _discard(self) -> None:
        self._state = "aborted"
        self._parts = []


def _joined(tmp_path: Path, clock: Clock) -> JoinedArtifactStore:
    metadata = SQLiteArtifactMetadata(connect(tmp_path / DATABASE_NAME), owns_connection=True)
    return JoinedArtifactStore(metadata, MemoryContent(), clock)


class TestSQLiteWithMemoryContentContract(ArtifactStoreContract):
    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        return _joined(tmp_path, clock)

    def damage_content(self, store: ArtifactStore, record: ArtifactRecord,
                       stored: bytes | None) -> None:
        assert isinstance(store, JoinedArtifactStore)
        assert isinstance(store.content, MemoryContent)
        if stored is None:
            del store.content.blobs[record.checksum]
        else:
            store.content.blobs[record.checksum] = stored


@pytest.fixture
def joined(tmp_path: Path) -> Iterator[JoinedArtifactStore]:
    store = _joined(tmp_path, FixedClock(T0))
    yield store
    store.close()


def test_a_new_artifact_is_one_value_through_the_identity_rule(
        joined: JoinedArtifactStore) -> None:
    new = NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a.txt",
                      media_type="text/plain", trust=Trust.USER)
    first = joined.put_or_reuse(new, b"hello", now=T0)
    lowered = joined.put_or_reuse(attrs.evolve(new, trust=Trust.EXTERNAL_UNTRUSTED), b"hello",
                                  now=T0)
    assert lowered.id == first.id and lowered.trust is Trust.EXTERNAL_UNTRUSTED
    assert joined.put_or_reuse(new, b"hello", now=T0) == lowered
    assert joined.put(new, b"hello").id != first.id  # ``put`` never reuses


def test_a_new_artifact_refuses_what_put_refuses() -> None:
    with pytest.raises(ValueError, match="media_type"):
        NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a",
                    media_type="plain", trust=Trust.USER)
    new = NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a",
                      media_type="text/plain", trust=Trust.USER, expires_at=T0)
    # Checked whenever made, a changed copy too: no store ever holds an unchecked one.
    with pytest.raises(TypeError, match="origin"):
        attrs.evolve(new, origin="EXPORT")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="naive"):
        attrs.evolve(new, expires_at=dt.datetime(2026, 7, 26))
    with pytest.raises(ValueError, match="expires_at"):
        new.record("id", 0, "sha256:" + "0" * 64, T0)


@pytest.mark.parametrize("composed", [SQLiteArtifactStore, S3ArtifactStore])
def test_no_composition_inherits_from_another(composed: type) -> None:
    assert composed.__mro__ == (composed, JoinedArtifactStore, object)


def test_the_postgresql_composition_inherits_from_no_other() -> None:
    pg_artifacts = pytest.importorskip("toolhost._adapters.pg_artifacts")
    composed = pg_artifacts.PostgresS3ArtifactStore
    assert composed.__mro__ == (composed, JoinedArtifactStore, object)
