"""The ArtifactStore port: where artifacts live. Every backend passes the contract suite
(``toolhost.testing.ArtifactStoreContract``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from types import TracebackType
from typing import Protocol, runtime_checkable

from toolhost._model.artifacts import ArtifactOrigin, ArtifactRecord, NewArtifact, PurgeReport

__all__ = [
    "LIST_LIMIT",
    "READ_CHUNK",
    "STAGING_STALE_AFTER",
    "ArtifactChunks",
    "ArtifactStore",
    "ArtifactUpload",
    "DamagedArtifact",
]

#: How many records one ``list_artifacts`` page holds unless the caller asks for fewer.
LIST_LIMIT = 100
#: A staged upload untouched this long is abandoned (its process died): ``purge`` removes it.
#: Judged by the upload's last write (a staged file's mtime, an S3 upload's newest part), never
#: by when it began: a stream may run for its tool's whole timeout (a video's is 7,200 s).
STAGING_STALE_AFTER = _dt.timedelta(hours=1)
#: How many bytes one chunk of ``read_chunks`` holds at most unless the caller asks otherwise.
READ_CHUNK = 1024 * 1024

# --------------------------------------------------------------------------------------------
# The port
# --------------------------------------------------------------------------------------------


@runtime_checkable
class ArtifactUpload(Protocol):
    """One streamed artifact in progress (``ArtifactStore.begin``); nothing is visible until
    ``commit``.

    The shape of a multipart upload (create, upload part, complete, abort). ``write`` appends;
    the write that would take the content past the upload's bound raises ``ArtifactTooLarge``
    and aborts. ``commit`` publishes, or aborts and re-raises if publishing fails. Once aborted
    or committed, ``write`` and ``commit`` raise ``ArtifactError`` (``ArtifactTooLarge`` again
    after an over-bound abort); ``abort`` is then a no-op, so a ``finally: abort()`` is always
    safe. Calls may come from different threads, but not concurrently for one upload's data.
    """

    @property
    def bytes_written(self) -> int:
        """How many bytes ``write`` has accepted so far."""
        ...

    def write(self, chunk: bytes) -> None:
        """Append ``chunk`` (``bytes``; anything else is a ``TypeError`` and changes nothing)."""
        ...

    def commit(self, now: _dt.datetime) -> ArtifactRecord:
        """Publish the content under the identity rule, exactly as ``put_or_reuse`` at ``now``.

        When the run holds a live twin, it is returned (its trust lowered if need be) and
        nothing new is stored. Raises ``ValueError`` when the upload's ``expires_at`` is not
        after ``now`` (the upload is then aborted, like every failed commit).
        """
        ...

    def abort(self) -> None:
        """Discard what was written; nothing is published. Idempotent; no-op after commit."""
        ...


@runtime_checkable
class ArtifactChunks(Protocol):
    """One artifact's content, read chunk by chunk (``ArtifactStore.read_chunks``).

    Iterating yields ``bytes`` of at most the chunk size, hashed as they go; the chunk that
    completes the content is handed out only once the size and checksum matched the record,
    so a reader that received every chunk received the verified content. A mismatch raises
    ``ArtifactCorrupted`` (the reasons ``read`` gives) instead of that last chunk; what came
    before it must then be discarded. Closing (or leaving the ``with`` block, or exhausting
    it, or a raise) releases the content; iterating a closed one yields nothing more.
    """

    def __iter__(self) -> Iterator[bytes]: ...

    def __next__(self) -> bytes: ...

    def close(self) -> None:
        """Release the content (a file, a response body). Idempotent."""
        ...

    def __enter__(self) -> ArtifactChunks: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class DamagedArtifact(Protocol):
    """A stored row that cannot be read as an ``ArtifactRecord``: one changed behind the
    store's back (a checksum that is not ``sha256:`` + 64 hex digits, an unknown origin, a
    naive instant, text that does not decode).

    What ``ArtifactStore.list_rows`` lists in the row's place, and what ``get`` (so ``read``,
    ``read_chunks``, ``claim``) raises for its id: an ``ArtifactCorrupted`` that is also this.
    One damaged row never stops the others from being listed or read.
    """

    @property
    def id(self) -> str:
        """The row's id (its cursor in ``list_rows``/``list_artifacts`` like any row's)."""
        ...

    @property
    def field(self) -> str:
        """The first attribute, in the record's order, whose stored value the record refuses
        (``"record"`` when no one value alone is refused). A name, never the value."""
        ...


@runtime_checkable
class ArtifactStore(Protocol):
    """Where artifacts live. Every backend passes ``toolhost._testing.artifact_store_contract``.

    A new artifact arrives as one ``NewArtifact`` (everything but its content, checked when
    made) beside its content. ``put`` always stores a new record; the identity rule is
    ``put_or_reuse``'s (and a streamed upload's commit), which the run-bound ``ArtifactWriter``
    uses and which must be atomic (two concurrent calls for the same identity leave one record).
    """

    @property
    def retention(self) -> _dt.timedelta | None:
        """How long what the run-bound writer stores lives when no expiry is given (the
        writer sets ``expires_at`` to its creation instant plus this); None means it never
        expires. Configuration (``TOOLHOST_ARTIFACT_RETENTION_DAYS``): the store's own
        methods never apply it, so an explicit ``expires_at=None`` still means "never"."""
        ...

    def put(self, new: NewArtifact, content: bytes) -> ArtifactRecord:
        """Store ``content`` as ``new``, a new artifact created at the store's ``clock.now()``.

        Raises ``ArtifactTooLarge`` past ``ARTIFACT_CEILING`` (nothing stored), ``TypeError``
        for a ``new`` that is not a ``NewArtifact`` or content that is not ``bytes``,
        ``ValueError`` for an ``expires_at`` not after the creation instant. What else could
        be wrong with the artifact, ``NewArtifact`` refused when it was made.
        """
        ...

    def put_or_reuse(self, new: NewArtifact, content: bytes, *,
                     now: _dt.datetime) -> ArtifactRecord:
        """The identity rule, atomically: ``find_live`` at ``now``, else ``put`` created at ``now``.

        When ``new.run_id`` holds a live artifact of the same conversation and principal
        (both possibly None) with the same origin, name, media type and checksum, return it
        and store nothing, except that its trust is lowered to ``new.trust`` if that is lower
        (identical bytes arriving from a less trusted source must not inherit the higher
        trust). The twin keeps its own expiry and claim. A run id that two conversations or
        principals share never hands one of them the other's artifact: the resolver would
        refuse it to the caller it was returned to. Otherwise store a new artifact exactly as
        ``put`` would, with ``now`` (aware) as its creation instant.
        """
        ...

    def begin(self, new: NewArtifact, *, max_bytes: int) -> ArtifactUpload:
        """Start streaming ``new``'s content, of at most ``min(max_bytes, ARTIFACT_CEILING)``
        bytes.

        ``TypeError`` for a ``new`` that is not a ``NewArtifact``; ``max_bytes`` must be a
        non-negative int. Whether ``new.expires_at`` is after the creation instant is the
        commit's to check (the instant is its ``now``). Nothing is visible through ``get``,
        ``list_run`` or ``find_live`` until the upload commits.
        """
        ...

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """Mark the artifact claimed (the user sent the upload) and return its record.

        Idempotent; raises ``ArtifactNotFound``.
        """
        ...

    def get(self, artifact_id: str) -> ArtifactRecord:
        """The record for ``artifact_id``; raises ``ArtifactNotFound``, or, for a row that
        cannot be read as a record, an ``ArtifactCorrupted`` that is a ``DamagedArtifact``."""
        ...

    def read(self, artifact_id: str) -> bytes:
        """The content, verified against the record's size and checksum.

        Raises ``ArtifactNotFound`` for an unknown id and ``ArtifactCorrupted`` when the stored
        content is missing or differs from the metadata; never returns unverified bytes.
        Content found missing under a record a purge has taken since (another host's too) is
        ``ArtifactNotFound``, not damage: callers need not ask again (D363, D572).
        Expired artifacts stay readable: expiry decides liveness, not existence.
        """
        ...

    def read_chunks(self, artifact_id: str, chunk_size: int = READ_CHUNK) -> ArtifactChunks:
        """The content as ``read`` verifies it, in chunks of ``chunk_size`` bytes (the last
        one shorter, none empty), so that a reader holds one chunk at a time, never the
        whole artifact.

        Opens the content at once: ``ArtifactNotFound`` for an unknown id and
        ``ArtifactCorrupted`` for missing content are raised here, before any chunk (missing
        under a record purged since: ``ArtifactNotFound``, as ``read``);
        ``TypeError``/``ValueError`` for a ``chunk_size`` that is not a positive int. A size
        or checksum mismatch raises ``ArtifactCorrupted`` while iterating (see
        ``ArtifactChunks``). At most one byte past the recorded size is ever read.
        """
        ...

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
        """The earliest artifact of the run with this identity that is live at ``now``, if any:
        the same conversation and principal (None matching None only), origin, name, media
        type and checksum."""
        ...

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """Every artifact of the run, ordered by ``created_at`` then the order they were
        stored, so artifacts created at the same instant (a fixed clock, one microsecond)
        still list in the order the run made them; never by ``id``, which is random.

        "Stored" is when the record was inserted (a streamed upload's commit, not its
        ``begin``); records inserted concurrently by different writers have no order
        between them but the one the backend serialized them in.

        A row that cannot be read as a record (``DamagedArtifact``) is skipped.
        """
        ...

    def list_artifacts(
        self,
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        limit: int = LIST_LIMIT,
        after: str | None = None,
    ) -> list[ArtifactRecord]:
        """One page of artifacts, ordered by ``created_at`` then ``id``, expired ones included.

        Only the run's and/or the conversation's when given. ``after`` is the last id of the
        previous page: the page starts just past that artifact's place in the order (keyset
        paging, so a page costs the same however deep it is). Raises ``ArtifactNotFound`` for
        an ``after`` that is not an artifact, ``TypeError``/``ValueError`` for a ``limit`` that
        is not a positive int.

        The records of ``list_rows``' page: a row that cannot be read as a record is skipped,
        though it counts toward ``limit`` (so a page may be shorter, or empty, with more
        rows after it; ``list_rows`` shows where).
        """
        ...

    def list_rows(
        self,
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        limit: int = LIST_LIMIT,
        after: str | None = None,
    ) -> list[ArtifactRecord | DamagedArtifact]:
        """``list_artifacts``' page with every row in its place: a row that cannot be read as
        a record is a ``DamagedArtifact`` there, so the operator hears of it and paging goes on
        past it (its id is a cursor like any row's). Arguments and errors are
        ``list_artifacts``'.
        """
        ...

    def purge(self, now: _dt.datetime) -> PurgeReport:
        """Remove every artifact expired at ``now`` (``expires_at <= now``), then every content
        object no remaining artifact references, then staged uploads abandoned by a process
        that died (untouched for ``STAGING_STALE_AFTER`` before ``now``; never one this store
        instance still has open).

        Crash-safe in that order: records go first, in one transaction, and content only once
        nothing references it, so an interrupted purge leaves unreferenced content (which the
        next purge removes), never a record without content. A write racing the purge keeps
        its content: a content object is only removed while no record references it, and a
        write that finds its content gone puts it back before its record commits. ``now``
        must be aware (``ValueError``); the store reads no time of its own.
        """
        ...

