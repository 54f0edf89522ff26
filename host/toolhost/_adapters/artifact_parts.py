"""The two parts an artifact store is joined from (``toolhost._adapters.artifact_store``):
its metadata (the ``artifacts`` table: SQLite, PostgreSQL) and its content (bytes by sha256
address: files, an S3 bucket), and what passes between them.

The metadata decides everything about a record (the identity rule, claims, listings, what
has expired) in transactions of its own; the content stores and reads bytes. They meet at
two points, both inside a metadata transaction, which is what keeps a record from ever
committing without its content:

- a write: ``ArtifactMetadata.record`` runs the content's ``place`` just before the insert,
  which makes sure the content is at its address (a purge may have taken it meanwhile);
- purge: ``ArtifactContent.sweep`` lists what it holds and hands it to
  ``ArtifactMetadata.sweep``, which removes only what no row references, in a transaction
  that keeps writers of that content out.

A new artifact travels as one value, the port's ``NewArtifact`` (``toolhost._model.artifacts``),
checked when it is made. What every content shares (verified reads, the upload's
bookkeeping) is ``artifact_streams``'.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from toolhost._model.artifacts import (
    ARTIFACT_CEILING,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactTooLarge,
    NewArtifact,
)
from toolhost._ports.artifacts import DamagedArtifact

if TYPE_CHECKING:
    from toolhost._adapters.artifact_streams import StreamedUpload, VerifiedChunks

__all__ = [
    "ArtifactContent",
    "ArtifactMetadata",
    "Place",
    "check_content",
    "check_retention",
]

#: Run inside the metadata's write transaction, just before the insert: puts the content at
#: its address if it is not there (see the module docstring).
Place = Callable[[], None]
_Item = TypeVar("_Item")


class ArtifactMetadata(Protocol):
    """The ``artifacts`` table: records, their identity rule, and the transactions that keep
    a record from committing without its content."""

    @property
    def database(self) -> Path:
        """The database as a ``StoreUnavailable`` names it (never with a password)."""
        ...

    def record(self, new: ArtifactRecord, *, reuse: bool, place: Place) -> ArtifactRecord:
        """Insert ``new`` in one transaction, running ``place`` just before the insert. With
        ``reuse``, the identity rule first (``put_or_reuse``, at ``new.created_at``): the live
        twin is returned instead, its trust lowered to ``new.trust`` if that is lower, and
        neither ``place`` runs nor anything is inserted."""
        ...

    def claim(self, artifact_id: str) -> ArtifactRecord: ...

    def get(self, artifact_id: str) -> ArtifactRecord: ...

    def find_live(self, run_id: str, conversation_id: str | None, principal_id: str | None,
                  origin: ArtifactOrigin, name: str, media_type: str, checksum: str,
                  now: _dt.datetime) -> ArtifactRecord | None:
        """The earliest record of the run with this identity live at ``now`` (UTC)."""
        ...

    def list_run(self, run_id: str) -> list[ArtifactRecord]: ...

    def list_rows(self, filters: Sequence[tuple[str, str]], limit: int,
                  after: str | None) -> list[ArtifactRecord | DamagedArtifact]:
        """``ArtifactStore.list_rows`` with its arguments checked: ``filters`` are (column,
        value) pairs of ``run_id``/``conversation_id``."""
        ...

    def delete_expired(self, now: _dt.datetime) -> tuple[int, int]:
        """Delete every record expired at ``now`` in one transaction: (records, their bytes)."""
        ...

    def sweep(self, items: Sequence[tuple[str, _Item]],
              remove: Callable[[_Item], int | None]) -> tuple[int, int]:
        """For each (checksum, item) no record references, ``remove(item)`` (the bytes it
        freed, None when it removed nothing), inside a transaction that keeps out a write of
        that checksum: (items removed, bytes freed)."""
        ...

    def store_id(self, location: str) -> str:
        """This database's id for a content ``location`` (an S3 prefix), made on first use."""
        ...

    def issued(self, store_id: str) -> bool:
        """Whether ``store_id`` is one this database gave a location (``store_id``): a marker
        naming it marks content this database wrote, wherever the prefix was copied."""
        ...

    def bound_location(self) -> str | None:
        """The content location (an S3 prefix) this database's records are bound to: their
        content is there. None until a store first binds it (``bind_location``)."""
        ...

    def bind_location(self, location: str, *, moved_from: str | None = None) -> str:
        """Bind the database to ``location`` if it is bound to none, in one transaction; with
        ``moved_from``, rebind it from that location to ``location`` (its content and marker
        were copied there), giving ``location`` a store id of its own, so that the marker left
        at ``moved_from`` no longer names this database's. Returns the location the database
        is bound to afterwards: another one when another start won."""
        ...

    def close(self) -> None: ...


class ArtifactContent(Protocol):
    """Bytes by sha256 address: what a record's ``checksum`` names."""

    def put(self, checksum: str, content: bytes) -> Place:
        """Store ``content`` at its address, outside any transaction (a crash leaves content
        nothing references, never a record without content), and return what puts it back
        inside the record's transaction should a purge take it meanwhile."""
        ...

    def chunks(self, record: ArtifactRecord, chunk_size: int) -> VerifiedChunks:
        """``record``'s content opened, as verified chunks; ``ArtifactCorrupted`` when it is
        missing."""
        ...

    def begin(self, new: NewArtifact, limit: int, metadata: ArtifactMetadata) -> StreamedUpload:
        """A streamed upload of at most ``limit`` bytes, published into ``metadata``."""
        ...

    def sweep(self, metadata: ArtifactMetadata) -> tuple[int, int]:
        """Remove the content no record references (``ArtifactMetadata.sweep``): (count,
        bytes)."""
        ...

    def sweep_staging(self, now: _dt.datetime) -> tuple[int, int]:
        """Remove staged uploads a dead process left (``STAGING_STALE_AFTER``): (count,
        bytes)."""
        ...

    def close(self) -> None: ...


def check_content(content: bytes) -> None:
    """``put``'s checks of the content. Size first: it costs nothing, and a too-large content
    must not be hashed or written."""
    if not isinstance(content, bytes):
        raise TypeError(f"artifact content must be bytes, got {type(content).__name__}")
    if len(content) > ARTIFACT_CEILING:
        raise ArtifactTooLarge(len(content), ARTIFACT_CEILING)


def check_retention(retention: _dt.timedelta | None) -> _dt.timedelta | None:
    """``retention`` as the port takes it. :raises TypeError, ValueError:"""
    if retention is None:
        return None
    if not isinstance(retention, _dt.timedelta):
        raise TypeError(f"retention must be a timedelta or None, got {retention!r}")
    if retention <= _dt.timedelta(0):
        raise ValueError("retention must be positive (None keeps artifacts forever)")
    return retention
