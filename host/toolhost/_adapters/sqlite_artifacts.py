"""The ArtifactStore port, its SQLite backend, the run-bound ArtifactWriter, and the resolver.

An artifact is a blob a run produced or received (a captured tool output too large for the model,
an export, a model output, an upload) plus the metadata the host needs to hand it around safely:
who made it (run, conversation, principal, origin), what it is (name, media type), how much to
trust it, when it stops counting, and, for an upload, whether the user has sent it yet (claimed).
A tool result or an excerpt marker carries only the small ``ArtifactRef``.

The default backend stores content by address: the file for content with sha256 ``h`` lives at
``<root>/sha256/<h[:2]>/<h[2:]>``, so identical bytes are on disk once however many runs write
them, and a file's own path says what its bytes must hash to. Metadata lives in the ``artifacts``
table of the shared SQLite database (``toolhost._adapters.sqlite_db``). Reads verify size and checksum against the
metadata and raise ``ArtifactCorrupted`` rather than return bytes that are not what was stored.

Content arrives whole (``put``) or streamed (``begin`` → ``ArtifactUpload``): a stream is staged
aside and publishes only on ``commit``, so an aborted or failed stream leaves no artifact. The
shape (begin, write parts, commit or abort) is a multipart upload's, so an object-store backend
maps onto it directly.

Expired artifacts stay until ``purge``: it deletes their rows in one transaction, then every
content file no row references (a crash in between leaves unreferenced files, which the next
purge finds, never a row without content), then staging files a dead process left behind.

Writers go through ``ArtifactWriter``, which is bound to one run (and its principal) and applies
the identity rule: the same (origin, name, media type, content) written twice while the first is
still live returns the first ref and stores nothing. Readers on behalf of a tool go through
``ArtifactResolver``, which decides from the metadata alone, before any content is opened,
whether the caller may see an artifact at all (DESIGN §8.1).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import attrs

from toolhost._adapters.sqlite_db import DATABASE_NAME, Migration, connect, migrate
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ARTIFACT_CEILING,
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactTooLarge,
    PurgeReport,
    as_utc,
    as_utc_or_none,
)
from toolhost._model.convert import column_values, from_row, to_row
from toolhost._model.data_layout import make_private_dirs
from toolhost._model.digest import sha256_checksum, sha256_digest
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import (
    LIST_LIMIT,
    READ_CHUNK,
    STAGING_STALE_AFTER,
    DamagedArtifact,
)
from toolhost._ports.clock import Clock

__all__ = [
    "MIGRATIONS",
    "ArtifactRecordDamaged",
    "SQLiteArtifactStore",
    "SQLiteArtifactUpload",
    "StreamedUpload",
    "VerifiedChunks",
    "open_artifact_store",
]

# type "/" subtype, optionally followed by parameters; deliberately loose (RFC 6838 tokens).
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;.*)?$")
_READ_CHUNK = 1024 * 1024
# Staged uploads live beside the shards (same filesystem, so publishing is a rename) under a
# name no content address can have: content files are named by hex digits only.
_STAGED_SUFFIX = ".upload"
# A streamed upload asks the kernel to start writing its staged bytes back every this many
# bytes, so the fsync at commit waits for the last stretch only, not for the whole file.
_WRITEBACK_EVERY = 4 * 1024 * 1024
# What purge recognizes under sha256/: shard directories and content files by their hex names;
# anything else there (an operator's file) is left alone.
_SHARD = re.compile(r"^[0-9a-f]{2}$")
_OBJECT = re.compile(r"^[0-9a-f]{62}$")


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
    # The operator's commands: listing everything in creation order (a run's or a
    # conversation's list uses the indexes above), finding what has expired, and asking
    # whether any row still references a content file before purge removes it.
    Migration(
        "artifacts",
        3,
        """
        CREATE INDEX artifacts_order ON artifacts (created_at, id);
        CREATE INDEX artifacts_expiry ON artifacts (expires_at) WHERE expires_at IS NOT NULL;
        CREATE INDEX artifacts_checksum ON artifacts (checksum)
        """,
    ),
)

# Columns are the record's attributes, in its order; toolhost._model.convert holds what each
# column stores (ISO text, enum values).
_NAMES = tuple(f.name for f in attrs.fields(ArtifactRecord))
_COLUMNS = ", ".join(_NAMES)
_PLACEHOLDERS = ", ".join("?" * len(_NAMES))


class ArtifactRecordDamaged(ArtifactCorrupted):
    """A row that cannot be read as an ``ArtifactRecord`` (``DamagedArtifact``): what ``get``
    raises for its id and what ``list_rows`` lists in its place (made, not raised, there)."""

    def __init__(self, artifact_id: str, field: str) -> None:
        super().__init__(artifact_id, f"its record is damaged ({field})")
        self.field = field

    @property
    def id(self) -> str:
        """See ``DamagedArtifact.id``."""
        return self.artifact_id


#: A row of a record every value of which is sound: ``_damaged_field`` puts one column of a
#: damaged row into it at a time.
_SOUND_ROW = to_row(ArtifactRecord(
    id="sound", run_id="sound", conversation_id=None, origin=ArtifactOrigin.EXPORT,
    name="sound", media_type="text/plain", size=0, checksum="sha256:" + "0" * 64,
    trust=Trust.USER, created_at=_dt.datetime(2000, 1, 1, tzinfo=_dt.UTC),
))
#: What reading a row as a record raises when a value is refused: cattrs' group (its
#: ``BaseValidationError``, an ExceptionGroup: named so, cattrs is imported only by a read),
#: with a validator's or a converter's error inside, or the error itself.
_REFUSED = (ExceptionGroup, ValueError, TypeError)


def _read_record(columns: Mapping[str, Any]) -> ArtifactRecord | ArtifactRecordDamaged:
    """The record a row's columns (name → stored value) hold, or, for a row changed behind
    the store's back so that they hold none, what is damaged in it."""
    try:
        return from_row(ArtifactRecord, columns)
    except _REFUSED:
        return ArtifactRecordDamaged(_row_id(columns), _damaged_field(columns))


def _row_id(columns: Mapping[str, Any]) -> str:
    value = columns.get("id")
    return value if isinstance(value, str) else repr(value)


def _damaged_field(columns: Mapping[str, Any]) -> str:
    """The first attribute, in the record's order, whose column alone the record refuses:
    read the way every row is read, with the other values sound."""
    for name in _NAMES:
        try:
            from_row(ArtifactRecord, {**_SOUND_ROW, name: columns[name]})
        except _REFUSED:
            return name
    return "record"  # only the values together are refused


def _entry(row: Sequence[Any]) -> ArtifactRecord | ArtifactRecordDamaged:
    return _read_record(dict(zip(_NAMES, row, strict=True)))


def _from_row(row: Sequence[Any]) -> ArtifactRecord:
    """The record ``row`` holds; raises ``ArtifactRecordDamaged`` when it holds none."""
    entry = _entry(row)
    if isinstance(entry, ArtifactRecordDamaged):
        raise entry
    return entry


def _fsync_dir(path: Path) -> None:
    # Makes a rename or a new directory entry durable, not just the file's bytes.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: A content file: never through a link, and never waiting on a FIFO someone put there.
_O_CONTENT = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _open_content(path: Path) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file; OSError otherwise (a link, a
    FIFO, a device: each made ``artifacts get`` or a dedupe check wait for ever, or read
    what the link named)."""
    try:
        fd = os.open(path, _O_CONTENT)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):  # a link; a socket
            raise OSError(f"{path.name} is not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_matches(path: Path, size: int, checksum: str) -> bool:
    """Whether ``path`` holds exactly ``size`` bytes hashing to ``checksum`` (streamed)."""
    digest = hashlib.sha256()
    seen = 0
    try:
        with _open_content(path) as f:
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
    from ``toolhost._adapters.sqlite_db.connect`` (autocommit, WAL); the store runs its own ``BEGIN IMMEDIATE``
    transactions on it and serializes them with a lock, so the store is safe to share between
    threads. Separate connections (or processes) over the same files are safe too: SQLite's
    write lock serializes their transactions and content files are only ever atomically replaced
    with identical bytes. ``purge`` removes a content file only inside such a transaction, and
    a write checks inside its own that its content is still there, so the two cannot cross.
    """

    def __init__(
        self,
        root: Path,
        conn: sqlite3.Connection,
        clock: Clock,
        *,
        owns_connection: bool = False,
        retention: _dt.timedelta | None = None,
    ) -> None:
        self.root = Path(root)
        self._conn = conn
        self._clock = clock
        self._owns_connection = owns_connection
        self._retention = _check_retention(retention)
        # The connection is shared by this store's threads; SQLite has one transaction per
        # connection, so BEGIN..COMMIT blocks must not interleave.
        self._lock = threading.RLock()
        self._blobs = self.root / "sha256"
        make_private_dirs(self._blobs)
        # Temp and staging files this instance has open: purge never takes them, however old.
        # Only set.add/discard touch it (atomic under the GIL), so an upload's __del__ needs
        # no lock that the collecting thread might already hold.
        self._in_use: set[Path] = set()
        migrate(conn, MIGRATIONS)

    @property
    def retention(self) -> _dt.timedelta | None:
        """See ``ArtifactStore.retention``."""
        return self._retention

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
        return self._store(meta, content, now=as_utc(now))

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
    ) -> StreamedUpload:
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
        return self._upload(meta, min(max_bytes, ARTIFACT_CEILING))

    def _upload(self, meta: _Metadata, limit: int) -> StreamedUpload:
        """The upload ``begin`` hands out: a staging file here; a store that keeps content
        elsewhere (S3) hands out its own."""
        return SQLiteArtifactUpload(self, meta, limit)

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
        """See ``ArtifactStore.read``: the content as one verified chunk."""
        record = self.get(artifact_id)
        return b"".join(self._chunks(record, max(record.size, 1)))

    def read_chunks(self, artifact_id: str, chunk_size: int = READ_CHUNK) -> VerifiedChunks:
        """See ``ArtifactStore.read_chunks``. The content file is opened here, read lazily."""
        _check_chunk_size(chunk_size)
        return self._chunks(self.get(artifact_id), chunk_size)

    def _chunks(self, record: ArtifactRecord, chunk_size: int) -> VerifiedChunks:
        """``record``'s content file, opened, as verified chunks: what ``read`` and
        ``read_chunks`` share, so the two refuse damaged content with the same reasons."""
        try:
            f = _open_content(self._blob_path(record.checksum))
        except FileNotFoundError:
            raise ArtifactCorrupted(record.id, "the content file is missing") from None
        except OSError as exc:
            raise ArtifactCorrupted(record.id, f"the content file is unreadable: {exc}") from exc

        def unreadable(exc: Exception) -> Exception:
            if isinstance(exc, OSError):
                return ArtifactCorrupted(record.id, f"the content file is unreadable: {exc}")
            return exc

        return VerifiedChunks(record, f.read, f.close, chunk_size, failed=unreadable)

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
            return self._find_live(run_id, origin, name, media_type, checksum, as_utc(now))

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_run``. Ties in ``created_at`` go in rowid order, which is
        the order the rows were inserted (``artifacts`` is a rowid table). A damaged row is
        skipped."""
        # Why rowid is the insertion order of a run's live rows, purges notwithstanding: a
        # table without AUTOINCREMENT gives a new row one more than the largest rowid present
        # (inserts are serialized by the write lock, BEGIN IMMEDIATE). A purge that deletes
        # the largest lets a later row take its number again, but that number is still above
        # every row left, so the live rows' rowids keep rising in insertion order. (SQLite
        # picks unused rowids at random only once 2**63 - 1 is taken, which no store
        # reaches.) toolhost never VACUUMs; SQLite documents that VACUUM may renumber a table
        # without an INTEGER PRIMARY KEY, but it copies rows in rowid order, so their order
        # holds there too. The index serves run_id; only ties are sorted, in memory.
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE run_id = ? "
                "ORDER BY created_at, rowid",
                (run_id,),
            ).fetchall()
        return _records(map(_entry, rows))

    def list_artifacts(
        self,
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        limit: int = LIST_LIMIT,
        after: str | None = None,
    ) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_artifacts``: ``list_rows``' records."""
        return _records(self.list_rows(run_id=run_id, conversation_id=conversation_id,
                                       limit=limit, after=after))

    def list_rows(
        self,
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        limit: int = LIST_LIMIT,
        after: str | None = None,
    ) -> list[ArtifactRecord | DamagedArtifact]:
        """See ``ArtifactStore.list_rows``. Each filter has an index in creation order
        (``artifacts_run_order``, ``artifacts_order``; a conversation's rows are sorted after
        the ``artifacts_conversation`` search, which a conversation's size bounds)."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {type(limit).__name__}")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("run_id", run_id), ("conversation_id", conversation_id)):
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise ValueError(f"{column} must be None or a non-empty string")
                clauses.append(f"{column} = ?")
                params.append(value)
        with self._lock:
            if after is not None:
                row = self._conn.execute(
                    "SELECT created_at FROM artifacts WHERE id = ?", (after,)).fetchone()
                if row is None:
                    raise ArtifactNotFound(str(after))
                clauses.append("(created_at, id) > (?, ?)")
                params.extend((row[0], after))
            where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts {where}ORDER BY created_at, id LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_entry(r) for r in rows]

    def purge(self, now: _dt.datetime) -> PurgeReport:
        """See ``ArtifactStore.purge``."""
        now = as_utc(now)
        cutoff = column_values(ArtifactRecord, {"expires_at": now})["expires_at"]
        with self._transaction():
            expired, expired_bytes = self._conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM artifacts WHERE expires_at <= ?",
                (cutoff,),
            ).fetchone()
            if expired:
                self._conn.execute("DELETE FROM artifacts WHERE expires_at <= ?", (cutoff,))
        # Every content file is looked at, not only the expired rows' ones: what an earlier
        # purge (or a write) left unreferenced when its process died goes too.
        files, file_bytes = self._sweep_content()
        staged, staged_bytes = self._sweep_staging(now)
        return PurgeReport(
            artifacts=expired, artifact_bytes=expired_bytes, content_files=files,
            staged_uploads=staged, freed_bytes=file_bytes + staged_bytes,
        )

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
        created_at = now if now is not None else as_utc(self._clock.now())
        _check_expiry(meta, created_at)
        checksum = sha256_digest(content)
        # The file goes first and outside the transaction: a crash between the two leaves an
        # unreferenced file (harmless), never a row without content; and a slow fsync never
        # holds the database's write lock. Only if a purge took the file meanwhile is it
        # written again, under the lock.
        self._ensure_blob(checksum, content)
        path = self._blob_path(checksum)

        def restore() -> None:
            if not path.exists():
                self._ensure_blob(checksum, content)

        return self._record(meta, len(content), checksum, created_at, reuse=now is not None,
                            place=restore)

    def _record(
        self,
        meta: _Metadata,
        size: int,
        checksum: str,
        created_at: _dt.datetime,
        *,
        reuse: bool,
        place: Callable[[], None],
    ) -> ArtifactRecord:
        """Insert the row for content on disk; with ``reuse``, the identity rule first.

        ``place`` runs inside the transaction, just before the insert, and makes sure the
        content file is at its address: purge removes files only inside a transaction, so
        a file present here stays until the row that references it has committed.
        """
        with self._transaction():
            if reuse:
                match = self._find_live(
                    meta.run_id, meta.origin, meta.name, meta.media_type, checksum, created_at
                )
                if match is not None:
                    if meta.trust.rank < match.trust.rank:
                        lowered = column_values(ArtifactRecord, {"trust": meta.trust, "id": match.id})
                        self._conn.execute(
                            "UPDATE artifacts SET trust = ? WHERE id = ?", tuple(lowered.values())
                        )
                        match = attrs.evolve(match, trust=meta.trust)
                    return match
            place()
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
                tuple(to_row(record).values()),
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
        identity = column_values(ArtifactRecord, {
            "run_id": run_id, "origin": origin, "name": name, "media_type": media_type,
            "checksum": checksum, "expires_at": as_utc(now),  # live: expires after now
        })
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM artifacts "
            "WHERE run_id = ? AND origin = ? AND name = ? AND media_type = ? AND checksum = ? "
            "AND (expires_at IS NULL OR expires_at > ?) "
            "ORDER BY created_at, id LIMIT 1",
            tuple(identity.values()),
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
        self._in_use.add(tmp)
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
        finally:
            self._in_use.discard(tmp)
        _fsync_dir(shard)
        return True

    def _stage(self) -> tuple[Path, IO[bytes]]:
        """A fresh staging file for an upload, open for writing."""
        tmp = self._blobs / f".{new_id()}{_STAGED_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            staged = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            tmp.unlink()
            raise
        self._in_use.add(tmp)
        return tmp, staged

    def _unstage(self, tmp: Path) -> None:
        """The staging file is done with: remove it if it is still there."""
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        self._in_use.discard(tmp)

    def _publish_staged(
        self, meta: _Metadata, tmp: Path, size: int, checksum: str, created_at: _dt.datetime
    ) -> ArtifactRecord:
        """Record a staged, fsynced file under the identity rule, placing it at its content
        address unless an intact file is already there.

        The existing file is hashed outside the write lock (it can be large). The rename
        happens inside the row's transaction, so purge cannot take the content between its
        arrival and its row; the staging file is removed only once the row has committed.
        """
        path = self._blob_path(checksum)
        intact = path.exists() and _file_matches(path, size, checksum)
        shard = self._shard_for(path)

        def place() -> None:
            if not intact or not path.exists():
                os.replace(tmp, path)
                _fsync_dir(shard)

        record = self._record(meta, size, checksum, created_at, reuse=True, place=place)
        self._unstage(tmp)
        return record

    def _sweep_content(self) -> tuple[int, int]:
        """Remove every content file no row references: (files, bytes).

        One transaction per shard holds SQLite's write lock while it checks and unlinks, so a
        write (which checks for its file under that lock) either sees the file gone and puts
        it back, or commits its row first and the check here keeps the file.
        """
        files = freed = 0
        for shard in sorted(p for p in self._blobs.iterdir() if _SHARD.match(p.name)):
            if not shard.is_dir() or shard.is_symlink():
                continue
            objects = sorted(p for p in shard.iterdir() if _OBJECT.match(p.name))
            if not objects:
                continue
            removed = 0
            with self._transaction():
                for path in objects:
                    checksum = f"sha256:{shard.name}{path.name}"
                    if self._conn.execute(
                        "SELECT 1 FROM artifacts WHERE checksum = ? LIMIT 1", (checksum,)
                    ).fetchone() is not None:
                        continue
                    try:
                        info = path.lstat()
                        if not stat.S_ISREG(info.st_mode):
                            continue  # not something a write put here: left alone
                        path.unlink()
                    except FileNotFoundError:
                        continue
                    removed += 1
                    freed += info.st_size
            if removed:
                files += removed
                _fsync_dir(shard)
        return files, freed

    def _sweep_staging(self, now: _dt.datetime) -> tuple[int, int]:
        """Remove staging and temp files untouched for STAGING_STALE_AFTER before ``now``
        that this instance does not have open: (files, bytes)."""
        # The file's mtime is the filesystem's record of its last write; `now` is the caller's
        # instant. Nothing here reads the time itself.
        cutoff = (now - STAGING_STALE_AFTER).timestamp()
        candidates = list(self._blobs.glob(f".*{_STAGED_SUFFIX}"))
        for shard in self._blobs.iterdir():
            if _SHARD.match(shard.name) and shard.is_dir() and not shard.is_symlink():
                candidates.extend(shard.glob(".*.tmp"))
        files = freed = 0
        for path in sorted(candidates):
            if path in self._in_use:
                continue
            try:
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode) or info.st_mtime > cutoff:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            files += 1
            freed += info.st_size
        return files, freed


class VerifiedChunks:
    """``ArtifactChunks`` over an open source of a record's content: what the stores'
    ``read_chunks`` share.

    ``read(n)`` returns up to ``n`` bytes (``b""`` at the end), ``close()`` releases the
    source, and ``failed`` turns what ``read`` raises into the store's error (an unreadable
    file, a lost server). Never asks for more than one byte past the recorded size, and hashes
    every chunk as it goes; the chunk that completes the size is returned only once the end
    of the source and the checksum are confirmed. Not for concurrent use by several threads.
    """

    def __init__(
        self,
        record: ArtifactRecord,
        read: Callable[[int], bytes],
        close: Callable[[], object],
        chunk_size: int,
        *,
        failed: Callable[[Exception], Exception],
    ) -> None:
        self._record = record
        self._read = read
        self._close: Callable[[], object] | None = close
        self._chunk_size = chunk_size
        self._failed = failed
        self._digest = hashlib.sha256()
        self._seen = 0
        self._done = False

    def __iter__(self) -> VerifiedChunks:
        return self

    def __next__(self) -> bytes:
        if self._done:
            raise StopIteration
        try:
            chunk = self._next_chunk()
        except BaseException:
            self.close()
            raise
        if not chunk and self._done:
            raise StopIteration
        return chunk

    def close(self) -> None:
        """See ``ArtifactChunks.close``."""
        self._done = True
        close, self._close = self._close, None
        if close is not None:
            with contextlib.suppress(Exception):  # a read-only source: nothing is lost
                close()

    def __enter__(self) -> VerifiedChunks:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # Dropped half-read: the descriptor or connection goes now, not at the collector's
        # leisure. A half-built one has no ``_close``.
        if getattr(self, "_close", None) is not None:
            with contextlib.suppress(Exception):
                self.close()

    def _next_chunk(self) -> bytes:
        record = self._record
        want = min(self._chunk_size, record.size - self._seen)
        chunk = self._fill(want)
        self._seen += len(chunk)
        self._digest.update(chunk)
        if self._seen < record.size:
            if len(chunk) < want:  # the source ended early
                raise ArtifactCorrupted(
                    record.id, f"size {self._seen} bytes, expected {record.size}")
            return chunk
        # The chunk that completes the content: verified before anyone sees it.
        if self._fill(1):
            raise ArtifactCorrupted(
                record.id, f"size more than {record.size} bytes, expected {record.size}")
        if sha256_checksum(self._digest) != record.checksum:
            raise ArtifactCorrupted(record.id, "checksum mismatch")
        self.close()
        return chunk

    def _fill(self, n: int) -> bytes:
        """Up to ``n`` bytes, fewer only at the end of the source (a read may return less)."""
        if n == 0:
            return b""
        try:
            data = self._read(n)
            if 0 < len(data) < n:
                parts = [data]
                got = len(data)
                while got < n and (more := self._read(n - got)):
                    parts.append(more)
                    got += len(more)
                data = b"".join(parts)
        except Exception as exc:
            raise self._failed(exc) from None
        return data


class StreamedUpload:
    """What the stores' ``ArtifactUpload``s share: the bound checked before a byte is staged,
    a sha256 fed chunk by chunk, one lock over the calls (so an abort from another thread, a
    cancellation, is safe), and an upload that stays committed or aborted once it is.

    A subclass stages bytes (``_stage_chunk``), publishes them (``_publish``, under the
    identity rule) and drops them (``_discard``, which leaves ``_state`` "aborted"); a failure
    in any of them discards the upload, so nothing is ever published half-written.
    """

    def __init__(self, meta: _Metadata, limit: int) -> None:
        self._meta = meta
        self._limit = limit
        self._lock = threading.Lock()
        self._digest = hashlib.sha256()
        self._written = 0
        self._overflow: int | None = None  # the size an over-bound write would have reached
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
            # Checked before the chunk is staged: bytes past the bound are never kept.
            if total > self._limit:
                self._overflow = total
                self._discard()
                raise ArtifactTooLarge(total, self._limit)
            try:
                self._stage_chunk(chunk, total)
            except BaseException:
                # A failed stage leaves the staged bytes unknown; the digest can no longer be
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
                created_at = as_utc(now)
                _check_expiry(self._meta, created_at)
                record = self._publish(created_at, sha256_checksum(self._digest))
            except BaseException:
                self._discard()
                raise
            self._state = "committed"
            self._committed()
            return record

    def abort(self) -> None:
        """See ``ArtifactUpload.abort``."""
        with self._lock:
            if self._state == "open":
                self._discard()

    def _stage_chunk(self, chunk: bytes, total: int) -> None:
        """Keep ``chunk``; ``total`` is the upload's size with it."""
        raise NotImplementedError

    def _publish(self, created_at: _dt.datetime, checksum: str) -> ArtifactRecord:
        """Publish what was staged, of ``checksum``, as the store's ``put`` would."""
        raise NotImplementedError

    def _committed(self) -> None:
        """After the publish: drop what staging left behind (nothing, by default)."""

    def _discard(self) -> None:
        """Drop what was staged, for good; ``_state`` becomes "aborted"."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._state == "committed":
            raise ArtifactError("the upload is already committed")
        if self._state == "aborted":
            if self._overflow is not None:
                raise ArtifactTooLarge(self._overflow, self._limit)
            raise ArtifactError("the upload was aborted")


class SQLiteArtifactUpload(StreamedUpload):
    """``ArtifactUpload`` for ``SQLiteArtifactStore``: a staging file hashed as it is written.

    Bytes go straight to a staging file beside the shards while a sha256 is fed chunk by chunk,
    so the content is never held in memory whole. ``commit`` fsyncs it, renames it to its
    content address and only then inserts the row (the order ``put`` uses: a crash leaves at
    worst an unreferenced file, never a row without content). ``abort``, an over-bound write, a
    failed write and a failed commit all close and delete the staging file; no row is inserted.
    """

    def __init__(self, store: SQLiteArtifactStore, meta: _Metadata, limit: int) -> None:
        super().__init__(meta, limit)
        self._store = store
        self._written_back = 0  # where the last writeback request ended
        self._tmp, self._file = store._stage()

    def _stage_chunk(self, chunk: bytes, total: int) -> None:
        self._file.write(chunk)
        if total - self._written_back >= _WRITEBACK_EVERY:
            self._file.flush()  # the kernel can only write back what it was given
            self._start_writeback(total)

    def _publish(self, created_at: _dt.datetime, checksum: str) -> ArtifactRecord:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        # A failure after the rename leaves the content file at its address: harmless, it is
        # only ever the bytes its name says, and a later write of them reuses it.
        return self._store._publish_staged(self._meta, self._tmp, self._written, checksum,
                                           created_at)

    def __del__(self) -> None:
        # An upload dropped without commit or abort (a caller's bug, a thread that died) must
        # not hold its descriptor and staging file until the process exits. Nobody else can
        # hold the lock once the object is unreachable; a half-built one has no ``_state``.
        if getattr(self, "_state", None) == "open":
            with contextlib.suppress(Exception):
                self._discard()

    def _start_writeback(self, end: int) -> None:
        # POSIX_FADV_DONTNEED on freshly written (dirty) pages starts their writeback without
        # waiting for it and drops none of them (pages being written back stay cached). Only
        # a hint: where it is missing or refused, commit's fsync does all the work as before.
        if hasattr(os, "posix_fadvise"):
            with contextlib.suppress(OSError):
                os.posix_fadvise(self._file.fileno(), self._written_back,
                                 end - self._written_back, os.POSIX_FADV_DONTNEED)
        self._written_back = end

    def _discard(self) -> None:
        self._state = "aborted"
        with contextlib.suppress(OSError):
            self._file.close()
        self._store._unstage(self._tmp)


def _records(entries: Iterable[ArtifactRecord | DamagedArtifact]) -> list[ArtifactRecord]:
    """The records among ``entries``: the damaged rows skipped."""
    return [entry for entry in entries if isinstance(entry, ArtifactRecord)]


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
        expires_at=as_utc_or_none(expires_at),
    )


def _check_chunk_size(chunk_size: int) -> None:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be an int, got {type(chunk_size).__name__}")
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")


def _check_retention(retention: _dt.timedelta | None) -> _dt.timedelta | None:
    if retention is None:
        return None
    if not isinstance(retention, _dt.timedelta):
        raise TypeError(f"retention must be a timedelta or None, got {retention!r}")
    if retention <= _dt.timedelta(0):
        raise ValueError("retention must be positive (None keeps artifacts forever)")
    return retention


def _check_expiry(meta: _Metadata, created_at: _dt.datetime) -> None:
    if meta.expires_at is not None and meta.expires_at <= created_at:
        raise ValueError("expires_at must be after the artifact's creation instant")


def open_artifact_store(
    data_dir: Path,
    clock: Clock,
    conn: sqlite3.Connection | None = None,
    *,
    retention: _dt.timedelta | None = None,
) -> SQLiteArtifactStore:
    """The default store under a data dir (``TOOLHOST_DATA_DIR``).

    Files go under ``data_dir / "artifacts"``; metadata into ``conn``, or, when none is given,
    into ``data_dir / DATABASE_NAME`` opened here (and closed by the store's ``close()``).
    ``retention`` is ``Settings.artifact_retention`` (``TOOLHOST_ARTIFACT_RETENTION_DAYS``).
    """
    data_dir = Path(data_dir)
    retention = _check_retention(retention)  # before a connection exists to leak
    owns = conn is None
    if conn is None:
        conn = connect(data_dir / DATABASE_NAME)
    try:
        return SQLiteArtifactStore(data_dir / "artifacts", conn, clock, owns_connection=owns,
                                   retention=retention)
    except BaseException:  # a directory it cannot make, a database it refuses
        if owns:
            conn.close()
        raise

