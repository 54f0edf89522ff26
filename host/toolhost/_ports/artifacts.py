"""The ArtifactStore port: where artifacts live. Every backend passes the contract suite
(``toolhost.testing.ArtifactStoreContract``).
"""

from __future__ import annotations

import datetime as _dt
from typing import Protocol, runtime_checkable

from toolhost._model.artifacts import ArtifactOrigin, ArtifactRecord
from toolhost._model.spec import Trust

__all__ = [
    "ArtifactStore",
    "ArtifactUpload",
]

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
class ArtifactStore(Protocol):
    """Where artifacts live. Every backend passes ``toolhost._testing.artifact_store_contract``.

    ``put`` always stores a new record; the identity rule is ``put_or_reuse``'s (and a streamed
    upload's commit), which the run-bound ``ArtifactWriter`` uses and which must be atomic (two
    concurrent calls for the same identity leave one record).
    """

    def put(
        self,
        *,
        run_id: str,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        content: bytes,
        trust: Trust,
        conversation_id: str | None = None,
        expires_at: _dt.datetime | None = None,
        principal_id: str | None = None,
        claimed: bool = True,
    ) -> ArtifactRecord:
        """Store ``content`` as a new artifact created at the store's ``clock.now()``.

        Raises ``ArtifactTooLarge`` past ``ARTIFACT_CEILING`` (nothing stored), ``TypeError``
        for content that is not ``bytes``, an origin/trust that is not the enum or a ``claimed``
        that is not a bool, ``ValueError`` for an empty name, run, conversation or principal id,
        a malformed media type, or an ``expires_at`` that is naive or not after the creation
        instant. An upload the user has not sent yet is stored with ``claimed=False``.
        """
        ...

    def put_or_reuse(
        self,
        *,
        run_id: str,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        content: bytes,
        trust: Trust,
        now: _dt.datetime,
        conversation_id: str | None = None,
        expires_at: _dt.datetime | None = None,
        principal_id: str | None = None,
        claimed: bool = True,
    ) -> ArtifactRecord:
        """The identity rule, atomically: ``find_live`` at ``now``, else ``put`` created at ``now``.

        When the run holds a live artifact with the same origin, name, media type and checksum,
        return it and store nothing, except that its trust is lowered to ``trust`` if that is
        lower (identical bytes arriving from a less trusted source must not inherit the higher
        trust). The twin keeps its own expiry, principal and claim. Otherwise store a new
        artifact exactly as ``put`` would, with ``now`` as its creation instant.
        """
        ...

    def begin(
        self,
        *,
        run_id: str,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        trust: Trust,
        max_bytes: int,
        conversation_id: str | None = None,
        principal_id: str | None = None,
        expires_at: _dt.datetime | None = None,
        claimed: bool = True,
    ) -> ArtifactUpload:
        """Start a streamed artifact of at most ``min(max_bytes, ARTIFACT_CEILING)`` bytes.

        Validates everything ``put`` validates except the content (and whether ``expires_at``
        is after the creation instant, which is the commit's ``now``); ``max_bytes`` must be a
        non-negative int. Nothing is visible through ``get``, ``list_run`` or ``find_live``
        until the upload commits.
        """
        ...

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """Mark the artifact claimed (the user sent the upload) and return its record.

        Idempotent; raises ``ArtifactNotFound``.
        """
        ...

    def get(self, artifact_id: str) -> ArtifactRecord:
        """The record for ``artifact_id``; raises ``ArtifactNotFound``."""
        ...

    def read(self, artifact_id: str) -> bytes:
        """The content, verified against the record's size and checksum.

        Raises ``ArtifactNotFound`` for an unknown id and ``ArtifactCorrupted`` when the stored
        content is missing or differs from the metadata; never returns unverified bytes.
        Expired artifacts stay readable: expiry decides liveness, not existence.
        """
        ...

    def find_live(
        self,
        *,
        run_id: str,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        checksum: str,
        now: _dt.datetime,
    ) -> ArtifactRecord | None:
        """The earliest artifact of the run with this identity that is live at ``now``, if any."""
        ...

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """Every artifact of the run, ordered by ``created_at`` then ``id``."""
        ...

