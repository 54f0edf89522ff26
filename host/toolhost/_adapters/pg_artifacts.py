"""Artifact metadata on PostgreSQL, content in an S3 bucket: the store many hosts share.

Selected when both ``TOOLHOST_DATABASE_URL`` and ``TOOLHOST_ARTIFACT_STORE=s3://...`` are set.
It is ``S3ArtifactStore`` (content, streams, reads, the purge sweeps of the bucket) with the
``artifacts`` table moved from the host's SQLite file to the database the invocation record is
on, so every host on that database sees every artifact, and the bucket's marker names that
database's store id (every host on it is accepted on the prefix).

The rows are stored as SQLite stores them, column for column (ISO 8601 text in UTC,
``COLLATE "C"`` where SQL orders or compares), so both list in the same order.

What SQLite's one write lock gave, across hosts. Every transaction that depends on whether a
content object is referenced takes a transaction-level advisory lock named by the content's
checksum first:

* a write: identity lookup, the HEAD (and PUT again) of its object, then the insert;
* purge: the "does any row reference this checksum" check, then the DELETE of the object.

Under READ COMMITTED each statement reads what has committed when it starts, so whichever of
the two gets the lock second sees what the first did: a purge after the write sees its row and
keeps the object; a write after the purge finds the object gone and puts it back. Two writers of
the same artifact (the same checksum, by the identity rule's definition) take the same lock, so
the identity rule's find-then-insert is atomic across hosts. A unique index cannot state that
rule: a plain ``put`` of identical content makes a second row by design, and an expired row
still holds its identity until purge removes it. Writers of different content never wait on
each other.

The database failing (unreachable, restarted) in a call is ``PgArtifactsUnavailable``, an
``ArtifactStoreUnavailable``; the pool checks each connection before lending it, so service
returns when the server does.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import psycopg

from toolhost._adapters.pg_invocations import (
    _first_line,
    migrated_pool,
    shown_conninfo,
)
from toolhost._adapters.s3_artifacts import S3ArtifactStore, S3Location, s3_client
from toolhost._adapters.sqlite_artifacts import (
    ArtifactRecordDamaged,
    _check_retention,
    _Metadata,
    _read_record,
    _records,
    _row_id,
)
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactStoreUnavailable,
    PurgeReport,
    as_utc,
)
from toolhost._model.convert import column_values, to_row
from toolhost._model.settings import StoreUnavailable
from toolhost._ports.artifacts import LIST_LIMIT, DamagedArtifact
from toolhost._ports.clock import Clock

__all__ = [
    "MIGRATIONS",
    "PgArtifactsUnavailable",
    "PostgresS3ArtifactStore",
    "content_lock",
    "open_pg_s3_artifact_store",
]

#: The ``artifacts`` component on PostgreSQL: SQLite's three ``artifacts`` migrations and its
#: ``artifact_buckets`` in one schema, then the insertion sequence SQLite's rowid gives it (the
#: versions count on their own from 1).
MIGRATIONS: Sequence[tuple[str, int, str]] = (
    (
        "artifacts",
        1,
        """
        CREATE TABLE artifacts (
            id TEXT COLLATE "C" PRIMARY KEY,
            run_id TEXT COLLATE "C" NOT NULL,
            conversation_id BYTEA,
            origin TEXT COLLATE "C" NOT NULL,
            name BYTEA NOT NULL,
            media_type TEXT COLLATE "C" NOT NULL,
            size BIGINT NOT NULL CHECK (size >= 0),
            checksum TEXT COLLATE "C" NOT NULL,
            trust TEXT NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            expires_at TEXT COLLATE "C",
            principal_id BYTEA,
            claimed BOOLEAN NOT NULL DEFAULT TRUE
        );
        CREATE INDEX artifacts_identity
            ON artifacts (run_id, origin, name, media_type, checksum);
        CREATE INDEX artifacts_run_order ON artifacts (run_id, created_at, id);
        CREATE INDEX artifacts_conversation
            ON artifacts (conversation_id, principal_id, created_at, id);
        CREATE INDEX artifacts_order ON artifacts (created_at, id);
        CREATE INDEX artifacts_expiry ON artifacts (expires_at) WHERE expires_at IS NOT NULL;
        CREATE INDEX artifacts_checksum ON artifacts (checksum);
        CREATE TABLE artifact_buckets (
            location TEXT COLLATE "C" PRIMARY KEY,
            store_id TEXT NOT NULL
        )
        """,
    ),
    # The order rows were stored in, for a run's list when created_at ties (SQLite uses its
    # rowid): every insert takes the next value of the column's sequence, which hands out
    # rising numbers across all sessions and hosts (its cache is 1, the default; a larger
    # one would let each session hand out its own range, out of order). GENERATED ALWAYS:
    # nothing but the sequence sets it (pg_dump's COPY restores the values as they were).
    # Adding it rewrites the table under an exclusive lock and numbers the rows already there
    # in the order the rewrite reads them, not necessarily their creation order: their ties
    # (listed by random id until then) list in that order from then on.
    (
        "artifacts",
        2,
        """
        ALTER TABLE artifacts ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY
        """,
    ),
)

_NAMES = tuple(f.name for f in attrs.fields(ArtifactRecord))
#: Text a tool or a caller chose, which may hold U+0000 (TEXT cannot, SQLite can): stored as
#: its UTF-8 bytes, which compare as the text does.
_FREE_TEXT = frozenset({"name", "conversation_id", "principal_id"})
_COLUMNS = ", ".join(_NAMES)
_SELECT = f"SELECT {_COLUMNS} FROM artifacts"
_INSERT = f"INSERT INTO artifacts ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(_NAMES))})"


def _entry(row: Sequence[Any]) -> ArtifactRecord | ArtifactRecordDamaged:
    """The record a row holds, or what is damaged in it (as SQLite's ``_entry``): free text
    that is not UTF-8 too."""
    columns = dict(zip(_NAMES, row, strict=True))
    for name in _NAMES:
        if name in _FREE_TEXT and columns[name] is not None:
            try:
                columns[name] = bytes(columns[name]).decode()
            except UnicodeDecodeError:
                return ArtifactRecordDamaged(_row_id(columns), name)
    return _read_record(columns)


def _from_row(row: Sequence[Any]) -> ArtifactRecord:
    """The record ``row`` holds; raises ``ArtifactRecordDamaged`` when it holds none."""
    entry = _entry(row)
    if isinstance(entry, ArtifactRecordDamaged):
        raise entry
    return entry


def _stored(columns: Mapping[str, Any]) -> list[Any]:
    """Column values as written here: the free-text columns as UTF-8 bytes."""
    return [value.encode() if name in _FREE_TEXT and isinstance(value, str) else value
            for name, value in columns.items()]


def content_lock(checksum: str) -> int:
    """The advisory lock key for a content checksum: its first 64 bits, signed. Two contents
    sharing a key only wait for each other; correctness needs only that one content has one."""
    return int.from_bytes(bytes.fromhex(checksum.removeprefix("sha256:")[:16]), "big",
                          signed=True)


class PgArtifactsUnavailable(ArtifactStoreUnavailable):
    """The database holding the artifacts' metadata did not serve a request. One line naming
    the database without its password; retryable, and nothing was published."""

    def __init__(self, database: str, problem: str) -> None:
        super().__init__(f"the artifact store's database {database} is unavailable ({problem})")
        self.database = database
        self.problem = problem


class PostgresS3ArtifactStore(S3ArtifactStore):
    """Content in ``location``'s bucket through ``client``; metadata in the PostgreSQL database
    ``conninfo`` names. See the module docstring for why it is safe across hosts.

    :raises StoreUnavailable: the database or the bucket cannot be used, or the prefix belongs
        to another database.
    """

    def __init__(
        self,
        location: S3Location,
        client: Any,
        conninfo: str,
        clock: Clock,
        *,
        owns_client: bool = False,
        retention: _dt.timedelta | None = None,
        max_size: int = 10,
        timeout: float = 5.0,
        connect_timeout: int = 5,
    ) -> None:
        # Not S3ArtifactStore.__init__: it migrates a SQLite connection. These are the
        # attributes its content methods read.
        self.location = location
        self._client = client
        self._owns_client = owns_client
        self._clock = clock
        self._retention = _check_retention(retention)
        self._lock = threading.RLock()
        self._open: set[str] = set()
        self._owns_connection = False
        self._shown = shown_conninfo(conninfo)
        self._pool = migrated_pool(conninfo, name="toolhost-artifacts",
                                   application_name="toolhost artifacts",
                                   migrations=MIGRATIONS, max_size=max_size, timeout=timeout,
                                   connect_timeout=connect_timeout)
        try:
            try:
                self._bind()
            except PgArtifactsUnavailable as exc:
                raise StoreUnavailable(Path(self._shown), f"cannot use the database "
                                       f"{self._shown} ({exc.problem})") from None
        except BaseException:
            self._pool.close()
            raise

    # -- the database --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:  # PoolTimeout is one too
            raise PgArtifactsUnavailable(self._shown, _first_line(exc)) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:  # type: ignore[override]
        with self._connection() as conn, conn.transaction():
            yield conn

    def _database(self) -> Path:
        return Path(self._shown)

    # -- port: metadata ------------------------------------------------------------------------

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.claim``."""
        with self._connection() as conn:
            row = conn.execute(f"UPDATE artifacts SET claimed = TRUE WHERE id = %s "
                               f"RETURNING {_COLUMNS}", (artifact_id,)).fetchone()
        if row is None:
            raise ArtifactNotFound(artifact_id)
        return _from_row(row)

    def get(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.get``."""
        with self._connection() as conn:
            row = conn.execute(f"{_SELECT} WHERE id = %s", (artifact_id,)).fetchone()
        if row is None:
            raise ArtifactNotFound(artifact_id)
        return _from_row(row)

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
        with self._connection() as conn:
            return _find_live(conn, run_id, origin, name, media_type, checksum, as_utc(now))

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_run``: ties in ``created_at`` in ``seq`` order, the order
        the rows were inserted (migration 2). ``artifacts_run_order`` finds the run's rows,
        which are then sorted (one run's artifacts: a short sort). A damaged row is skipped."""
        with self._connection() as conn:
            rows = conn.execute(f"{_SELECT} WHERE run_id = %s ORDER BY created_at, seq",
                                (run_id,)).fetchall()
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
        """See ``ArtifactStore.list_rows``: keyset pages in (created_at, id) order."""
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
                clauses.append(f"{column} = %s")
                params.append(value.encode() if column in _FREE_TEXT else value)
        with self._connection() as conn:
            if after is not None:
                row = conn.execute("SELECT created_at FROM artifacts WHERE id = %s",
                                   (after,)).fetchone()
                if row is None:
                    raise ArtifactNotFound(str(after))
                clauses.append("(created_at, id) > (%s, %s)")
                params.extend((row[0], after))
            where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
            rows = conn.execute(f"{_SELECT}{where} ORDER BY created_at, id LIMIT %s",
                                (*params, limit)).fetchall()
        return [_entry(r) for r in rows]

    def purge(self, now: _dt.datetime) -> PurgeReport:
        """See ``ArtifactStore.purge``: expired rows in one statement, then the bucket."""
        now = as_utc(now)
        cutoff = column_values(ArtifactRecord, {"expires_at": now})["expires_at"]
        with self._connection() as conn:
            row = conn.execute(
                "WITH gone AS (DELETE FROM artifacts WHERE expires_at <= %s RETURNING size) "
                "SELECT count(*), coalesce(sum(size), 0) FROM gone", (cutoff,)).fetchone()
        assert row is not None
        expired, expired_bytes = int(row[0]), int(row[1])
        objects, object_bytes = self._sweep_content()
        staged, staged_bytes = self._sweep_staging(now)
        return PurgeReport(
            artifacts=expired, artifact_bytes=expired_bytes, content_files=objects,
            staged_uploads=staged, freed_bytes=object_bytes + staged_bytes,
        )

    def close(self) -> None:
        """Close the pool, and the client if this store made it."""
        self._pool.close()
        if self._owns_client:
            with contextlib.suppress(Exception):
                self._client.close()

    # -- internals -----------------------------------------------------------------------------

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
        """As ``SQLiteArtifactStore._record``, under the content's advisory lock."""
        with self._transaction() as conn:
            _wait_for_content(conn, checksum)
            if reuse:
                match = _find_live(conn, meta.run_id, meta.origin, meta.name, meta.media_type,
                                   checksum, created_at)
                if match is not None:
                    if meta.trust.rank < match.trust.rank:
                        lowered = column_values(ArtifactRecord, {"trust": meta.trust})
                        conn.execute("UPDATE artifacts SET trust = %s WHERE id = %s",
                                     (lowered["trust"], match.id))
                        match = attrs.evolve(match, trust=meta.trust)
                    return match
            place()
            record = ArtifactRecord(
                id=new_id(), run_id=meta.run_id, conversation_id=meta.conversation_id,
                origin=meta.origin, name=meta.name, media_type=meta.media_type, size=size,
                checksum=checksum, trust=meta.trust, created_at=created_at,
                expires_at=meta.expires_at, principal_id=meta.principal_id,
                claimed=meta.claimed,
            )
            conn.execute(_INSERT, _stored(to_row(record)))
            return record

    def _sweep_page(self, candidates: list[tuple[str, int]]) -> tuple[int, int]:
        """One short transaction per object, under its content's lock: the check sees every
        write that took the lock before, and a write after it finds the object gone."""
        objects = freed = 0
        with self._connection() as conn:
            for key, size in candidates:
                checksum = "sha256:" + key.rsplit("/", 1)[-1]
                with conn.transaction():
                    _wait_for_content(conn, checksum)
                    if conn.execute("SELECT 1 FROM artifacts WHERE checksum = %s LIMIT 1",
                                    (checksum,)).fetchone() is not None:
                        continue
                    self._delete_object(key)
                objects += 1
                freed += size
        return objects, freed

    def _store_id(self) -> str:
        location = str(self.location)
        with self._connection() as conn:
            conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (%s, %s) "
                         "ON CONFLICT (location) DO NOTHING", (location, new_id()))
            row = conn.execute("SELECT store_id FROM artifact_buckets WHERE location = %s",
                               (location,)).fetchone()
        assert row is not None  # inserted above, and never deleted
        return str(row[0])


#: Seconds a transaction waits for a content's lock: its holder may be uploading that content
#: (minutes for a large object would be an outage anyway), far longer than the sessions'
#: two-second ``lock_timeout`` for row locks.
_CONTENT_WAIT = "120s"


def _wait_for_content(conn: psycopg.Connection[Any], checksum: str) -> None:
    """Take ``checksum``'s content lock for the transaction, waiting up to ``_CONTENT_WAIT``."""
    conn.execute("SELECT set_config('lock_timeout', %s, true), "
                 "set_config('statement_timeout', %s, true)", (_CONTENT_WAIT, _CONTENT_WAIT))
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (content_lock(checksum),))


def _find_live(
    conn: psycopg.Connection[Any],
    run_id: str,
    origin: ArtifactOrigin,
    name: str,
    media_type: str,
    checksum: str,
    now: _dt.datetime,
) -> ArtifactRecord | None:
    identity = column_values(ArtifactRecord, {
        "run_id": run_id, "origin": origin, "name": name, "media_type": media_type,
        "checksum": checksum, "expires_at": now,  # live: expires after now
    })
    row = conn.execute(
        f"{_SELECT} WHERE run_id = %s AND origin = %s AND name = %s AND media_type = %s "
        "AND checksum = %s AND (expires_at IS NULL OR expires_at > %s) "
        "ORDER BY created_at, id LIMIT 1",
        _stored(identity),
    ).fetchone()
    return None if row is None else _from_row(row)


def open_pg_s3_artifact_store(
    url: str,
    conninfo: str,
    env: Mapping[str, str],
    clock: Clock,
    *,
    retention: _dt.timedelta | None = None,
    client: Any = None,
) -> PostgresS3ArtifactStore:
    """The store ``TOOLHOST_ARTIFACT_STORE=url`` names, its metadata on the database
    ``TOOLHOST_DATABASE_URL=conninfo`` names. Without ``client`` one is built from ``env``
    (``s3_client``) and closed by ``close()``.

    :raises SettingError: a malformed ``url``.
    :raises StoreUnavailable: boto3 is missing, or the database, the bucket or the prefix
        cannot be used.
    """
    location = S3Location.parse(url)
    retention = _check_retention(retention)
    owns_client = client is None
    if client is None:
        try:
            client = s3_client(env)
        except ImportError as exc:
            raise StoreUnavailable(
                Path(shown_conninfo(conninfo)), "TOOLHOST_ARTIFACT_STORE names an S3 bucket, "
                f"which needs boto3 (not installed: {exc.name}): pip install 'toolhost-core[s3]'",
            ) from None
    try:
        return PostgresS3ArtifactStore(location, client, conninfo, clock,
                                       owns_client=owns_client, retention=retention)
    except BaseException:
        if owns_client:
            with contextlib.suppress(Exception):
                client.close()
        raise
