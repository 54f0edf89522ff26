"""Artifact metadata on PostgreSQL, joined with content in an S3 bucket: the store many hosts
share.

Selected when both ``TOOLHOST_DATABASE_URL`` and ``TOOLHOST_ARTIFACT_STORE=s3://...`` are set.
``PgArtifactMetadata`` keeps the ``artifacts`` table on the database the invocation record is
on, so every host on that database sees every artifact, and the bucket's marker names that
database's store id (every host on it is accepted on the prefix); the content is
``s3_artifacts``' ``S3Content``.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import psycopg

from toolhost._adapters.artifact_parts import Place, check_retention
from toolhost._adapters.artifact_rows import (
    COLUMNS,
    NAMES,
    ArtifactRecordDamaged,
    damaged,
    entry,
)
from toolhost._adapters.artifact_store import JoinedArtifactStore
from toolhost._adapters.pg_invocations import first_line, migrated_pool, shown_conninfo
from toolhost._adapters.s3_artifacts import (
    S3Content,
    S3Location,
    close_clients,
    given_or_new_client,
)
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactStoreUnavailable,
)
from toolhost._model.convert import column_values, to_row
from toolhost._model.settings import StoreUnavailable
from toolhost._ports.artifacts import DamagedArtifact
from toolhost._ports.clock import Clock

__all__ = [
    "MIGRATIONS",
    "PgArtifactMetadata",
    "PgArtifactsUnavailable",
    "PostgresS3ArtifactStore",
    "content_lock",
    "open_pg_s3_artifact_store",
]

_Item = TypeVar("_Item")

#: The ``artifacts`` component on PostgreSQL: SQLite's three ``artifacts`` migrations and its
#: ``artifact_buckets`` in one schema, then the insertion sequence SQLite's rowid gives it,
#: then the location the records are bound to (the versions count on their own from 1).
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
    # The one content location the records are bound to (D572), as SQLite's ``s3_artifacts``
    # migration 2: a store of another location is refused at start. A database that has used
    # one location only is bound to it; one that used several is bound by the next start.
    (
        "artifacts",
        3,
        """
        CREATE TABLE artifact_location (
            one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
            location TEXT COLLATE "C" NOT NULL
        );
        INSERT INTO artifact_location (one, location)
            SELECT TRUE, location FROM artifact_buckets
            WHERE (SELECT count(*) FROM artifact_buckets) = 1
        """,
    ),
)

#: Text a tool or a caller chose, which may hold U+0000 (TEXT cannot, SQLite can): stored as
#: its UTF-8 bytes, which compare as the text does.
_FREE_TEXT = frozenset({"name", "conversation_id", "principal_id"})
_SELECT = f"SELECT {COLUMNS} FROM artifacts"
_INSERT = f"INSERT INTO artifacts ({COLUMNS}) VALUES ({', '.join(['%s'] * len(NAMES))})"
#: Seconds a transaction waits for a content's lock: its holder may be uploading that content
#: (minutes for a large object would be an outage anyway), far longer than the sessions'
#: two-second ``lock_timeout`` for row locks.
_CONTENT_WAIT = "120s"


def _entry(row: Sequence[Any]) -> ArtifactRecord | ArtifactRecordDamaged:
    """The record a row holds, or what is damaged in it: free text that is not UTF-8 too."""
    columns = dict(zip(NAMES, row, strict=True))
    for name in NAMES:
        if name in _FREE_TEXT and columns[name] is not None:
            try:
                columns[name] = bytes(columns[name]).decode()
            except UnicodeDecodeError:
                return damaged(columns, name)
    return entry(columns)


def _from_row(row: Sequence[Any]) -> ArtifactRecord:
    """The record ``row`` holds; raises ``ArtifactRecordDamaged`` when it holds none."""
    found = _entry(row)
    if isinstance(found, ArtifactRecordDamaged):
        raise found
    return found


def _stored(columns: Mapping[str, Any]) -> list[Any]:
    """Column values as written here: the free-text columns as UTF-8 bytes."""
    return [value.encode() if name in _FREE_TEXT and isinstance(value, str) else value
            for name, value in columns.items()]


def content_lock(checksum: str) -> int:
    """The advisory lock key for a content checksum: its first 64 bits, signed. Two contents
    sharing a key only wait for each other; correctness needs only that one content has one."""
    return int.from_bytes(bytes.fromhex(checksum.removeprefix("sha256:")[:16]), "big",
                          signed=True)


def _wait_for_content(conn: psycopg.Connection[Any], checksum: str) -> None:
    """Take ``checksum``'s content lock for the transaction, waiting up to ``_CONTENT_WAIT``."""
    conn.execute("SELECT set_config('lock_timeout', %s, true), "
                 "set_config('statement_timeout', %s, true)", (_CONTENT_WAIT, _CONTENT_WAIT))
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (content_lock(checksum),))


class PgArtifactsUnavailable(ArtifactStoreUnavailable):
    """The database holding the artifacts' metadata did not serve a request. One line naming
    the database without its password; retryable, and nothing was published."""

    def __init__(self, database: str, problem: str) -> None:
        super().__init__(f"the artifact store's database {database} is unavailable ({problem})")
        self.database = database
        self.problem = problem


class PgArtifactMetadata:
    """The ``artifacts`` table on the PostgreSQL database ``conninfo`` names
    (``ArtifactMetadata``), migrated on open. See the module docstring for why it is safe
    across hosts.

    :raises StoreUnavailable: the database cannot be reached or migrated.
    """

    def __init__(self, conninfo: str, *, max_size: int = 10, timeout: float = 5.0,
                 connect_timeout: int = 5) -> None:
        self.shown = shown_conninfo(conninfo)
        self._pool = migrated_pool(conninfo, name="toolhost-artifacts",
                                   application_name="toolhost artifacts",
                                   migrations=MIGRATIONS, max_size=max_size, timeout=timeout,
                                   connect_timeout=connect_timeout)

    @property
    def database(self) -> Path:
        """See ``ArtifactMetadata.database``: the URL without its password."""
        return Path(self.shown)

    def record(self, new: ArtifactRecord, *, reuse: bool, place: Place) -> ArtifactRecord:
        """See ``ArtifactMetadata.record``, under the content's advisory lock."""
        with self._transaction() as conn:
            _wait_for_content(conn, new.checksum)
            if reuse:
                match = self._find_live(conn, new.run_id, new.conversation_id,
                                        new.principal_id, new.origin, new.name,
                                        new.media_type, new.checksum, new.created_at)
                if match is not None:
                    if new.trust.rank < match.trust.rank:
                        lowered = column_values(ArtifactRecord, {"trust": new.trust})
                        conn.execute("UPDATE artifacts SET trust = %s WHERE id = %s",
                                     (lowered["trust"], match.id))
                        match = attrs.evolve(match, trust=new.trust)
                    return match
            place()
            conn.execute(_INSERT, _stored(to_row(new)))
            return new

    def claim(self, artifact_id: str) -> ArtifactRecord:
        """See ``ArtifactStore.claim``."""
        with self._connection() as conn:
            row = conn.execute(f"UPDATE artifacts SET claimed = TRUE WHERE id = %s "
                               f"RETURNING {COLUMNS}", (artifact_id,)).fetchone()
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

    def find_live(self, run_id: str, conversation_id: str | None, principal_id: str | None,
                  origin: ArtifactOrigin, name: str, media_type: str, checksum: str,
                  now: _dt.datetime) -> ArtifactRecord | None:
        """See ``ArtifactMetadata.find_live``."""
        with self._connection() as conn:
            return self._find_live(conn, run_id, conversation_id, principal_id, origin, name,
                                   media_type, checksum, now)

    def list_run(self, run_id: str) -> list[ArtifactRecord]:
        """See ``ArtifactStore.list_run``: ties in ``created_at`` in ``seq`` order, the order
        the rows were inserted (migration 2). ``artifacts_run_order`` finds the run's rows,
        which are then sorted (one run's artifacts: a short sort). A damaged row is skipped."""
        with self._connection() as conn:
            rows = conn.execute(f"{_SELECT} WHERE run_id = %s ORDER BY created_at, seq",
                                (run_id,)).fetchall()
        return [e for e in map(_entry, rows) if isinstance(e, ArtifactRecord)]

    def list_rows(self, filters: Sequence[tuple[str, str]], limit: int,
                  after: str | None) -> list[ArtifactRecord | DamagedArtifact]:
        """See ``ArtifactStore.list_rows``: keyset pages in (created_at, id) order."""
        clauses = [f"{column} = %s" for column, _ in filters]
        params: list[Any] = [value.encode() if column in _FREE_TEXT else value
                             for column, value in filters]
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

    def delete_expired(self, now: _dt.datetime) -> tuple[int, int]:
        """See ``ArtifactMetadata.delete_expired``: one statement."""
        cutoff = column_values(ArtifactRecord, {"expires_at": now})["expires_at"]
        with self._connection() as conn:
            row = conn.execute(
                "WITH gone AS (DELETE FROM artifacts WHERE expires_at <= %s RETURNING size) "
                "SELECT count(*), coalesce(sum(size), 0) FROM gone", (cutoff,)).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def sweep(self, items: Sequence[tuple[str, _Item]],
              remove: Callable[[_Item], int | None]) -> tuple[int, int]:
        """See ``ArtifactMetadata.sweep``: one short transaction per item, under its
        content's lock: the check sees every write that took the lock before, and a write
        after it finds the content gone."""
        removed = freed = 0
        with self._connection() as conn:
            for checksum, item in items:
                with conn.transaction():
                    _wait_for_content(conn, checksum)
                    if conn.execute("SELECT 1 FROM artifacts WHERE checksum = %s LIMIT 1",
                                    (checksum,)).fetchone() is not None:
                        continue
                    size = remove(item)
                if size is not None:
                    removed += 1
                    freed += size
        return removed, freed

    def store_id(self, location: str) -> str:
        """See ``ArtifactMetadata.store_id``."""
        with self._connection() as conn:
            conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (%s, %s) "
                         "ON CONFLICT (location) DO NOTHING", (location, new_id()))
            row = conn.execute("SELECT store_id FROM artifact_buckets WHERE location = %s",
                               (location,)).fetchone()
        assert row is not None  # inserted above, and never deleted
        return str(row[0])

    def issued(self, store_id: str) -> bool:
        """See ``ArtifactMetadata.issued``."""
        with self._connection() as conn:
            row = conn.execute("SELECT 1 FROM artifact_buckets WHERE store_id = %s",
                               (store_id,)).fetchone()
        return row is not None

    def bound_location(self) -> str | None:
        """See ``ArtifactMetadata.bound_location``."""
        with self._connection() as conn:
            row = conn.execute("SELECT location FROM artifact_location").fetchone()
        return None if row is None else str(row[0])

    def bind_location(self, location: str, *, moved_from: str | None = None) -> str:
        """See ``ArtifactMetadata.bind_location``."""
        with self._transaction() as conn:
            if moved_from is None:
                conn.execute("INSERT INTO artifact_location (one, location) VALUES (TRUE, %s) "
                             "ON CONFLICT (one) DO NOTHING", (location,))
            elif conn.execute("UPDATE artifact_location SET location = %s WHERE location = %s",
                              (location, moved_from)).rowcount:
                conn.execute(
                    "INSERT INTO artifact_buckets (location, store_id) VALUES (%s, %s) "
                    "ON CONFLICT (location) DO UPDATE SET store_id = excluded.store_id",
                    (location, new_id()))
            row = conn.execute("SELECT location FROM artifact_location").fetchone()
        assert row is not None  # inserted above, or there before
        return str(row[0])

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:  # PoolTimeout is one too
            raise PgArtifactsUnavailable(self.shown, first_line(exc)) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self._connection() as conn, conn.transaction():
            yield conn

    def _find_live(self, conn: psycopg.Connection[Any], run_id: str,
                   conversation_id: str | None, principal_id: str | None,
                   origin: ArtifactOrigin, name: str, media_type: str, checksum: str,
                   now: _dt.datetime) -> ArtifactRecord | None:
        # As SQLite's: the conversation and principal are the identity's too, a missing one
        # (NULL) matching a missing one only.
        identity = column_values(ArtifactRecord, {
            "run_id": run_id, "conversation_id": conversation_id, "principal_id": principal_id,
            "origin": origin, "name": name, "media_type": media_type,
            "checksum": checksum, "expires_at": now,  # live: expires after now
        })
        row = conn.execute(
            f"{_SELECT} WHERE run_id = %s AND conversation_id IS NOT DISTINCT FROM %s "
            "AND principal_id IS NOT DISTINCT FROM %s AND origin = %s AND name = %s "
            "AND media_type = %s AND checksum = %s "
            "AND (expires_at IS NULL OR expires_at > %s) "
            "ORDER BY created_at, id LIMIT 1",
            _stored(identity),
        ).fetchone()
        return None if row is None else _from_row(row)


class PostgresS3ArtifactStore(JoinedArtifactStore):
    """Content in ``location``'s bucket through ``client`` (and ``quick_client``, see
    ``S3Content``); metadata in the PostgreSQL database ``conninfo`` names. A composition:
    every method but ``ready`` is ``JoinedArtifactStore``'s.

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
        quick_client: Any = None,
        owns_client: bool = False,
        retention: _dt.timedelta | None = None,
        max_size: int = 10,
        timeout: float = 5.0,
        connect_timeout: int = 5,
    ) -> None:
        retention = check_retention(retention)
        metadata = PgArtifactMetadata(conninfo, max_size=max_size, timeout=timeout,
                                      connect_timeout=connect_timeout)
        content = S3Content(location, client, quick_client=quick_client,
                            owns_client=owns_client)
        try:
            try:
                content.bind(metadata)
            except PgArtifactsUnavailable as exc:
                raise StoreUnavailable(metadata.database, f"cannot use the database "
                                       f"{metadata.shown} ({exc.problem})") from None
        except BaseException:
            metadata.close()
            raise
        super().__init__(metadata, content, clock, retention=retention)
        self._bucket = content

    def ready(self) -> bool:
        """See ``JoinedArtifactStore.ready``: the database, then the bucket."""
        return super().ready() and self._bucket.ready()


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
    retention = check_retention(retention)
    clients, owns_client = given_or_new_client(client, env, Path(shown_conninfo(conninfo)))
    try:
        return PostgresS3ArtifactStore(location, clients.transfer, conninfo, clock,
                                       quick_client=clients.quick, owns_client=owns_client,
                                       retention=retention)
    except BaseException:
        if owns_client:
            close_clients(clients)
        raise
