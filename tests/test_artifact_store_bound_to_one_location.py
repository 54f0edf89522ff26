"""A database's artifact records are bound to the one content location their content is in: a
host on that database with another bucket or prefix is refused at start, in one line naming
both locations, as a host with another database is refused on a prefix (D182). Moving the
content is copying the bound prefix whole, its marker included, and starting on the copy.

Before: a host of the shared PostgreSQL database with ``s3://bkt/elsewhere`` (or another
bucket) started, listed every other host's artifact and read each as corrupted content."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)

from toolhost._adapters.pg_artifacts import MIGRATIONS as PG_MIGRATIONS
from toolhost._adapters.pg_artifacts import PostgresS3ArtifactStore, open_pg_s3_artifact_store
from toolhost._adapters.pg_invocations import _migrate
from toolhost._adapters.s3_artifacts import MARKER, S3ArtifactStore, open_s3_artifact_store
from toolhost._adapters.sqlite_artifacts import BUCKET_MIGRATIONS, MIGRATIONS
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, migrate
from toolhost._model.artifacts import ArtifactOrigin, ArtifactRecord, NewArtifact
from toolhost._model.settings import StoreUnavailable
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import ArtifactStore
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name


def put(store: ArtifactStore, content: bytes = b"bound") -> ArtifactRecord:
    return store.put(NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="out.txt",
                                 media_type="text/plain", trust=Trust.INTERNAL_TOOL), content)


def keys(server: S3Server, bucket: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def copy_prefix(server: S3Server, bucket: str, source: str, target_bucket: str,
                target: str, *, marker: bool = True) -> None:
    """What ``aws s3 sync s3://bucket/source s3://target_bucket/target`` does (the marker left
    out with ``marker=False``)."""
    client = server.client()
    for key in keys(server, bucket):
        if key.startswith(f"{source}/") and (marker or not key.endswith(MARKER)):
            client.copy_object(Bucket=target_bucket, Key=target + key[len(source):],
                               CopySource={"Bucket": bucket, "Key": key})


@pytest.fixture
def pg_host(s3_server: S3Server, s3_bucket: str,
            pg_database: str) -> Iterator[Any]:
    """Open a PostgreSQL host's store on ``s3://BUCKET/PREFIX`` (the test's bucket by default)."""
    opened: list[PostgresS3ArtifactStore] = []
    env = s3_server.env(s3_bucket)

    def open_host(prefix: str, bucket: str = s3_bucket) -> PostgresS3ArtifactStore:
        store = open_pg_s3_artifact_store(f"s3://{bucket}/{prefix}", pg_database, env,
                                          FixedClock(T0))
        opened.append(store)
        return store

    yield open_host
    for store in opened:
        store.close()


def refusal(call: Any) -> str:
    with pytest.raises(StoreUnavailable) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message
    return message


def bound_elsewhere(here: str, bound: str) -> str:
    return (f"the artifact store {here} is not this database's: its artifacts are in {bound} "
            f"(set TOOLHOST_ARTIFACT_STORE={bound}; to move them here, stop every host on "
            f"this database and copy everything under {bound}/ to {here}/, its {MARKER} "
            "included, before starting one)")


# --------------------------------------------------------------------------------------------
# Several hosts on one PostgreSQL database
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("other", ["elsewhere", "other-bucket"])
def test_a_host_of_another_prefix_or_bucket_on_the_database_is_refused_at_start(
    pg_host: Any, s3_server: S3Server, s3_bucket: str, other: str,
) -> None:
    first = pg_host("prod")
    written = put(first)
    bucket = s3_bucket
    if other == "other-bucket":
        bucket = s3_server.new_bucket()
    prefix = "elsewhere" if other == "elsewhere" else "prod"
    before = keys(s3_server, bucket)
    message = refusal(lambda: pg_host(prefix, bucket))
    assert message == bound_elsewhere(f"s3://{bucket}/{prefix}", f"s3://{s3_bucket}/prod")
    assert S3Server.SECRET_KEY not in message and S3Server.ACCESS_KEY not in message
    assert keys(s3_server, bucket) == before  # no marker claimed there
    # The first location stays the database's: a host of it starts and reads as before.
    assert pg_host("prod").read(written.id) == b"bound"


def test_moving_the_prefix_is_copying_it_whole_then_starting_on_the_copy(
    pg_host: Any, s3_server: S3Server, s3_bucket: str,
) -> None:
    written = put(pg_host("prod"))
    # The content alone, without the marker, is not a move: refused, nothing bound.
    copy_prefix(s3_server, s3_bucket, "prod", s3_bucket, "moved", marker=False)
    message = refusal(lambda: pg_host("moved"))
    assert message == bound_elsewhere(f"s3://{s3_bucket}/moved", f"s3://{s3_bucket}/prod")
    # The marker too: the database is bound to the copy from then on.
    copy_prefix(s3_server, s3_bucket, "prod", s3_bucket, "moved")
    moved = pg_host("moved")
    assert moved.read(written.id) == b"bound"
    assert put(moved, b"after the move").checksum != written.checksum
    assert refusal(lambda: pg_host("prod")) == bound_elsewhere(
        f"s3://{s3_bucket}/prod", f"s3://{s3_bucket}/moved")
    assert pg_host("moved").read(written.id) == b"bound"  # restarted on the copy


def test_a_marker_of_another_database_at_the_new_prefix_moves_nothing(
    pg_host: Any, s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    pg_host("prod").close()
    # Another database (a host's own SQLite) holds s3://bucket/theirs.
    open_s3_artifact_store(f"s3://{s3_bucket}/theirs", s3_server.env(s3_bucket), tmp_path,
                           FixedClock(T0)).close()
    assert refusal(lambda: pg_host("theirs")) == bound_elsewhere(
        f"s3://{s3_bucket}/theirs", f"s3://{s3_bucket}/prod")


def test_a_database_that_used_one_location_is_bound_to_it_by_the_migration(
    s3_server: S3Server, s3_bucket: str, pg_database: str, pg_host: Any,
) -> None:
    # A database as 0.5.0 left it: migrations 1 and 2, one location in artifact_buckets.
    _migrate(pg_database, 5, "the test database", PG_MIGRATIONS[:2])
    with psycopg.connect(pg_database) as conn:
        conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (%s, 'old-id')",
                     (f"s3://{s3_bucket}/prod",))
    s3_server.client().put_object(Bucket=s3_bucket, Key=f"prod/{MARKER}",
                                  Body=b'{"format": 1, "store_id": "old-id"}')
    assert refusal(lambda: pg_host("elsewhere")) == bound_elsewhere(
        f"s3://{s3_bucket}/elsewhere", f"s3://{s3_bucket}/prod")
    pg_host("prod")


def test_a_database_that_used_several_locations_is_bound_by_the_next_start(
    s3_server: S3Server, s3_bucket: str, pg_database: str, pg_host: Any,
) -> None:
    # Hosts of two prefixes were accepted before: which holds the records' content is not
    # known, so the first host to start after the upgrade binds its own.
    _migrate(pg_database, 5, "the test database", PG_MIGRATIONS[:2])
    with psycopg.connect(pg_database) as conn:
        for n, prefix in enumerate(("prod", "elsewhere")):
            conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (%s, %s)",
                         (f"s3://{s3_bucket}/{prefix}", f"id-{n}"))
            s3_server.client().put_object(
                Bucket=s3_bucket, Key=f"{prefix}/{MARKER}",
                Body=b'{"format": 1, "store_id": "id-%d"}' % n)
    pg_host("elsewhere")
    assert refusal(lambda: pg_host("prod")) == bound_elsewhere(
        f"s3://{s3_bucket}/prod", f"s3://{s3_bucket}/elsewhere")


# --------------------------------------------------------------------------------------------
# One host's SQLite database with a bucket
# --------------------------------------------------------------------------------------------


def sqlite_store(server: S3Server, bucket: str, prefix: str, data_dir: Path) -> S3ArtifactStore:
    return open_s3_artifact_store(f"s3://{bucket}/{prefix}", server.env(bucket), data_dir,
                                  FixedClock(T0))


def test_a_data_directory_bound_to_one_prefix_refuses_another(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    store = sqlite_store(s3_server, s3_bucket, "prod", tmp_path)
    written = put(store)
    store.close()
    assert refusal(lambda: sqlite_store(s3_server, s3_bucket, "elsewhere", tmp_path)) == (
        bound_elsewhere(f"s3://{s3_bucket}/elsewhere", f"s3://{s3_bucket}/prod"))
    copy_prefix(s3_server, s3_bucket, "prod", s3_bucket, "elsewhere")
    store = sqlite_store(s3_server, s3_bucket, "elsewhere", tmp_path)
    try:
        assert store.read(written.id) == b"bound"
    finally:
        store.close()


def test_an_upgraded_data_directory_is_bound_to_the_one_prefix_it_used(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    conn = connect(tmp_path / DATABASE_NAME)
    try:
        migrate(conn, [*MIGRATIONS, *BUCKET_MIGRATIONS[:1]])  # as 0.5.0 left it
        conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (?, 'old-id')",
                     (f"s3://{s3_bucket}/prod",))
    finally:
        conn.close()
    s3_server.client().put_object(Bucket=s3_bucket, Key=f"prod/{MARKER}",
                                  Body=b'{"format": 1, "store_id": "old-id"}')
    assert refusal(lambda: sqlite_store(s3_server, s3_bucket, "elsewhere", tmp_path)) == (
        bound_elsewhere(f"s3://{s3_bucket}/elsewhere", f"s3://{s3_bucket}/prod"))
    sqlite_store(s3_server, s3_bucket, "prod", tmp_path).close()
    with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as check:
        assert check.execute("SELECT location FROM artifact_location").fetchall() == [
            (f"s3://{s3_bucket}/prod",)]


def test_a_refused_first_start_binds_nothing(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    # The prefix belongs to another database: this one is refused and stays unbound, so the
    # operator's next choice of prefix starts.
    sqlite_store(s3_server, s3_bucket, "taken", tmp_path / "one").close()
    refusal(lambda: sqlite_store(s3_server, s3_bucket, "taken", tmp_path / "two"))
    sqlite_store(s3_server, s3_bucket, "free", tmp_path / "two").close()


# --------------------------------------------------------------------------------------------
# A move whose hosts start together, or whose marker rewrite failed; a refused first start
# --------------------------------------------------------------------------------------------


class MarkerPutFails:
    """The server's client, but for ``fails`` PutObjects of ``key`` that fail as a dropped
    connection does; ``after_create`` runs after a create (``If-None-Match``) of ``key``."""

    def __init__(self, client: Any, key: str, *, fails: int = 0,
                 after_create: Any = None) -> None:
        self._real, self._key = client, key
        self.fails, self._after_create = fails, after_create

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def put_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"] == self._key and self.fails:
            self.fails -= 1
            raise ConnectionError("connection reset during PutObject")
        answer = self._real.put_object(**kwargs)
        if kwargs["Key"] == self._key and "IfNoneMatch" in kwargs and self._after_create:
            self._after_create()
        return answer


def marker_names(server: S3Server, bucket: str, prefix: str) -> object:
    body = server.client().get_object(Bucket=bucket, Key=f"{prefix}/{MARKER}")["Body"].read()
    return json.loads(body)["store_id"]


def store_id_of(pg_database: str, location: str) -> str:
    with psycopg.connect(pg_database) as conn:
        row = conn.execute("SELECT store_id FROM artifact_buckets WHERE location = %s",
                           (location,)).fetchone()
    assert row is not None
    return str(row[0])


def test_a_host_that_read_the_copied_marker_before_another_moved_the_database_starts(
    pg_host: Any, s3_server: S3Server, s3_bucket: str, pg_database: str,
) -> None:
    """Hosts started together on the copy: one moves the database and rewrites the marker;
    another read the copied marker before that rewrite and the binding after the move."""
    written = put(pg_host("prod"))
    copy_prefix(s3_server, s3_bucket, "prod", s3_bucket, "moved")
    moved, prod = f"s3://{s3_bucket}/moved", f"s3://{s3_bucket}/prod"
    old_id = store_id_of(pg_database, prod)
    # The database as the other host's move left it, the marker not yet rewritten.
    with psycopg.connect(pg_database) as conn:
        conn.execute("UPDATE artifact_location SET location = %s", (moved,))
        conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (%s, 'new-id')",
                     (moved,))
    assert marker_names(s3_server, s3_bucket, "moved") == old_id
    assert pg_host("moved").read(written.id) == b"bound"
    assert marker_names(s3_server, s3_bucket, "moved") == "new-id"
    assert refusal(lambda: pg_host("prod")) == bound_elsewhere(prod, moved)


def test_a_move_whose_marker_rewrite_failed_is_completed_by_the_next_start(
    pg_host: Any, s3_server: S3Server, s3_bucket: str, pg_database: str,
) -> None:
    written = put(pg_host("prod"))
    copy_prefix(s3_server, s3_bucket, "prod", s3_bucket, "moved")
    moved, prod = f"s3://{s3_bucket}/moved", f"s3://{s3_bucket}/prod"
    failing = MarkerPutFails(s3_server.client(), f"moved/{MARKER}", fails=1)
    message = refusal(lambda: open_pg_s3_artifact_store(
        moved, pg_database, s3_server.env(s3_bucket), FixedClock(T0), client=failing))
    assert message == (f"cannot use the artifact store {moved} (PutObject: ConnectionError): "
                       "cannot reach it: check TOOLHOST_S3_ENDPOINT_URL (or AWS_ENDPOINT_URL), "
                       "the network and the server")
    store = pg_host("moved")  # the retry
    assert store.read(written.id) == b"bound"
    assert marker_names(s3_server, s3_bucket, "moved") == store_id_of(pg_database, moved)
    assert refusal(lambda: pg_host("prod")) == bound_elsewhere(prod, moved)
    assert pg_host("moved").read(written.id) == b"bound"


def test_moving_a_database_that_used_several_locations_is_copying_one_whole(
    s3_server: S3Server, s3_bucket: str, pg_database: str, pg_host: Any,
) -> None:
    # Unbound by the migration (hosts of two prefixes were accepted before): the operator
    # copies one of them, its marker included, and starts on the copy.
    _migrate(pg_database, 5, "the test database", PG_MIGRATIONS[:2])
    with psycopg.connect(pg_database) as conn:
        for n, prefix in enumerate(("prod", "elsewhere")):
            conn.execute("INSERT INTO artifact_buckets (location, store_id) VALUES (%s, %s)",
                         (f"s3://{s3_bucket}/{prefix}", f"id-{n}"))
            s3_server.client().put_object(
                Bucket=s3_bucket, Key=f"{prefix}/{MARKER}",
                Body=b'{"format": 1, "store_id": "id-%d"}' % n)
    copy_prefix(s3_server, s3_bucket, "elsewhere", s3_bucket, "moved")
    pg_host("moved")
    moved = f"s3://{s3_bucket}/moved"
    assert marker_names(s3_server, s3_bucket, "moved") == store_id_of(pg_database, moved)
    assert marker_names(s3_server, s3_bucket, "moved") not in ("id-0", "id-1")
    for prefix in ("prod", "elsewhere"):
        assert refusal(lambda: pg_host(prefix)) == bound_elsewhere(  # noqa: B023
            f"s3://{s3_bucket}/{prefix}", moved)


def test_a_first_start_that_lost_the_binding_to_another_prefix_leaves_no_marker(
    s3_server: S3Server, s3_bucket: str, pg_database: str, tmp_path: Path,
) -> None:
    """Two first starts of a new database on two prefixes: the one refused wrote its marker
    before the other bound the database; it removes it, so the prefix stays free."""
    _migrate(pg_database, 5, "the test database", PG_MIGRATIONS)

    def other_start_binds() -> None:  # between this start's claim and its binding
        with psycopg.connect(pg_database) as conn:
            conn.execute("INSERT INTO artifact_location (one, location) VALUES (TRUE, %s)",
                         (f"s3://{s3_bucket}/prod",))

    racing = MarkerPutFails(s3_server.client(), f"lost/{MARKER}",
                            after_create=other_start_binds)
    message = refusal(lambda: open_pg_s3_artifact_store(
        f"s3://{s3_bucket}/lost", pg_database, s3_server.env(s3_bucket), FixedClock(T0),
        client=racing))
    assert message == bound_elsewhere(f"s3://{s3_bucket}/lost", f"s3://{s3_bucket}/prod")
    assert [k for k in keys(s3_server, s3_bucket) if k.startswith("lost/")] == []
    # Another database starts there.
    sqlite_store(s3_server, s3_bucket, "lost", tmp_path).close()
