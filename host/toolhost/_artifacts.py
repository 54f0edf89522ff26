"""The ArtifactStore port, its SQLite backend, the run-bound ArtifactWriter, and the resolver.

An artifact is a blob a run produced or received (a captured tool output too large for the model,
an export, a model output, an upload) plus the metadata the host needs to hand it around safely:
who made it (run, conversation, principal, origin), what it is (name, media type), how much to
trust it, when it stops counting, and, for an upload, whether the user has sent it yet (claimed).
A tool result or an excerpt marker carries only the small ``ArtifactRef``.

The default backend stores content by address: the file for content with sha256 ``h`` lives at
``<root>/sha256/<h[:2]>/<h[2:]>``, so identical bytes are on disk once however many runs write
them, and a file's own path says what its bytes must hash to. Metadata lives in the ``artifacts``
table of the shared SQLite database (``toolhost._db``). Reads verify size and checksum against the
metadata and raise ``ArtifactCorrupted`` rather than return bytes that are not what was stored.

Content arrives whole (``put``) or streamed (``begin`` → ``ArtifactUpload``): a stream is staged
aside and publishes only on ``commit``, so an aborted or failed stream leaves no artifact. The
shape (begin, write parts, commit or abort) is a multipart upload's, so an object-store backend
maps onto it directly.

Writers go through ``ArtifactWriter``, which is bound to one run (and its principal) and applies
the identity rule: the same (origin, name, media type, content) written twice while the first is
still live returns the first ref and stores nothing. Readers on behalf of a tool go through
``ArtifactResolver``, which decides from the metadata alone, before any content is opened,
whether the caller may see an artifact at all (DESIGN §8.1).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, Protocol, runtime_checkable

import attrs

from toolhost._clock import Clock
from toolhost._db import DATABASE_NAME, Migration, connect, migrate
from toolhost._determinism import new_id
from toolhost._digest import sha256_checksum, sha256_digest
from toolhost._spec import Trust

__all__ = [
    "ARTIFACT_CEILING",
    "MIGRATIONS",
    "ArtifactCorrupted",
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactOrigin",
    "ArtifactRecord",
    "ArtifactRef",
    "ArtifactResolver",
    "ArtifactStore",
    "ArtifactStream",
    "ArtifactTooLarge",
    "ArtifactUnavailable",
    "ArtifactUpload",
    "ArtifactWriter",
    "SQLiteArtifactStore",
    "SQLiteArtifactUpload",
    "open_artifact_store",
]

#: The largest artifact any store accepts: 512 MiB (536,870,912 bytes). ``put`` refuses more with
#: ``ArtifactTooLarge`` before hashing or writing anything, and a stream refuses the write that
#: would cross it. The pipeline's own output ceiling (8 MiB, DESIGN §4 step 12) and the media
#: tools' 256 MiB streams are below it; this bound exists so that no caller, however buggy, can
#: fill the data directory or the process's memory through one artifact.
ARTIFACT_CEILING = 512 * 1024 * 1024

_UTC = _dt.UTC
_CHECKSUM = re.compile(r"^sha256:[0-9a-f]{64}$")
# type "/" subtype, optionally followed by parameters; deliberately loose (RFC 6838 tokens).
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;.*)?$")
_READ_CHUNK = 1024 * 1024
# Staged uploads live beside the shards (same filesystem, so publishing is a rename) under a
# name no content address can have: content files are named by hex digits only.
_STAGED_SUFFIX = ".upload"


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class ArtifactError(Exception):
    """Base class of every artifact store failure."""


class ArtifactNotFound(ArtifactError, LookupError):
    """No artifact has this id."""

    def __init__(self, artifact_id: str) -> None:
        super().__init__(f"no artifact with id {artifact_id!r}")
        self.artifact_id = artifact_id


class ArtifactCorrupted(ArtifactError):
    """The stored content no longer matches its metadata (changed, truncated or missing).

    Raised instead of returning bytes: a reader never receives content that differs from what
    was written. ``reason`` is operator detail; it never contains the content itself.
    """

    def __init__(self, artifact_id: str, reason: str) -> None:
        super().__init__(f"artifact {artifact_id!r} is corrupted: {reason}")
        self.artifact_id = artifact_id
        self.reason = reason


class ArtifactTooLarge(ArtifactError, ValueError):
    """The content is larger than the bound in force; nothing was stored.

    The bound is ``ARTIFACT_CEILING`` for ``put``, and the lower of that and the stream's
    ``max_bytes`` for a streamed upload (which is aborted by the write that crossed it).
    """

    def __init__(self, size: int, ceiling: int) -> None:
        super().__init__(f"artifact of {size} bytes exceeds the ceiling of {ceiling} bytes")
        self.size = size
        self.ceiling = ceiling


class ArtifactUnavailable(ArtifactError):
    """The resolver refused an artifact: it does not exist for this caller, or may not be read.

    One type for every refusal, so a caller cannot tell the model (or branch on) "exists but is
    not yours" apart from "does not exist"; the model only ever sees a static message. ``reason``
    is one of ``REASONS`` and is operator detail, for logs and the invocation row.
    """

    REASONS: ClassVar[frozenset[str]] = frozenset({
        "not_found",  # no artifact has this id
        "foreign_principal",  # it belongs to another principal (or to none)
        "other_conversation",  # the caller has a conversation and it is not the artifact's
        "other_run",  # the caller has no conversation and the artifact is not its run's
        "expired",  # not live at the resolver's clock
        "ineligible_origin",  # a captured tool output: never referenceable
        "unclaimed_upload",  # an upload the user has not sent yet
        "too_large",  # larger than the read's bound
    })

    def __init__(self, artifact_id: str, reason: str) -> None:
        if reason not in self.REASONS:
            raise ValueError(f"unknown unavailability reason {reason!r}")
        super().__init__(f"artifact {artifact_id!r} is unavailable: {reason}")
        self.artifact_id = artifact_id
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------


class ArtifactOrigin(enum.Enum):
    """How an artifact came to exist."""

    TOOL_OUTPUT_CAPTURE = "TOOL_OUTPUT_CAPTURE"  # the pipeline's step 12 captured a tool output
    EXPORT = "EXPORT"  # a tool exported something for the user
    MODEL_OUTPUT = "MODEL_OUTPUT"  # the model produced it
    UPLOAD = "UPLOAD"  # the user supplied it


def _as_utc(value: _dt.datetime) -> _dt.datetime:
    # A naive datetime would smuggle the process's local zone in; refuse it like the Clock does.
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("artifact timestamps must be aware datetimes; got a naive one")
    return value.astimezone(_UTC)


def _as_utc_or_none(value: _dt.datetime | None) -> _dt.datetime | None:
    return None if value is None else _as_utc(value)


def _check_checksum(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not _CHECKSUM.match(value):
        raise ValueError(f"{attribute.name} must be 'sha256:' + 64 lowercase hex digits")


def _check_size(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative int")


def _nonempty_str(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string")


@attrs.frozen(kw_only=True)
class ArtifactRef:
    """The small handle a tool result or an excerpt marker carries instead of the content."""

    id: str = attrs.field(validator=_nonempty_str)
    name: str = attrs.field(validator=_nonempty_str)
    media_type: str = attrs.field(validator=_nonempty_str)
    byte_count: int = attrs.field(validator=_check_size)
    checksum: str = attrs.field(validator=_check_checksum)


@attrs.frozen(kw_only=True)
class ArtifactRecord:
    """Everything the store knows about one artifact. Timestamps are aware UTC.

    ``expires_at`` of None means the artifact never expires. Expiry only decides liveness (the
    identity rule and the resolver ignore expired artifacts); it does not delete content.
    ``principal_id`` is who the writing run acted for (None when the writer was not told).
    ``claimed`` is False only for an upload the user has not sent yet; the resolver refuses
    such an upload until ``ArtifactStore.claim``.
    """

    id: str = attrs.field(validator=_nonempty_str)
    run_id: str = attrs.field(validator=_nonempty_str)
    conversation_id: str | None = attrs.field(
        validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    origin: ArtifactOrigin = attrs.field(validator=attrs.validators.instance_of(ArtifactOrigin))
    name: str = attrs.field(validator=_nonempty_str)
    media_type: str = attrs.field(validator=_nonempty_str)
    size: int = attrs.field(validator=_check_size)
    checksum: str = attrs.field(validator=_check_checksum)
    trust: Trust = attrs.field(validator=attrs.validators.instance_of(Trust))
    created_at: _dt.datetime = attrs.field(converter=_as_utc)
    expires_at: _dt.datetime | None = attrs.field(default=None, converter=_as_utc_or_none)
    principal_id: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    claimed: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))

    @property
    def ref(self) -> ArtifactRef:
        """The handle to give out for this artifact."""
        return ArtifactRef(
            id=self.id,
            name=self.name,
            media_type=self.media_type,
            byte_count=self.size,
            checksum=self.checksum,
        )

    def live_at(self, now: _dt.datetime) -> bool:
        """Whether the artifact is live at ``now``: never expiring, or expiring after ``now``.

        An artifact whose ``expires_at`` equals ``now`` is already expired.
        """
        return self.expires_at is None or self.expires_at > _as_utc(now)


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
    """Where artifacts live. Every backend passes ``toolhost._artifact_contract``.

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


# --------------------------------------------------------------------------------------------
# The SQLite backend
# --------------------------------------------------------------------------------------------

#: The ``artifacts`` component's schema. Timestamps are ISO 8601 text in UTC with fixed
#: microsecond precision, so text order is time order and SQL can compare them directly.
MIGRATIONS = (
    Migration(
        "artifacts",
        1,
        """
        CREATE TABLE artifacts (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            conversation_id TEXT,
            origin TEXT NOT NULL,
            name TEXT NOT NULL,
            media_type TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 0),
            checksum TEXT NOT NULL,
            trust TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT
        );
        CREATE INDEX artifacts_identity
            ON artifacts (run_id, origin, name, media_type, checksum);
        CREATE INDEX artifacts_run_order ON artifacts (run_id, created_at, id)
        """,
    ),
    # Principal and claim, for the conversation-scoped resolver. Rows written before this
    # version had no notion of either: they keep no principal (so the resolver refuses them,
    # failing closed) and count as claimed (none of them is an unsent upload). The index serves
    # what a conversation may reference: its principal's artifacts, in creation order.
    Migration(
        "artifacts",
        2,
        """
        ALTER TABLE artifacts ADD COLUMN principal_id TEXT;
        ALTER TABLE artifacts ADD COLUMN claimed INTEGER NOT NULL DEFAULT 1
            CHECK (claimed IN (0, 1));
        CREATE INDEX artifacts_conversation
            ON artifacts (conversation_id, principal_id, created_at, id)
        """,
    ),
)

_COLUMNS = (
    "id, run_id, conversation_id, origin, name, media_type, size, checksum, trust, "
    "created_at, expires_at, principal_id, claimed"
)
_PLACEHOLDERS = ", ".join("?" * len(_COLUMNS.split(", ")))


def _ts(value: _dt.datetime) -> str:
    return value.astimezone(_UTC).isoformat(timespec="microseconds")


def _ts_or_none(value: _dt.datetime | None) -> str | None:
    return None if value is None else _ts(value)


def _from_row(row: tuple[Any, ...]) -> ArtifactRecord:
    (id_, run_id, conversation_id, origin, name, media_type, size, checksum, trust,
     created_at, expires_at, principal_id, claimed) = row
    return ArtifactRecord(
        id=id_,
        run_id=run_id,
        conversation_id=conversation_id,
        origin=ArtifactOrigin(origin),
        name=name,
        media_type=media_type,
        size=size,
        checksum=checksum,
        trust=Trust(trust),
        created_at=_dt.datetime.fromisoformat(created_at),
        expires_at=None if expires_at is None else _dt.datetime.fromisoformat(expires_at),
        principal_id=principal_id,
        claimed=bool(claimed),
    )


def _fsync_dir(path: Path) -> None:
    # Makes a rename or a new directory entry durable, not just the file's bytes.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_matches(path: Path, size: int, checksum: str) -> bool:
    """Whether ``path`` holds exactly ``size`` bytes hashing to ``checksum`` (streamed)."""
    digest = hashlib.sha256()
    seen = 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(_READ_CHUNK):
                seen += len(chunk)
                if seen > size:
                    return False
                digest.update(chunk)
    except OSError:
        return False
    return seen == size and sha256_checksum(digest) == checksum


@attrs.frozen(kw_only=True)
class _Metadata:
    """Everything about a new artifact except its content, checked once on the way in."""

    run_id: str
    origin: ArtifactOrigin
    name: str
    media_type: str
    trust: Trust
    conversation_id: str | None
    principal_id: str | None
    claimed: bool
    expires_at: _dt.datetime | None


class SQLiteArtifactStore:
    """Content-addressed files under ``root`` plus metadata in the ``artifacts`` table of ``conn``.

    Construction applies the ``artifacts`` migrations (idempotent). ``conn`` is expected to come
    from ``toolhost._db.connect`` (autocommit, WAL); the store runs its own ``BEGIN IMMEDIATE``
    transactions on it and serializes them with a lock, so the store is safe to share between
    threads. Separate connections (or processes) over the same files are safe too: SQLite's
    write lock serializes their transactions and content files are only ever atomically replaced
    with identical bytes.
    """

    def __init__(
        self,
        root: Path,
        conn: sqlite3.Connection,
        clock: Clock,
        *,
        owns_connection: bool = False,
    ) -> None:
        self.root = Path(root)
        self._conn = conn
        self._clock = clock
        self._owns_connection = owns_connection
        # The connection is shared by this store's threads; SQLite has one transaction per
        # connection, so BEGIN..COMMIT blocks must not interleave.
        self._lock = threading.RLock()
        self._blobs = self.root / "sha256"
        self._blobs.mkdir(parents=True, exist_ok=True)
        migrate(conn, MIGRATIONS)

    # -- port ----------------------------------------------------------------------------------

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
        """See ``ArtifactStore.put``. Writes the content file (if new) before the row."""
        _check_content(content)
        meta = _metadata(
            run_id=run_id, origin=origin, name=name, media_type=media_type, trust=trust,
            conversation_id=conversation_id, principal_id=principal_id, claimed=claimed,
            expires_at=expires_at,
        )
        return self._store(meta, content, now=None)

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
        """See ``ArtifactStore.put_or_reuse``. Find and insert share one BEGIN IMMEDIATE."""
        _check_content(content)
        meta = _metadata(
            run_id=run_id, origin=origin, name=name, media_type=media_type, trust=trust,
            conversation_id=conversation_id, principal_id=principal_id, claimed=claimed,
            expires_at=expires_at,
        )
        return self._store(meta, content, now=_as_utc(now))

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
    ) -> SQLiteArtifactUpload:
        """See ``ArtifactStore.begin``. Creates the staging file at once, so a full or
        read-only disk fails here rather than after the caller started producing bytes."""
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError(f"max_bytes must be an int, got {type(max_bytes).__name__}")
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        meta = _metadata(
            run_id=run_id, origin=origin, name=name, media_type=media_type, trust=trust,
            conversation_id=conversation_id, principal_id=principal_id, claimed=claimed,
            expires_at=expires_at,
        )
        return SQLiteArtifactUpload(self, meta, min(max_bytes, ARTIFACT_CEILING))

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.claim``."""
        with self._transaction():
            updated = self._conn.execute(
                "UPDATE artifacts SET claimed = 1 WHERE id = ?", (artifact_id,)
            ).rowcount
            if updated == 0:
                raise ArtifactNotFound(artifact_id)
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE id = ?", (artifact_id,)
            ).fetchone()
        return _from_row(row)

    def get(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.get``."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE id = ?", (artifact_id,)
            ).fetchone()
        if row is None:
            raise ArtifactNotFound(artifact_id)
        return _from_row(row)

    def read(self, artifact_id: str) -> bytes:
        """See ``ArtifactStore.read``."""
        record = self.get(artifact_id)
        path = self._blob_path(record.checksum)
        try:
            with path.open("rb") as f:
                # One byte past the recorded size is enough to tell "too long" without reading
                # whatever a damaged or replaced file might hold.
                data = f.read(record.size + 1)
        except FileNotFoundError:
            raise ArtifactCorrupted(artifact_id, "the content file is missing") from None
        except OSError as exc:
            raise ArtifactCorrupted(artifact_id, f"the content file is unreadable: {exc}") from exc
        if len(data) != record.size:
            got = f"more than {record.size}" if len(data) > record.size else str(len(data))
            raise ArtifactCorrupted(artifact_id, f"size {got} bytes, expected {record.size}")
        if sha256_digest(data) != record.checksum:
            raise ArtifactCorrupted(artifact_id, "checksum mismatch")
        return data

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
        """See ``ArtifactStore.find_live``."""
        with self._lock:
            return self._find_live(run_id, origin, name, media_type, checksum, _as_utc(now))

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_run``."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE run_id = ? ORDER BY created_at, id",
                (run_id,),
            ).fetchall()
        return [_from_row(r) for r in rows]

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection if this store opened it (``open_artifact_store`` without one)."""
        if self._owns_connection:
            self._conn.close()

    # -- internals -----------------------------------------------------------------------------

    def _store(
        self, meta: _Metadata, content: bytes, *, now: _dt.datetime | None
    ) -> ArtifactRecord:
        # `now` is None for a plain put (created at the store's clock, no identity rule) and the
        # writer's instant for put_or_reuse (used both for liveness and as created_at, so one
        # write reads one instant).
        created_at = now if now is not None else _as_utc(self._clock.now())
        _check_expiry(meta, created_at)
        checksum = sha256_digest(content)
        # The file goes first and outside the transaction: a crash between the two leaves an
        # unreferenced file (harmless), never a row without content; and a slow fsync never
        # holds the database's write lock.
        self._ensure_blob(checksum, content)
        return self._record(meta, len(content), checksum, created_at, reuse=now is not None)

    def _record(
        self,
        meta: _Metadata,
        size: int,
        checksum: str,
        created_at: _dt.datetime,
        *,
        reuse: bool,
    ) -> ArtifactRecord:
        """Insert the row for content already on disk; with ``reuse``, the identity rule first."""
        with self._transaction():
            if reuse:
                match = self._find_live(
                    meta.run_id, meta.origin, meta.name, meta.media_type, checksum, created_at
                )
                if match is not None:
                    if meta.trust.rank < match.trust.rank:
                        self._conn.execute(
                            "UPDATE artifacts SET trust = ? WHERE id = ?",
                            (meta.trust.value, match.id),
                        )
                        match = attrs.evolve(match, trust=meta.trust)
                    return match
            record = ArtifactRecord(
                id=new_id(),
                run_id=meta.run_id,
                conversation_id=meta.conversation_id,
                origin=meta.origin,
                name=meta.name,
                media_type=meta.media_type,
                size=size,
                checksum=checksum,
                trust=meta.trust,
                created_at=created_at,
                expires_at=meta.expires_at,
                principal_id=meta.principal_id,
                claimed=meta.claimed,
            )
            self._conn.execute(
                f"INSERT INTO artifacts ({_COLUMNS}) VALUES ({_PLACEHOLDERS})",
                (
                    record.id, record.run_id, record.conversation_id, record.origin.value,
                    record.name, record.media_type, record.size, record.checksum,
                    record.trust.value, _ts(record.created_at), _ts_or_none(record.expires_at),
                    record.principal_id, int(record.claimed),
                ),
            )
            return record

    def _find_live(
        self,
        run_id: str,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        checksum: str,
        now: _dt.datetime,
    ) -> ArtifactRecord | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM artifacts "
            "WHERE run_id = ? AND origin = ? AND name = ? AND media_type = ? AND checksum = ? "
            "AND (expires_at IS NULL OR expires_at > ?) "
            "ORDER BY created_at, id LIMIT 1",
            (run_id, origin.value, name, media_type, checksum, _ts(now)),
        ).fetchone()
        return None if row is None else _from_row(row)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes SQLite's write lock up front, so a find-then-insert cannot race
        # another connection's identical find-then-insert.
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _blob_path(self, checksum: str) -> Path:
        hexdigest = checksum.removeprefix("sha256:")
        return self._blobs / hexdigest[:2] / hexdigest[2:]

    def _shard_for(self, path: Path) -> Path:
        shard = path.parent
        if not shard.is_dir():
            shard.mkdir(exist_ok=True)
            _fsync_dir(self._blobs)
        return shard

    def _ensure_blob(self, checksum: str, content: bytes) -> bool:
        """Make the content file exist with exactly ``content``; True if a file was written.

        An existing file is verified, not trusted: a damaged one is replaced with the good bytes
        (which also repairs every record sharing it). Writes are atomic: a temp file in the same
        directory, fsync, ``os.replace``, fsync of the directory.
        """
        path = self._blob_path(checksum)
        if path.exists() and _file_matches(path, len(content), checksum):
            return False
        shard = self._shard_for(path)
        tmp = shard / f".{new_id()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
            # Concurrent writers of the same content each replace the file with identical
            # bytes; a reader sees either the old complete file or the new complete file.
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        _fsync_dir(shard)
        return True

    def _stage(self) -> tuple[Path, IO[bytes]]:
        """A fresh staging file for an upload, open for writing."""
        tmp = self._blobs / f".{new_id()}{_STAGED_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            return tmp, os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            tmp.unlink()
            raise

    def _publish_staged(self, tmp: Path, size: int, checksum: str) -> None:
        """Move a staged, fsynced file to its content address (or drop it if that is intact).

        Like ``_ensure_blob``: an intact file at the address is kept (the staged copy goes),
        a damaged or missing one is replaced by the rename, atomically.
        """
        path = self._blob_path(checksum)
        if path.exists() and _file_matches(path, size, checksum):
            tmp.unlink()
            return
        shard = self._shard_for(path)
        os.replace(tmp, path)
        _fsync_dir(shard)


class SQLiteArtifactUpload:
    """``ArtifactUpload`` for ``SQLiteArtifactStore``: a staging file hashed as it is written.

    Bytes go straight to a staging file beside the shards while a sha256 is fed chunk by chunk,
    so the content is never held in memory whole. ``commit`` fsyncs it, renames it to its
    content address and only then inserts the row (the order ``put`` uses: a crash leaves at
    worst an unreferenced file, never a row without content). ``abort``, an over-bound write, a
    failed write and a failed commit all close and delete the staging file; no row is inserted.
    A lock serializes the calls, so an abort from another thread (a cancellation) is safe.
    """

    def __init__(self, store: SQLiteArtifactStore, meta: _Metadata, limit: int) -> None:
        self._store = store
        self._meta = meta
        self._limit = limit
        self._lock = threading.Lock()
        self._digest = hashlib.sha256()
        self._written = 0
        self._overflow: int | None = None  # the size an over-bound write would have reached
        self._tmp, self._file = store._stage()
        self._state = "open"  # then "committed" or "aborted", for good

    @property
    def bytes_written(self) -> int:
        """See ``ArtifactUpload.bytes_written``."""
        return self._written

    def write(self, chunk: bytes) -> None:
        """See ``ArtifactUpload.write``."""
        if not isinstance(chunk, bytes):
            raise TypeError(f"artifact content must be bytes, got {type(chunk).__name__}")
        with self._lock:
            self._check_open()
            total = self._written + len(chunk)
            # Checked before the chunk touches the disk: bytes past the bound are never staged.
            if total > self._limit:
                self._overflow = total
                self._discard()
                raise ArtifactTooLarge(total, self._limit)
            try:
                self._file.write(chunk)
            except BaseException:
                # A short write leaves the staged bytes unknown; the digest can no longer be
                # trusted to describe them, so the upload cannot continue.
                self._discard()
                raise
            self._digest.update(chunk)
            self._written = total

    def commit(self, now: _dt.datetime) -> ArtifactRecord:
        """See ``ArtifactUpload.commit``."""
        with self._lock:
            self._check_open()
            try:
                created_at = _as_utc(now)
                _check_expiry(self._meta, created_at)
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                checksum = sha256_checksum(self._digest)
                self._store._publish_staged(self._tmp, self._written, checksum)
                record = self._store._record(
                    self._meta, self._written, checksum, created_at, reuse=True
                )
            except BaseException:
                # The content file may already be at its address: harmless, it is only ever
                # the bytes its name says, and a later write of them reuses it.
                self._discard()
                raise
            self._state = "committed"
            return record

    def abort(self) -> None:
        """See ``ArtifactUpload.abort``."""
        with self._lock:
            if self._state == "open":
                self._discard()

    def __del__(self) -> None:
        # An upload dropped without commit or abort (a caller's bug, a thread that died) must
        # not hold its descriptor and staging file until the process exits. Nobody else can
        # hold the lock once the object is unreachable; a half-built one has no ``_state``.
        if getattr(self, "_state", None) == "open":
            with contextlib.suppress(Exception):
                self._discard()

    def _check_open(self) -> None:
        if self._state == "committed":
            raise ArtifactError("the upload is already committed")
        if self._state == "aborted":
            if self._overflow is not None:
                raise ArtifactTooLarge(self._overflow, self._limit)
            raise ArtifactError("the upload was aborted")

    def _discard(self) -> None:
        self._state = "aborted"
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            self._tmp.unlink()


def _check_content(content: bytes) -> None:
    # Size first: it costs nothing, and a too-large content must not be hashed or written.
    if not isinstance(content, bytes):
        raise TypeError(f"artifact content must be bytes, got {type(content).__name__}")
    if len(content) > ARTIFACT_CEILING:
        raise ArtifactTooLarge(len(content), ARTIFACT_CEILING)


def _metadata(
    *,
    run_id: str,
    origin: ArtifactOrigin,
    name: str,
    media_type: str,
    trust: Trust,
    conversation_id: str | None,
    principal_id: str | None,
    claimed: bool,
    expires_at: _dt.datetime | None,
) -> _Metadata:
    if not isinstance(origin, ArtifactOrigin):
        raise TypeError(f"origin must be an ArtifactOrigin, got {origin!r}")
    if not isinstance(trust, Trust):
        raise TypeError(f"trust must be a Trust, got {trust!r}")
    if not isinstance(claimed, bool):
        raise TypeError(f"claimed must be a bool, got {claimed!r}")
    for label, value in (("run_id", run_id), ("name", name)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{label} must be a non-empty string")
    for label, optional in (("conversation_id", conversation_id), ("principal_id", principal_id)):
        if optional is not None and (not isinstance(optional, str) or not optional):
            raise ValueError(f"{label} must be None or a non-empty string")
    if not isinstance(media_type, str) or not _MEDIA_TYPE.match(media_type):
        raise ValueError(f"media_type must look like 'type/subtype', got {media_type!r}")
    return _Metadata(
        run_id=run_id, origin=origin, name=name, media_type=media_type, trust=trust,
        conversation_id=conversation_id, principal_id=principal_id, claimed=claimed,
        expires_at=_as_utc_or_none(expires_at),
    )


def _check_expiry(meta: _Metadata, created_at: _dt.datetime) -> None:
    if meta.expires_at is not None and meta.expires_at <= created_at:
        raise ValueError("expires_at must be after the artifact's creation instant")


def open_artifact_store(
    data_dir: Path, clock: Clock, conn: sqlite3.Connection | None = None
) -> SQLiteArtifactStore:
    """The default store under a data dir (``TOOLHOST_DATA_DIR``).

    Files go under ``data_dir / "artifacts"``; metadata into ``conn``, or, when none is given,
    into ``data_dir / DATABASE_NAME`` opened here (and closed by the store's ``close()``).
    """
    data_dir = Path(data_dir)
    owns = conn is None
    if conn is None:
        conn = connect(data_dir / DATABASE_NAME)
    return SQLiteArtifactStore(data_dir / "artifacts", conn, clock, owns_connection=owns)


# --------------------------------------------------------------------------------------------
# The run-bound writer
# --------------------------------------------------------------------------------------------


class ArtifactWriter:
    """What tools (``ToolExecutionContext.artifacts``) and the pipeline write artifacts through.

    Bound to one run (and optionally one conversation and the run's principal) so a tool cannot
    write into another run's artifacts or under another principal. Applies the identity rule:
    writing the same (origin, name, media type, content) while the run's earlier artifact is
    live at ``clock.now()`` returns that artifact's ref and stores nothing. Safe to share
    between threads.
    """

    def __init__(
        self,
        store: ArtifactStore,
        run_id: str,
        clock: Clock,
        conversation_id: str | None = None,
        principal_id: str | None = None,
    ) -> None:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("run_id must be a non-empty string")
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._conversation_id = conversation_id
        self._principal_id = principal_id

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def conversation_id(self) -> str | None:
        return self._conversation_id

    @property
    def principal_id(self) -> str | None:
        return self._principal_id

    def write(
        self,
        *,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        content: bytes | str,
        trust: Trust,
        expires_at: _dt.datetime | None = None,
    ) -> ArtifactRef:
        """Store ``content`` (a str is encoded UTF-8) for this run, or reuse the live twin.

        Raises what ``ArtifactStore.put`` raises. On reuse the earlier artifact keeps its own
        expiry; only its trust may be lowered to ``trust``.
        """
        data = content.encode("utf-8") if isinstance(content, str) else content
        record = self._store.put_or_reuse(
            run_id=self._run_id,
            conversation_id=self._conversation_id,
            principal_id=self._principal_id,
            origin=origin,
            name=name,
            media_type=media_type,
            content=data,
            trust=trust,
            expires_at=expires_at,
            now=self._clock.now(),
        )
        return record.ref

    def stream(
        self,
        *,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        trust: Trust,
        max_bytes: int,
        expires_at: _dt.datetime | None = None,
    ) -> ArtifactStream:
        """A streamed write for this run of at most ``max_bytes``, published only on commit::

            with writer.stream(origin=..., name=..., media_type=..., trust=...,
                               max_bytes=32 * 1024 * 1024) as s:
                for chunk in response.iter_bytes():
                    s.write(chunk)
                ref = s.commit()

        The upload begins on entering the block (so an unentered stream leaves nothing behind)
        and is aborted on leaving it uncommitted, however it is left. ``commit`` applies the
        identity rule at ``clock.now()``, like ``write``.
        """
        return ArtifactStream(
            self._store,
            self._clock,
            dict(
                run_id=self._run_id, conversation_id=self._conversation_id,
                principal_id=self._principal_id, origin=origin, name=name,
                media_type=media_type, trust=trust, max_bytes=max_bytes, expires_at=expires_at,
            ),
        )


class ArtifactStream:
    """A run-bound streamed write (``ArtifactWriter.stream``); use it as a context manager.

    ``write`` appends bytes (past ``max_bytes`` it raises ``ArtifactTooLarge`` and the stream
    is aborted), ``commit`` publishes and returns the ``ArtifactRef``, ``abort`` discards.
    Leaving the ``with`` block without committing, or by an exception, aborts: an interrupted
    or failed stream leaves no artifact. One producer per stream; an ``abort`` from another
    thread (a cancellation) is safe.
    """

    def __init__(self, store: ArtifactStore, clock: Clock, begin: dict[str, Any]) -> None:
        self._store = store
        self._clock = clock
        self._begin = begin
        self._lock = threading.Lock()
        self._upload: ArtifactUpload | None = None
        self._entered = False

    def __enter__(self) -> ArtifactStream:
        with self._lock:
            if self._entered:
                raise ArtifactError("an artifact stream can be entered once")
            self._entered = True
            self._upload = self._store.begin(**self._begin)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A no-op after commit; otherwise this is what makes "no commit, no artifact" hold.
        self.abort()

    @property
    def bytes_written(self) -> int:
        """How many bytes the stream has accepted so far."""
        return 0 if self._upload is None else self._upload.bytes_written

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; see ``ArtifactUpload.write``."""
        self._started().write(chunk)

    def commit(self) -> ArtifactRef:
        """Publish what was written (or reuse the run's live twin) and return its ref."""
        upload = self._started()
        return upload.commit(self._clock.now()).ref

    def abort(self) -> None:
        """Discard what was written. Idempotent; a no-op after commit."""
        with self._lock:
            upload = self._upload
        if upload is not None:
            upload.abort()

    def _started(self) -> ArtifactUpload:
        with self._lock:
            upload = self._upload
        if upload is None:
            raise ArtifactError("an artifact stream is used inside a with block")
        return upload


# --------------------------------------------------------------------------------------------
# The conversation-scoped resolver
# --------------------------------------------------------------------------------------------

# Generated, exported and (once claimed) uploaded files are what a user could point a tool at.
# A captured tool output is the host's own overflow bookkeeping, possibly holding text the tool
# fetched from outsiders: letting a later call read it back would launder it past step 12.
_REFERENCEABLE = frozenset(
    {ArtifactOrigin.EXPORT, ArtifactOrigin.MODEL_OUTPUT, ArtifactOrigin.UPLOAD}
)


class ArtifactResolver:
    """Decides whether a caller may use an artifact by id, and reads it if so (DESIGN §8.1).

    Every rule is checked on the record, before any content is opened, and every refusal is
    one ``ArtifactUnavailable`` whose ``reason`` says which rule (for operators). In order:
    the artifact exists; it belongs to the caller's principal; it belongs to the caller's
    conversation, or, for a caller outside any conversation, to the caller's run; it is live at
    ``clock.now()``; it is an export or a model output, or an upload the user has sent (claimed);
    and, for ``read``, it is at most ``max_bytes`` long. Bytes are the store's verified read:
    ``ArtifactCorrupted`` propagates rather than damaged content being returned.
    """

    def __init__(self, store: ArtifactStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def resolve(
        self,
        artifact_id: str,
        *,
        principal_id: str,
        run_id: str,
        conversation_id: str | None,
    ) -> ArtifactRecord:
        """The artifact's record if the caller may use it; raises ``ArtifactUnavailable``.

        ``ValueError`` for a caller without a principal or run (an empty or non-string id): a
        missing principal must never match an artifact written without one.
        """
        _check_caller(principal_id, run_id, conversation_id)
        # The id usually comes from the model; whatever it is, a bad one is just not found.
        if not isinstance(artifact_id, str) or not artifact_id:
            raise ArtifactUnavailable(repr(artifact_id), "not_found")
        try:
            record = self._store.get(artifact_id)
        except ArtifactNotFound:
            raise ArtifactUnavailable(artifact_id, "not_found") from None
        if record.principal_id != principal_id:
            raise ArtifactUnavailable(artifact_id, "foreign_principal")
        if conversation_id is not None:
            if record.conversation_id != conversation_id:
                raise ArtifactUnavailable(artifact_id, "other_conversation")
        elif record.run_id != run_id:
            raise ArtifactUnavailable(artifact_id, "other_run")
        if not record.live_at(self._clock.now()):
            raise ArtifactUnavailable(artifact_id, "expired")
        if record.origin not in _REFERENCEABLE:
            raise ArtifactUnavailable(artifact_id, "ineligible_origin")
        if record.origin is ArtifactOrigin.UPLOAD and not record.claimed:
            raise ArtifactUnavailable(artifact_id, "unclaimed_upload")
        return record

    def read(
        self,
        artifact_id: str,
        *,
        principal_id: str,
        run_id: str,
        conversation_id: str | None,
        max_bytes: int,
    ) -> bytes:
        """The artifact's checksum-verified bytes if the caller may use it and it fits.

        Refused (``ArtifactUnavailable``, reason ``too_large``) from the record's size when it
        is over ``max_bytes``, so an oversized artifact is never opened. ``TypeError`` or
        ``ValueError`` for a ``max_bytes`` that is not a non-negative int.
        """
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError(f"max_bytes must be an int, got {type(max_bytes).__name__}")
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        record = self.resolve(
            artifact_id, principal_id=principal_id, run_id=run_id,
            conversation_id=conversation_id,
        )
        if record.size > max_bytes:
            raise ArtifactUnavailable(record.id, "too_large")
        # The store's read is bounded by the record's size (checked just above) and verified.
        return self._store.read(record.id)


def _check_caller(principal_id: str, run_id: str, conversation_id: str | None) -> None:
    for label, value in (("principal_id", principal_id), ("run_id", run_id)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"the caller's {label} must be a non-empty string")
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise ValueError("the caller's conversation_id must be None or a non-empty string")
