"""The ArtifactStore, joined from its metadata and its content (``artifact_parts``).

An artifact is a blob a run produced or received (a captured tool output too large for the
model, an export, a model output, an upload) plus the metadata the host needs to hand it
around safely: who made it (run, conversation, principal, origin), what it is (name, media
type), how much to trust it, when it stops counting, and, for an upload, whether the user has
sent it yet (claimed). A tool result or an excerpt marker carries only the small
``ArtifactRef``.

``JoinedArtifactStore`` is the port, once, for every combination the host composes: SQLite
metadata with files (``sqlite_artifacts``, one host's data directory), SQLite with an S3
bucket (``s3_artifacts``) and PostgreSQL with a bucket (``pg_artifacts``, many hosts). It
checks what comes in, keeps the order every write follows (the content first, outside any
transaction; the record after it, in a transaction that puts the content back should a purge
have taken it) and the order purge follows (expired records in one transaction, then the
content no record references, then staged uploads a dead process left), and reads content
verified against its record, raising ``ArtifactCorrupted`` rather than returning bytes that
are not what was stored.
"""

from __future__ import annotations

import datetime as _dt

from toolhost._adapters.artifact_parts import (
    ArtifactContent,
    ArtifactMetadata,
    check_content,
    check_retention,
)
from toolhost._adapters.artifact_rows import records
from toolhost._adapters.artifact_streams import StreamedUpload, VerifiedChunks
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ARTIFACT_CEILING,
    ArtifactCorrupted,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    NewArtifact,
    PurgeReport,
    as_utc,
)
from toolhost._model.digest import sha256_digest
from toolhost._ports.artifacts import LIST_LIMIT, READ_CHUNK, DamagedArtifact
from toolhost._ports.clock import Clock

__all__ = ["JoinedArtifactStore"]


class JoinedArtifactStore:
    """The ``ArtifactStore`` port over ``metadata`` and ``content``, creating at ``clock``.

    The store owns both parts: ``close()`` closes them. ``retention`` is configuration
    (``ArtifactStore.retention``), never applied by the store's own methods.
    """

    def __init__(self, metadata: ArtifactMetadata, content: ArtifactContent, clock: Clock,
                 *, retention: _dt.timedelta | None = None) -> None:
        self.metadata = metadata
        self.content = content
        self._clock = clock
        self._retention = check_retention(retention)

    @property
    def retention(self) -> _dt.timedelta | None:
        """See ``ArtifactStore.retention``."""
        return self._retention

    # -- writes --------------------------------------------------------------------------------

    def put(self, new: NewArtifact, content: bytes) -> ArtifactRecord:
        """See ``ArtifactStore.put``. Stores the content (if new) before the record."""
        return self._store(new, content, None)

    def put_or_reuse(self, new: NewArtifact, content: bytes, *,
                     now: _dt.datetime) -> ArtifactRecord:
        """See ``ArtifactStore.put_or_reuse``."""
        return self._store(new, content, as_utc(now))

    def _store(self, new: NewArtifact, content: bytes,
               now: _dt.datetime | None) -> ArtifactRecord:
        # Created at the clock's instant without ``now`` (``put``), else under the identity
        # rule at ``now``: one write reads one instant, for liveness and creation alike.
        _check_new(new)
        check_content(content)
        created_at = now if now is not None else as_utc(self._clock.now())
        checksum = sha256_digest(content)
        record = new.record(new_id(), len(content), checksum, created_at)
        place = self.content.put(checksum, content)
        return self.metadata.record(record, reuse=now is not None, place=place)

    def begin(self, new: NewArtifact, *, max_bytes: int) -> StreamedUpload:
        """See ``ArtifactStore.begin``. The content stages at once (a file created, or a
        buffer), so a full or read-only disk fails here rather than after the caller started
        producing bytes."""
        _check_new(new)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError(f"max_bytes must be an int, got {type(max_bytes).__name__}")
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        return self.content.begin(new, min(max_bytes, ARTIFACT_CEILING), self.metadata)

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.claim``."""
        return self.metadata.claim(artifact_id)

    # -- reads ---------------------------------------------------------------------------------

    def get(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.get``."""
        return self.metadata.get(artifact_id)

    def read(self, artifact_id: str) -> bytes:
        """See ``ArtifactStore.read``: the content as one verified chunk. Content found
        missing or wrong under a record a purge has taken since is not found (``_gone``)."""
        record = self.get(artifact_id)
        try:
            return b"".join(self.content.chunks(record, max(record.size, 1)))
        except ArtifactCorrupted:
            self._gone(record.id)
            raise

    def read_chunks(self, artifact_id: str, chunk_size: int = READ_CHUNK) -> VerifiedChunks:
        """See ``ArtifactStore.read_chunks``. The content is opened here, read lazily;
        content found missing under a record a purge has taken since is not found
        (``_gone``)."""
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise TypeError(f"chunk_size must be an int, got {type(chunk_size).__name__}")
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        record = self.get(artifact_id)
        try:
            return self.content.chunks(record, chunk_size)
        except ArtifactCorrupted:
            self._gone(record.id)
            raise

    def _gone(self, artifact_id: str) -> None:
        """After a read of ``artifact_id``'s record found its content missing or wrong:
        ``ArtifactNotFound`` if the record is gone now, so the caller re-raises the
        corruption only when the record is still there (D363).

        A purge takes the record first and the content after it, so content missing under a
        record the read had just found, whose record is now gone, was purged in between
        (another host's purge too), not damaged: every reader (the resolver, ``resources/
        read``, ``toolhost artifacts get``) is told the file is not there, and no operator is
        alarmed. A record damaged meanwhile (D252) is still the alarm; whatever else the
        metadata raises (its outage) propagates."""
        try:
            self.metadata.get(artifact_id)
        except ArtifactNotFound:
            raise ArtifactNotFound(artifact_id) from None
        except ArtifactCorrupted:
            pass

    def find_live(
        self,
        *,
        run_id: str,
        conversation_id: str | None,
        principal_id: str | None,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        checksum: str,
        now: _dt.datetime,
    ) -> ArtifactRecord | None:
        """See ``ArtifactStore.find_live``."""
        return self.metadata.find_live(run_id, conversation_id, principal_id, origin, name,
                                       media_type, checksum, as_utc(now))

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_run``."""
        return self.metadata.list_run(run_id)

    def list_artifacts(
        self,
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        limit: int = LIST_LIMIT,
        after: str | None = None,
    ) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_artifacts``: ``list_rows``' records."""
        return records(self.list_rows(run_id=run_id, conversation_id=conversation_id,
                                      limit=limit, after=after))

    def list_rows(
        self,
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        limit: int = LIST_LIMIT,
        after: str | None = None,
    ) -> list[ArtifactRecord | DamagedArtifact]:
        """See ``ArtifactStore.list_rows``."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {type(limit).__name__}")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        filters: list[tuple[str, str]] = []
        for column, value in (("run_id", run_id), ("conversation_id", conversation_id)):
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise ValueError(f"{column} must be None or a non-empty string")
                filters.append((column, value))
        return self.metadata.list_rows(filters, limit, after)

    def ready(self) -> bool:
        """Whether the store answers now (``GET /readyz``): one row of the metadata read,
        raising as that read does. Content with a server of its own (a bucket) is asked too,
        by the store that joins it (``S3ArtifactStore``, ``PostgresS3ArtifactStore``); files
        under the data directory have none to ask."""
        self.metadata.list_rows([], 1, None)
        return True

    # -- purge and lifecycle -------------------------------------------------------------------

    def purge(self, now: _dt.datetime) -> PurgeReport:
        """See ``ArtifactStore.purge``: records, then content, then staging, in that order."""
        now = as_utc(now)
        expired, expired_bytes = self.metadata.delete_expired(now)
        # All the content is looked at, not only the expired records': what an earlier purge
        # (or a write) left unreferenced when its process died goes too.
        removed, removed_bytes = self.content.sweep(self.metadata)
        staged, staged_bytes = self.content.sweep_staging(now)
        return PurgeReport(
            artifacts=expired, artifact_bytes=expired_bytes, content_files=removed,
            staged_uploads=staged, freed_bytes=removed_bytes + staged_bytes,
        )

    def close(self) -> None:
        """Close both parts (each closes only what it opened)."""
        try:
            self.content.close()
        finally:
            self.metadata.close()


def _check_new(new: NewArtifact) -> None:
    # A NewArtifact checked itself when made; anything else (a dict of the old keywords) is
    # refused before any content is stored.
    if not isinstance(new, NewArtifact):
        raise TypeError(f"expected a NewArtifact, got {type(new).__name__}")
