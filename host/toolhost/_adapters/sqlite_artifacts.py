"""Artifact metadata in SQLite, and the default store: that metadata with files.

The ``artifacts`` table lives in the shared SQLite database (``toolhost._adapters.sqlite_db``),
next to the invocation record. ``SQLiteArtifactMetadata`` runs its own ``BEGIN IMMEDIATE``
transactions (SQLite's write lock taken up front, so a find-then-insert cannot race another
connection's) and serializes them with a lock, so it is safe to share between threads;
separate connections or processes on the same file are serialized by that write lock.

The disk under the database failing a statement (SQLite's SQLITE_FULL for a full disk,
SQLITE_IOERR for a failing, read-only or size-limited one) is ``FileStoreUnavailable``, as the
content files' own disk failing is (D359): the store's outage, retryable. A write that fails
so leaves no row: its content, already placed, is referenced by nothing (invisible, and
purge's to remove), and no row ever names content that was not placed first.

``SQLiteArtifactStore`` is the store of one host's data directory (``TOOLHOST_DATA_DIR``):
this metadata and content-addressed files (``file_artifacts``), joined
(``artifact_store``). With ``TOOLHOST_ARTIFACT_STORE=s3://...`` and no database URL the same
metadata is joined with a bucket instead (``s3_artifacts``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from toolhost._adapters.artifact_parts import Place, check_retention
from toolhost._adapters.artifact_rows import COLUMNS, NAMES, ArtifactRecordDamaged, entry, record
from toolhost._adapters.artifact_store import JoinedArtifactStore
from toolhost._adapters.file_artifacts import FileContent, FileStoreUnavailable
from toolhost._adapters.sqlite_db import (
    DATABASE_NAME,
    DatabaseFiles,
    Migration,
    connect,
    damage,
    database_path,
    migrate,
)
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import ArtifactNotFound, ArtifactOrigin, ArtifactRecord
from toolhost._model.convert import column_values, to_row
from toolhost._ports.artifacts import DamagedArtifact
from toolhost._ports.clock import Clock

__all__ = [
    "BUCKET_MIGRATIONS",
    "MIGRATIONS",
    "ArtifactRecordDamaged",
    "SQLiteArtifactMetadata",
    "SQLiteArtifactStore",
    "open_artifact_store",
]

_Item = TypeVar("_Item")

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

#: Which store id this database uses for a bucket location (``s3_artifacts``' marker):
#: made only when the metadata is first joined with a bucket (``store_id``).
BUCKET_MIGRATIONS = (
    Migration(
        "s3_artifacts",
        1,
        """
        CREATE TABLE artifact_buckets (
            location TEXT PRIMARY KEY,
            store_id TEXT NOT NULL
        )
        """,
    ),
    # The one content location the records are bound to (D572): a store of another location
    # is refused at start, as its reads would find none of their content. A database that
    # has used one location only is bound to it; one that used several (a host of another
    # prefix was accepted before) is bound by the next store to start.
    Migration(
        "s3_artifacts",
        2,
        """
        CREATE TABLE artifact_location (
            one INTEGER PRIMARY KEY CHECK (one = 1),
            location TEXT NOT NULL
        );
        INSERT INTO artifact_location (one, location)
            SELECT 1, location FROM artifact_buckets
            WHERE (SELECT count(*) FROM artifact_buckets) = 1
        """,
    ),
)

_PLACEHOLDERS = ", ".join("?" * len(NAMES))

#: SQLite's primary result codes for a disk that did not serve: full (ENOSPC) or failing
#: (EIO, EFBIG, EROFS, ...). Any other error (a constraint, a damaged schema) is raised as is.
_OUTAGES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR})


@contextlib.contextmanager
def _served(database: Path, operation: str) -> Iterator[None]:
    """The block's SQLite error that is the disk's as ``FileStoreUnavailable`` naming the
    database, ``operation`` and the error (``SQLITE_FULL``, ``SQLITE_IOERR_WRITE``); one that
    says the database is damaged as its one line (``sqlite_db.damage``)."""
    try:
        yield
    except sqlite3.Error as exc:
        refused = damage(database, exc)
        if refused is not None:
            raise refused from exc
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _OUTAGES:
            raise
        problem = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        raise FileStoreUnavailable(database, operation, problem) from exc


def _entry(row: Sequence[Any]) -> ArtifactRecord | ArtifactRecordDamaged:
    return entry(dict(zip(NAMES, row, strict=True)))


class SQLiteArtifactMetadata:
    """The ``artifacts`` table of ``conn`` (``ArtifactMetadata``). Construction applies the
    ``artifacts`` migrations (idempotent). ``conn`` is expected to come from
    ``toolhost._adapters.sqlite_db.connect`` (autocommit, WAL); ``close()`` closes it only with
    ``owns_connection``."""

    def __init__(self, conn: sqlite3.Connection, *, owns_connection: bool = False) -> None:
        self.conn = conn
        self._owns_connection = owns_connection
        # The connection is shared by this store's threads; SQLite has one transaction per
        # connection, so BEGIN..COMMIT blocks must not interleave.
        self._lock = threading.RLock()
        migrate(conn, MIGRATIONS)
        self._database = self.database  # for the outage's one line, without a statement
        # The files opened, checked before each write: the record's file, shared with it.
        opened = str(database_path(conn))
        self._files = None if opened in ("", ":memory:") else DatabaseFiles(opened)

    @property
    def database(self) -> Path:
        """See ``ArtifactMetadata.database``."""
        path = database_path(self.conn)
        return Path(DATABASE_NAME) if str(path) == ":memory:" else path

    def record(self, new: ArtifactRecord, *, reuse: bool, place: Place) -> ArtifactRecord:
        """See ``ArtifactMetadata.record``: one BEGIN IMMEDIATE. Purge removes content only
        inside such a transaction, so content ``place`` finds stays until the row commits."""
        with self._transaction():
            if reuse:
                match = self._find_live(new.run_id, new.conversation_id, new.principal_id,
                                        new.origin, new.name, new.media_type, new.checksum,
                                        new.created_at)
                if match is not None:
                    if new.trust.rank < match.trust.rank:
                        lowered = column_values(ArtifactRecord,
                                                {"trust": new.trust, "id": match.id})
                        self.conn.execute("UPDATE artifacts SET trust = ? WHERE id = ?",
                                          tuple(lowered.values()))
                        match = attrs.evolve(match, trust=new.trust)
                    return match
            place()
            self.conn.execute(f"INSERT INTO artifacts ({COLUMNS}) VALUES ({_PLACEHOLDERS})",
                              tuple(to_row(new).values()))
            return new

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.claim``."""
        with self._transaction():
            updated = self.conn.execute(
                "UPDATE artifacts SET claimed = 1 WHERE id = ?", (artifact_id,)).rowcount
            if updated == 0:
                raise ArtifactNotFound(artifact_id)
            row = self.conn.execute(
                f"SELECT {COLUMNS} FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()
        return record(row)

    def get(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.get``."""
        with self._reading():
            row = self.conn.execute(
                f"SELECT {COLUMNS} FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()
        if row is None:
            raise ArtifactNotFound(artifact_id)
        return record(row)

    def find_live(self, run_id: str, conversation_id: str | None, principal_id: str | None,
                  origin: ArtifactOrigin, name: str, media_type: str, checksum: str,
                  now: _dt.datetime) -> ArtifactRecord | None:
        """See ``ArtifactMetadata.find_live``."""
        with self._reading():
            return self._find_live(run_id, conversation_id, principal_id, origin, name,
                                   media_type, checksum, now)

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
        with self._reading():
            rows = self.conn.execute(
                f"SELECT {COLUMNS} FROM artifacts WHERE run_id = ? ORDER BY created_at, rowid",
                (run_id,)).fetchall()
        return [e for e in map(_entry, rows) if isinstance(e, ArtifactRecord)]

    def list_rows(self, filters: Sequence[tuple[str, str]], limit: int,
                  after: str | None) -> list[ArtifactRecord | DamagedArtifact]:
        """See ``ArtifactStore.list_rows``. Each filter has an index in creation order
        (``artifacts_run_order``, ``artifacts_order``; a conversation's rows are sorted after
        the ``artifacts_conversation`` search, which a conversation's size bounds)."""
        clauses = [f"{column} = ?" for column, _ in filters]
        params: list[Any] = [value for _, value in filters]
        with self._reading():
            if after is not None:
                row = self.conn.execute(
                    "SELECT created_at FROM artifacts WHERE id = ?", (after,)).fetchone()
                if row is None:
                    raise ArtifactNotFound(str(after))
                clauses.append("(created_at, id) > (?, ?)")
                params.extend((row[0], after))
            where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
            rows = self.conn.execute(
                f"SELECT {COLUMNS} FROM artifacts {where}ORDER BY created_at, id LIMIT ?",
                (*params, limit)).fetchall()
        return [_entry(r) for r in rows]

    def delete_expired(self, now: _dt.datetime) -> tuple[int, int]:
        """See ``ArtifactMetadata.delete_expired``."""
        cutoff = column_values(ArtifactRecord, {"expires_at": now})["expires_at"]
        with self._transaction():
            expired, expired_bytes = self.conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM artifacts WHERE expires_at <= ?",
                (cutoff,)).fetchone()
            if expired:
                self.conn.execute("DELETE FROM artifacts WHERE expires_at <= ?", (cutoff,))
        return int(expired), int(expired_bytes)

    def sweep(self, items: Sequence[tuple[str, _Item]],
              remove: Callable[[_Item], int | None]) -> tuple[int, int]:
        """See ``ArtifactMetadata.sweep``: all of ``items`` in one transaction, which holds
        SQLite's write lock while it checks and removes."""
        removed = freed = 0
        with self._transaction():
            for checksum, item in items:
                if self.conn.execute("SELECT 1 FROM artifacts WHERE checksum = ? LIMIT 1",
                                     (checksum,)).fetchone() is not None:
                    continue
                size = remove(item)
                if size is not None:
                    removed += 1
                    freed += size
        return removed, freed

    def store_id(self, location: str) -> str:
        """See ``ArtifactMetadata.store_id``: ``artifact_buckets``, made on first use."""
        migrate(self.conn, BUCKET_MIGRATIONS)
        with self._transaction():
            self.conn.execute(
                "INSERT OR IGNORE INTO artifact_buckets (location, store_id) VALUES (?, ?)",
                (location, new_id()))
            (store_id,) = self.conn.execute(
                "SELECT store_id FROM artifact_buckets WHERE location = ?", (location,)
            ).fetchone()
        return str(store_id)

    def issued(self, store_id: str) -> bool:
        """See ``ArtifactMetadata.issued``."""
        migrate(self.conn, BUCKET_MIGRATIONS)
        with self._reading():
            row = self.conn.execute("SELECT 1 FROM artifact_buckets WHERE store_id = ?",
                                    (store_id,)).fetchone()
        return row is not None

    def bound_location(self) -> str | None:
        """See ``ArtifactMetadata.bound_location``."""
        migrate(self.conn, BUCKET_MIGRATIONS)
        with self._reading():
            row = self.conn.execute("SELECT location FROM artifact_location").fetchone()
        return None if row is None else str(row[0])

    def bind_location(self, location: str, *, moved_from: str | None = None) -> str:
        """See ``ArtifactMetadata.bind_location``."""
        migrate(self.conn, BUCKET_MIGRATIONS)
        with self._transaction():
            if moved_from is None:
                self.conn.execute("INSERT OR IGNORE INTO artifact_location (one, location) "
                                  "VALUES (1, ?)", (location,))
            elif self.conn.execute("UPDATE artifact_location SET location = ? "
                                   "WHERE location = ?", (location, moved_from)).rowcount:
                self.conn.execute(
                    "INSERT INTO artifact_buckets (location, store_id) VALUES (?, ?) "
                    "ON CONFLICT (location) DO UPDATE SET store_id = excluded.store_id",
                    (location, new_id()))
            (bound,) = self.conn.execute("SELECT location FROM artifact_location").fetchone()
        return str(bound)

    def close(self) -> None:
        """Close the connection if this metadata was given it to own."""
        if self._owns_connection:
            self.conn.close()

    def _find_live(self, run_id: str, conversation_id: str | None, principal_id: str | None,
                   origin: ArtifactOrigin, name: str, media_type: str, checksum: str,
                   now: _dt.datetime) -> ArtifactRecord | None:
        # The conversation and principal are the identity's too: a twin of another's would be
        # a ref its resolver refuses to the caller it was just handed to. ``IS`` matches a
        # missing one (NULL) with a missing one only.
        identity = column_values(ArtifactRecord, {
            "run_id": run_id, "conversation_id": conversation_id, "principal_id": principal_id,
            "origin": origin, "name": name, "media_type": media_type,
            "checksum": checksum, "expires_at": now,  # live: expires after now
        })
        row = self.conn.execute(
            f"SELECT {COLUMNS} FROM artifacts "
            "WHERE run_id = ? AND conversation_id IS ? AND principal_id IS ? "
            "AND origin = ? AND name = ? AND media_type = ? AND checksum = ? "
            "AND (expires_at IS NULL OR expires_at > ?) "
            "ORDER BY created_at, id LIMIT 1",
            tuple(identity.values()),
        ).fetchone()
        return None if row is None else record(row)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock, _served(self._database, "read"):
            yield

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes SQLite's write lock up front, so a find-then-insert cannot race
        # another connection's identical find-then-insert.
        with self._lock, _served(self._database, "write"):
            if self._files is not None:
                self._files.check()
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException as exc:
                # A failed COMMIT (a full disk) may leave the transaction open, or SQLite may
                # have rolled it back already; the error that ended it is the one raised.
                if self.conn.in_transaction:
                    try:
                        self.conn.execute("ROLLBACK")
                    except sqlite3.Error as failed:
                        exc.add_note(f"The ROLLBACK failed too ({failed}).")
                raise


class SQLiteArtifactStore(JoinedArtifactStore):
    """The default store: content-addressed files under ``root`` plus metadata in the
    ``artifacts`` table of ``conn`` (closed by ``close()`` with ``owns_connection``).

    A composition, not a backend of its own: every method is ``JoinedArtifactStore``'s.
    ``root`` is the content's; the private names below are how tests that damage or inspect
    the parts reach them.
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
        retention = check_retention(retention)
        content = FileContent(root)
        super().__init__(SQLiteArtifactMetadata(conn, owns_connection=owns_connection),
                         content, clock, retention=retention)
        self.root = content.root
        self._files = content
        self._conn = conn

    def _blob_path(self, checksum: str) -> Path:
        return self._files.path(checksum)

    @property
    def _in_use(self) -> set[Path]:
        return self._files.in_use


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
    retention = check_retention(retention)  # before a connection exists to leak
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
