"""The ArtifactStore port, its SQLite backend, and the run-bound ArtifactWriter (DESIGN §6).

An artifact is a blob a run produced or received (a captured tool output too large for the model,
an export, a model output, an upload) plus the metadata the host needs to hand it around safely:
who made it (run, conversation, origin), what it is (name, media type), how much to trust it, and
when it stops counting. A tool result or an excerpt marker carries only the small ``ArtifactRef``.

The default backend stores content by address: the file for content with sha256 ``h`` lives at
``<root>/sha256/<h[:2]>/<h[2:]>``, so identical bytes are on disk once however many runs write
them, and a file's own path says what its bytes must hash to. Metadata lives in the ``artifacts``
table of the shared SQLite database (``toolhost._db``). Reads verify size and checksum against the
metadata and raise ``ArtifactCorrupted`` rather than return bytes that are not what was stored.

Writers go through ``ArtifactWriter``, which is bound to one run and applies the identity rule:
the same (origin, name, media type, content) written twice while the first is still live returns
the first ref and stores nothing.
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
from typing import Any, Protocol, runtime_checkable

import attrs

from toolhost._clock import Clock
from toolhost._db import DATABASE_NAME, Migration, connect, migrate
from toolhost._determinism import new_id
from toolhost._digest import sha256_digest
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
    "ArtifactStore",
    "ArtifactTooLarge",
    "ArtifactWriter",
    "SQLiteArtifactStore",
    "open_artifact_store",
]

#: The largest artifact any store accepts: 512 MiB (536,870,912 bytes). ``put`` refuses more with
#: ``ArtifactTooLarge`` before hashing or writing anything. The pipeline's own output ceiling
#: (8 MiB, DESIGN §4 step 12) is far below it; this bound exists so that no caller, however
#: buggy, can fill the data directory or the process's memory through one artifact.
ARTIFACT_CEILING = 512 * 1024 * 1024

_UTC = _dt.UTC
_CHECKSUM = re.compile(r"^sha256:[0-9a-f]{64}$")
# type "/" subtype, optionally followed by parameters; deliberately loose (RFC 6838 tokens).
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;.*)?$")
_READ_CHUNK = 1024 * 1024


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
    """The content is larger than ``ARTIFACT_CEILING``; nothing was stored."""

    def __init__(self, size: int, ceiling: int) -> None:
        super().__init__(f"artifact of {size} bytes exceeds the ceiling of {ceiling} bytes")
        self.size = size
        self.ceiling = ceiling


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
    size: int = attrs.field(validator=_check_size)
    checksum: str = attrs.field(validator=_check_checksum)


@attrs.frozen(kw_only=True)
class ArtifactRecord:
    """Everything the store knows about one artifact. Timestamps are aware UTC.

    ``expires_at`` of None means the artifact never expires. Expiry only decides liveness (the
    identity rule ignores expired artifacts); it does not delete content.
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

    @property
    def ref(self) -> ArtifactRef:
        """The handle to give out for this artifact."""
        return ArtifactRef(
            id=self.id,
            name=self.name,
            media_type=self.media_type,
            size=self.size,
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
class ArtifactStore(Protocol):
    """Where artifacts live. Every backend passes ``toolhost._artifact_contract``.

    ``put`` always stores a new record; the identity rule is ``put_or_reuse``'s, which the
    run-bound ``ArtifactWriter`` uses and which must be atomic (two concurrent calls for the same
    identity leave one record).
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
    ) -> ArtifactRecord:
        """Store ``content`` as a new artifact created at the store's ``clock.now()``.

        Raises ``ArtifactTooLarge`` past ``ARTIFACT_CEILING`` (nothing stored), ``TypeError``
        for content that is not ``bytes`` or an origin/trust that is not the enum, ``ValueError``
        for an empty name, a malformed media type, or an ``expires_at`` that is naive or not
        after the creation instant.
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
    ) -> ArtifactRecord:
        """The identity rule, atomically: ``find_live`` at ``now``, else ``put`` created at ``now``.

        When the run holds a live artifact with the same origin, name, media type and checksum,
        return it and store nothing, except that its trust is lowered to ``trust`` if that is
        lower (identical bytes arriving from a less trusted source must not inherit the higher
        trust). Otherwise store a new artifact exactly as ``put`` would, with ``now`` as its
        creation instant.
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
)

_COLUMNS = (
    "id, run_id, conversation_id, origin, name, media_type, size, checksum, trust, "
    "created_at, expires_at"
)


def _ts(value: _dt.datetime) -> str:
    return value.astimezone(_UTC).isoformat(timespec="microseconds")


def _ts_or_none(value: _dt.datetime | None) -> str | None:
    return None if value is None else _ts(value)


def _from_row(row: tuple[Any, ...]) -> ArtifactRecord:
    (id_, run_id, conversation_id, origin, name, media_type, size, checksum, trust,
     created_at, expires_at) = row
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
    return seen == size and "sha256:" + digest.hexdigest() == checksum


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
    ) -> ArtifactRecord:
        """See ``ArtifactStore.put``. Writes the content file (if new) before the row."""
        return self._store(
            run_id=run_id, origin=origin, name=name, media_type=media_type, content=content,
            trust=trust, conversation_id=conversation_id, expires_at=expires_at,
            now=None,
        )

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
    ) -> ArtifactRecord:
        """See ``ArtifactStore.put_or_reuse``. Find and insert share one BEGIN IMMEDIATE."""
        return self._store(
            run_id=run_id, origin=origin, name=name, media_type=media_type, content=content,
            trust=trust, conversation_id=conversation_id, expires_at=expires_at,
            now=_as_utc(now),
        )

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
        self,
        *,
        run_id: str,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        content: bytes,
        trust: Trust,
        conversation_id: str | None,
        expires_at: _dt.datetime | None,
        now: _dt.datetime | None,
    ) -> ArtifactRecord:
        # `now` is None for a plain put (created at the store's clock, no identity rule) and the
        # writer's instant for put_or_reuse (used both for liveness and as created_at, so one
        # write reads one instant).
        _check_put_arguments(run_id, origin, name, media_type, content, trust, conversation_id)
        expires = _as_utc_or_none(expires_at)
        created_at = now if now is not None else _as_utc(self._clock.now())
        if expires is not None and expires <= created_at:
            raise ValueError("expires_at must be after the artifact's creation instant")
        checksum = sha256_digest(content)
        # The file goes first and outside the transaction: a crash between the two leaves an
        # unreferenced file (harmless), never a row without content; and a slow fsync never
        # holds the database's write lock.
        self._ensure_blob(checksum, content)
        with self._transaction():
            if now is not None:
                match = self._find_live(run_id, origin, name, media_type, checksum, now)
                if match is not None:
                    if trust.rank < match.trust.rank:
                        self._conn.execute(
                            "UPDATE artifacts SET trust = ? WHERE id = ?", (trust.value, match.id)
                        )
                        match = attrs.evolve(match, trust=trust)
                    return match
            record = ArtifactRecord(
                id=new_id(),
                run_id=run_id,
                conversation_id=conversation_id,
                origin=origin,
                name=name,
                media_type=media_type,
                size=len(content),
                checksum=checksum,
                trust=trust,
                created_at=created_at,
                expires_at=expires,
            )
            self._conn.execute(
                f"INSERT INTO artifacts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id, record.run_id, record.conversation_id, record.origin.value,
                    record.name, record.media_type, record.size, record.checksum,
                    record.trust.value, _ts(record.created_at), _ts_or_none(record.expires_at),
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

    def _ensure_blob(self, checksum: str, content: bytes) -> bool:
        """Make the content file exist with exactly ``content``; True if a file was written.

        An existing file is verified, not trusted: a damaged one is replaced with the good bytes
        (which also repairs every record sharing it). Writes are atomic: a temp file in the same
        directory, fsync, ``os.replace``, fsync of the directory.
        """
        path = self._blob_path(checksum)
        if path.exists() and _file_matches(path, len(content), checksum):
            return False
        shard = path.parent
        if not shard.is_dir():
            shard.mkdir(exist_ok=True)
            _fsync_dir(self._blobs)
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


def _check_put_arguments(
    run_id: str,
    origin: ArtifactOrigin,
    name: str,
    media_type: str,
    content: bytes,
    trust: Trust,
    conversation_id: str | None,
) -> None:
    # Size first: it costs nothing, and a too-large content must not be hashed or written.
    if not isinstance(content, bytes):
        raise TypeError(f"artifact content must be bytes, got {type(content).__name__}")
    if len(content) > ARTIFACT_CEILING:
        raise ArtifactTooLarge(len(content), ARTIFACT_CEILING)
    if not isinstance(origin, ArtifactOrigin):
        raise TypeError(f"origin must be an ArtifactOrigin, got {origin!r}")
    if not isinstance(trust, Trust):
        raise TypeError(f"trust must be a Trust, got {trust!r}")
    for label, value in (("run_id", run_id), ("name", name)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{label} must be a non-empty string")
    if conversation_id is not None and (not isinstance(conversation_id, str) or not conversation_id):
        raise ValueError("conversation_id must be None or a non-empty string")
    if not isinstance(media_type, str) or not _MEDIA_TYPE.match(media_type):
        raise ValueError(f"media_type must look like 'type/subtype', got {media_type!r}")


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

    Bound to one run (and optionally one conversation) so a tool cannot write into another
    run's artifacts. Applies the identity rule: writing the same (origin, name, media type,
    content) while the run's earlier artifact is live at ``clock.now()`` returns that artifact's
    ref and stores nothing. Safe to share between threads.
    """

    def __init__(
        self,
        store: ArtifactStore,
        run_id: str,
        clock: Clock,
        conversation_id: str | None = None,
    ) -> None:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("run_id must be a non-empty string")
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._conversation_id = conversation_id

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def conversation_id(self) -> str | None:
        return self._conversation_id

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
            origin=origin,
            name=name,
            media_type=media_type,
            content=data,
            trust=trust,
            expires_at=expires_at,
            now=self._clock.now(),
        )
        return record.ref
