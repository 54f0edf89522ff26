"""Artifact metadata on PostgreSQL, content on S3 (real servers): the contract unchanged, then
what sharing one database and one bucket between hosts must keep true."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import make_plugin, make_spec
from pg_server import PgServer, pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    require_moto,
    s3_bucket_fixture,
    s3_server_fixture,
)

from toolhost import Tool, ToolExecutionContext, ToolOutput
from toolhost._adapters.pg_artifacts import (
    _INSERT,
    PgArtifactsUnavailable,
    PostgresS3ArtifactStore,
    _stored,
    content_lock,
    open_pg_s3_artifact_store,
)
from toolhost._adapters.pg_artifacts import MIGRATIONS as PG_MIGRATIONS
from toolhost._adapters.pg_invocations import _migrate
from toolhost._adapters.s3_artifacts import MARKER, PART_SIZE, open_s3_artifact_store
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._composition import Host
from toolhost._model.artifacts import (
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactStoreUnavailable,
    NewArtifact,
)
from toolhost._model.convert import to_row
from toolhost._model.digest import sha256_digest
from toolhost._model.invocations import InvocationState
from toolhost._model.outcome import OutcomeStatus
from toolhost._model.settings import Settings, StoreUnavailable
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._testing.artifact_store_contract import T0, ArtifactStoreContract
from toolhost._testing.clocks import FixedClock

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

PREFIX = "artifacts"


class TestPgS3ArtifactStoreContract(ArtifactStoreContract):
    @pytest.fixture(autouse=True)
    def _servers(self, s3_server: S3Server, s3_bucket: str, pg_database: str) -> Iterator[None]:
        self.server = s3_server
        self.bucket = s3_bucket
        self.database = pg_database
        self.opened: list[PostgresS3ArtifactStore] = []
        yield
        for store in self.opened:
            store.close()

    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        store = open_pg_s3_artifact_store(f"s3://{self.bucket}/{PREFIX}", self.database, {},
                                          clock, client=self.server.store_client())
        self.opened.append(store)
        return store

    def damage_content(
        self, store: ArtifactStore, record: ArtifactRecord, stored: bytes | None
    ) -> None:
        # The content object rewritten (or deleted) behind the store's back.
        key = f"{PREFIX}/sha256/{record.checksum.removeprefix('sha256:')}"
        if stored is None:
            self.server.client().delete_object(Bucket=self.bucket, Key=key)
        else:
            self.server.client().put_object(Bucket=self.bucket, Key=key, Body=stored)


class TestPgS3ArtifactStoreWithRetentionContract(TestPgS3ArtifactStoreContract):
    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        store = open_pg_s3_artifact_store(f"s3://{self.bucket}/{PREFIX}", self.database, {},
                                          clock, client=self.server.store_client(),
                                          retention=dt.timedelta(days=30))
        self.opened.append(store)
        return store


# --------------------------------------------------------------------------------------------

@pytest.fixture
def hosts(s3_server: S3Server, s3_bucket: str,
          pg_database: str) -> Iterator[list[PostgresS3ArtifactStore]]:
    """Two stores as two hosts open them: one database, one bucket, clients of their own."""
    opened = [open_pg_s3_artifact_store(f"s3://{s3_bucket}/{PREFIX}", pg_database,
                                        s3_server.env(s3_bucket), FixedClock(T0))
              for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def put(store: ArtifactStore, content: bytes = b"shared", *, now: dt.datetime = T0,
        **overrides: Any) -> ArtifactRecord:
    fields: dict[str, Any] = dict(
        run_id="run-1", origin=ArtifactOrigin.EXPORT, name="out.txt", media_type="text/plain",
        trust=Trust.INTERNAL_TOOL,
    )
    fields.update(overrides)
    return store.put_or_reuse(NewArtifact(**fields), content, now=now)


def test_hosts_on_one_database_share_the_prefix_and_each_others_artifacts(
    hosts: list[PostgresS3ArtifactStore],
) -> None:
    a, b = hosts
    written = put(a)
    assert b.get(written.id) == written
    assert b.read(written.id) == b"shared"
    assert put(b) == written  # the identity rule holds across hosts
    assert b.list_run("run-1") == [written]


def test_a_run_written_by_two_hosts_lists_in_the_order_stored(
    hosts: list[PostgresS3ArtifactStore],
) -> None:
    # One instant (a fixed clock) and random ids: only the shared sequence orders them.
    made = [put(hosts[i % 2], b"%d" % i, name=f"n{i:02}") for i in range(12)]
    for store in hosts:
        assert [r.id for r in store.list_run("run-1")] == [r.id for r in made]


def test_migration_2_numbers_the_rows_already_there_and_later_ones_after_them(
    s3_server: S3Server, s3_bucket: str, pg_database: str,
) -> None:
    # A database as the first release left it: migration 1 only, rows already in.
    _migrate(pg_database, 5, "the test database", PG_MIGRATIONS[:1])
    old = [ArtifactRecord(
        id=f"old-{i}", run_id="run-1", conversation_id=None, origin=ArtifactOrigin.EXPORT,
        name=f"old{i}", media_type="text/plain", size=1, checksum=sha256_digest(b"x"),
        trust=Trust.INTERNAL_TOOL, created_at=T0, expires_at=None, principal_id=None,
        claimed=True) for i in range(3)]
    with psycopg.connect(pg_database) as conn:
        for record in old:
            conn.execute(_INSERT, _stored(to_row(record)))
    store = open_pg_s3_artifact_store(f"s3://{s3_bucket}/{PREFIX}", pg_database,
                                      s3_server.env(s3_bucket), FixedClock(T0))
    try:
        new = [put(store, b"%d" % i, name=f"new{i}") for i in range(3)]
        listed = [r.id for r in store.list_run("run-1")]
        # The old rows in whatever order the migration numbered them, then the new in order.
        assert sorted(listed[:3]) == [r.id for r in old]
        assert listed[3:] == [r.id for r in new]
        with psycopg.connect(pg_database) as conn:
            assert ("artifacts", 2) in conn.execute(
                "SELECT component, version FROM toolhost_schema_migrations").fetchall()
            seqs = [row[0] for row in conn.execute("SELECT seq FROM artifacts").fetchall()]
        assert None not in seqs and len(set(seqs)) == len(seqs) == 6
    finally:
        store.close()


def test_names_and_ids_with_a_nul_round_trip_as_on_sqlite(
    hosts: list[PostgresS3ArtifactStore], tmp_path: Path,
) -> None:
    """PostgreSQL TEXT cannot hold U+0000, which SQLite stores: a tool's artifact name or a
    caller's ids holding one are written, found and listed as on SQLite."""
    a, b = hosts
    sqlite = open_artifact_store(tmp_path, FixedClock(T0))
    try:
        fields: dict[str, Any] = dict(name="a\x00b.txt", conversation_id="c\x00",
                                      principal_id="p\x00")
        written, reference = put(a, **fields), put(sqlite, **fields)
        assert (written.name, written.conversation_id, written.principal_id) == (
            reference.name, reference.conversation_id, reference.principal_id)
        assert b.get(written.id) == written
        assert put(b, **fields) == written  # the identity rule finds it
        assert b.list_artifacts(conversation_id="c\x00") == [written]
    finally:
        sqlite.close()


def test_concurrent_hosts_writing_one_artifact_leave_one_record(
    hosts: list[PostgresS3ArtifactStore],
) -> None:
    barrier = threading.Barrier(8)
    refs: list[str] = []

    def work(store: PostgresS3ArtifactStore) -> None:
        barrier.wait()
        refs.append(put(store, b"raced").id)

    threads = [threading.Thread(target=work, args=(hosts[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(refs) == 8 and len(set(refs)) == 1
    assert [r.id for r in hosts[0].list_run("run-1")] == refs[:1]


def test_purge_waits_for_a_write_in_flight_and_keeps_its_content(
    hosts: list[PostgresS3ArtifactStore], pg_database: str, s3_server: S3Server,
    s3_bucket: str,
) -> None:
    """A write on another host that has placed its object but not committed its row: purge
    must not take the object. Without the content lock, purge's check would not see the
    uncommitted row and would delete the object the row is about to reference."""
    writer, purger = hosts
    content = b"in flight"
    checksum = sha256_digest(content)
    key = f"{PREFIX}/sha256/{checksum.removeprefix('sha256:')}"
    s3_server.client().put_object(Bucket=s3_bucket, Key=key, Body=content)
    record = ArtifactRecord(
        id="in-flight", run_id="run-1", conversation_id=None, origin=ArtifactOrigin.EXPORT,
        name="f.txt", media_type="text/plain", size=len(content), checksum=checksum,
        trust=Trust.INTERNAL_TOOL, created_at=T0, expires_at=None, principal_id=None,
        claimed=True)
    row = to_row(record)
    report: list[Any] = []
    with psycopg.connect(pg_database) as conn:  # the write's transaction, as _record runs it
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (content_lock(checksum),))
        conn.execute(f"INSERT INTO artifacts ({', '.join(row)}) "
                     f"VALUES ({', '.join(['%s'] * len(row))})", list(row.values()))
        purging = threading.Thread(target=lambda: report.append(purger.purge(T0)))
        purging.start()
        # Purge is held at this content's lock until the write commits.
        with psycopg.connect(pg_database, autocommit=True) as watch:
            for _ in range(3000):
                if watch.execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                                 "AND NOT granted").fetchone() is not None:
                    break
                watch.execute("SELECT pg_sleep(0.01)")
            else:
                raise AssertionError("purge never waited for the content's lock")
        assert purging.is_alive()
        conn.commit()
    purging.join()
    assert report[0].content_files == 0
    assert writer.read("in-flight") == content


def test_without_a_bucket_the_artifacts_stay_with_their_files_on_this_machine(
    pg_database: str, tmp_path: Path,
) -> None:
    with Host.from_plugins({}, data_dir=tmp_path,
                           settings=Settings(env={"TOOLHOST_DATABASE_URL": pg_database})) as host:
        store = host.pipeline.artifacts
        assert type(store) is SQLiteArtifactStore
        assert store.root == tmp_path / "artifacts"
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT to_regclass('artifacts')").fetchone() == (None,)


def test_a_database_with_another_store_id_is_refused_on_the_prefix(
    s3_server: S3Server, s3_bucket: str, pg_database: str, tmp_path: Path,
) -> None:
    url = f"s3://{s3_bucket}/{PREFIX}"
    local = open_s3_artifact_store(url, s3_server.env(s3_bucket), tmp_path, FixedClock(T0))
    local.close()
    with pytest.raises(StoreUnavailable) as refused:
        open_pg_s3_artifact_store(url, pg_database, s3_server.env(s3_bucket), FixedClock(T0))
    message = str(refused.value)
    assert "belongs to another toolhost database" in message
    assert f"{url}/{MARKER}" in message and "\n" not in message


def test_an_unreachable_database_stops_the_start_in_one_line(
    s3_server: S3Server, s3_bucket: str, pg_server: PgServer,
) -> None:
    url = pg_server.url("postgres", password="hunter2").replace(
        f":{pg_server.port}/", ":1/")
    with pytest.raises(StoreUnavailable) as refused:
        open_pg_s3_artifact_store(f"s3://{s3_bucket}/{PREFIX}", url,
                                  s3_server.env(s3_bucket), FixedClock(T0))
    message = str(refused.value)
    assert "cannot reach the database postgresql://postgres@127.0.0.1:1/postgres" in message
    assert "hunter2" not in message and "\n" not in message


def test_losing_the_database_mid_call_is_unavailable_and_service_returns(
    hosts: list[PostgresS3ArtifactStore], pg_server: PgServer,
) -> None:
    store = hosts[0]
    before = put(store, b"before")
    pg_server.stop()
    try:
        with pytest.raises(PgArtifactsUnavailable) as lost:
            put(store, b"during")
        assert isinstance(lost.value, ArtifactStoreUnavailable)
        assert "\n" not in str(lost.value)
    finally:
        pg_server.start()
    after = put(store, b"after")  # the same store: no restart
    # One instant (a fixed clock): the two are listed in the order they were stored.
    assert [r.id for r in store.list_run("run-1")] == [before.id, after.id]


# -------------------------------------------------------------------- the bucket lost in a call

_IN = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
       "additionalProperties": False}
_OUT = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
        "additionalProperties": False}
#: Run by the tool once its first part is in the bucket (the test stops the server there).
_AFTER_FIRST_PART: list[Callable[[], None]] = []
_LONG = bytes(range(256)) * (PART_SIZE * 2 // 256) + b"tail"


def _export(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    with context.artifacts.stream(origin=ArtifactOrigin.EXPORT, name=arguments["name"],
                                  media_type="application/octet-stream",
                                  trust=Trust.INTERNAL_TOOL, max_bytes=len(_LONG)) as stream:
        for start in range(0, len(_LONG), PART_SIZE):
            stream.write(_LONG[start:start + PART_SIZE])
            if start == 0:
                for hook in _AFTER_FIRST_PART:
                    hook()
        ref = stream.commit()
    return ToolOutput(structured={"id": ref.id}, content=ref.id)


# 16 MiB to a local S3 server and a row: well under a second alone, but CI runs this beside
# seven other workers on two cores, where the fixtures' 2 s timeout ended the call first.
_PLUGIN = make_plugin(tools=[Tool(make_spec(name="fx.export", input_schema=_IN,
                                            output_schema=_OUT, timeout_s=30), call=_export)])


@pytest.fixture
def own_server() -> Iterator[S3Server]:
    """A moto server of this test's own, to stop and start."""
    require_moto()
    server = S3Server()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        _AFTER_FIRST_PART.clear()


def test_a_bucket_lost_mid_stream_fails_the_call_statically_and_service_returns(
    own_server: S3Server, pg_database: str, tmp_path: Path,
) -> None:
    own_server.create_bucket("toolhost-shared")
    env = {"TOOLHOST_DATABASE_URL": pg_database, **own_server.env("toolhost-shared")}
    with Host.from_plugins({"fx-dist": _PLUGIN}, data_dir=tmp_path,
                           settings=Settings(env=env)) as host:
        store = host.pipeline.artifacts
        assert isinstance(store, PostgresS3ArtifactStore)
        _AFTER_FIRST_PART.append(own_server.stop)
        lost = host.invoke_sync("fx.export", {"name": "big.bin"})
        assert lost.status is OutcomeStatus.FAILED and lost.failure is not None
        assert lost.failure.reason_code == "tool.upstream_unavailable.artifact_store"
        assert lost.failure.retryable is True
        assert "toolhost-shared" not in lost.content
        assert lost.invocation_id is not None
        assert host.pipeline.row(lost.invocation_id).state is InvocationState.FAILED
        assert store.list_artifacts() == []  # nothing half-published
        _AFTER_FIRST_PART.clear()

        own_server.start()  # moto keeps nothing across a restart: the bucket is made again
        own_server.create_bucket("toolhost-shared")
        again = host.invoke_sync("fx.export", {"name": "big.bin"})  # the same host
        assert again.ok, again
        assert store.read(again.content) == _LONG
        assert [r.id for r in store.list_artifacts()] == [again.content]
        uploads = own_server.client().list_multipart_uploads(Bucket="toolhost-shared")
        assert uploads.get("Uploads", []) == []
