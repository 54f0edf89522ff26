"""The ArtifactStore on S3 (a real moto server): the contract unchanged, then what the bucket
holds after streams, corruption, purge and faults."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    require_moto,
    s3_bucket_fixture,
    s3_server_fixture,
)

from toolhost import Tool, ToolExecutionContext, ToolOutput
from toolhost._adapters.s3_artifacts import (
    MARKER,
    PART_SIZE,
    S3ArtifactStore,
    S3Location,
    S3Unavailable,
    open_s3_artifact_store,
)
from toolhost._composition import Host
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactTooLarge,
    NewArtifact,
    PurgeReport,
)
from toolhost._model.invocations import InvocationState
from toolhost._model.outcome import OutcomeStatus
from toolhost._model.settings import SettingError, Settings, StoreUnavailable
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import STAGING_STALE_AFTER, ArtifactStore, ArtifactUpload
from toolhost._ports.clock import Clock
from toolhost._testing.artifact_store_contract import T0, ArtifactStoreContract
from toolhost._testing.clocks import FixedClock
from toolhost.testing import run_toolhost


def toolhost(data_dir: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``toolhost artifacts ARGS`` as an operator runs it, with no plugin loaded."""
    return run_toolhost("artifacts", *args, data_dir=data_dir, plugins="", env=env,
                        drop=("AWS_",))


class TestS3ArtifactStoreContract(ArtifactStoreContract):
    @pytest.fixture(autouse=True)
    def _bucket(self, s3_server: S3Server, s3_bucket: str) -> None:
        self.server = s3_server
        self.bucket = s3_bucket

    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        return open_s3_artifact_store(f"s3://{self.bucket}/artifacts", {}, tmp_path, clock,
                                      client=self.server.store_client())

    def damage_content(
        self, store: ArtifactStore, record: ArtifactRecord, stored: bytes | None
    ) -> None:
        damage_object(self.server, self.bucket, record, stored)


class TestS3ArtifactStoreWithRetentionContract(TestS3ArtifactStoreContract):
    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        return open_s3_artifact_store(f"s3://{self.bucket}/artifacts", {}, tmp_path, clock,
                                      client=self.server.store_client(),
                                      retention=dt.timedelta(days=30))


# --------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------

PREFIX = "artifacts"
MARKER_KEY = f"{PREFIX}/{MARKER}"


@pytest.fixture
def store(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> Iterator[S3ArtifactStore]:
    s = open_s3_artifact_store(f"s3://{s3_bucket}/{PREFIX}", s3_server.env(s3_bucket),
                               tmp_path, FixedClock(T0))
    yield s
    s.close()


def put(store: ArtifactStore, content: bytes = b"hello s3", **overrides: Any) -> ArtifactRecord:
    fields: dict[str, Any] = dict(
        run_id="run-1", origin=ArtifactOrigin.EXPORT, name="out.txt", media_type="text/plain",
        trust=Trust.INTERNAL_TOOL,
    )
    fields.update(overrides)
    return store.put(NewArtifact(**fields), content)


def begin(store: ArtifactStore, max_bytes: int = 3 * PART_SIZE, **overrides: Any) -> ArtifactUpload:
    fields: dict[str, Any] = dict(
        run_id="run-1", origin=ArtifactOrigin.MODEL_OUTPUT, name="big.bin",
        media_type="application/octet-stream", trust=Trust.EXTERNAL_UNTRUSTED,
    )
    fields.update(overrides)
    return store.begin(NewArtifact(**fields), max_bytes=max_bytes)


def damage_object(server: S3Server, bucket: str, record: ArtifactRecord,
                  stored: bytes | None) -> None:
    """The content object rewritten (or deleted) behind the store's back."""
    key = content_key(record)
    if stored is None:
        server.client().delete_object(Bucket=bucket, Key=key)
    else:
        server.client().put_object(Bucket=bucket, Key=key, Body=stored)


def keys(server: S3Server, bucket: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def uploads(server: S3Server, bucket: str) -> list[str]:
    listed = server.client().list_multipart_uploads(Bucket=bucket)
    return sorted(u["Key"] for u in listed.get("Uploads", []))


def content_key(record: ArtifactRecord) -> str:
    return f"{PREFIX}/sha256/{record.checksum.removeprefix('sha256:')}"


#: A stream that needs a multipart upload: two full parts and a short last one.
LONG = bytes(range(256)) * (PART_SIZE * 2 // 256) + b"tail"


# --------------------------------------------------------------------------------------------
# Streams: published on commit, and never otherwise
# --------------------------------------------------------------------------------------------


def test_a_short_stream_is_one_object_at_its_content_address(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    upload = begin(store)
    upload.write(b"short ")
    upload.write(b"stream")
    assert keys(s3_server, s3_bucket) == [MARKER_KEY]  # buffered: nothing sent yet
    record = upload.commit(T0)
    assert record.checksum == "sha256:" + hashlib.sha256(b"short stream").hexdigest()
    assert keys(s3_server, s3_bucket) == [content_key(record), MARKER_KEY]
    assert uploads(s3_server, s3_bucket) == []
    assert store.read(record.id) == b"short stream"


def test_a_long_stream_is_a_multipart_upload_that_publishes_only_on_commit(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    upload = begin(store)
    for start in range(0, len(LONG), 3 * 1024 * 1024):
        upload.write(LONG[start:start + 3 * 1024 * 1024])
    # Two parts are on the server, but as parts of an upload: no object, no artifact.
    assert keys(s3_server, s3_bucket) == [MARKER_KEY]
    assert [k.rsplit("/", 1)[0] for k in uploads(s3_server, s3_bucket)] == [f"{PREFIX}/staging"]
    assert store.list_run("run-1") == []
    record = upload.commit(T0)
    # Published at its content address; the staged copy and the upload are gone.
    assert keys(s3_server, s3_bucket) == [content_key(record), MARKER_KEY]
    assert uploads(s3_server, s3_bucket) == []
    assert record.size == len(LONG)
    assert store.read(record.id) == LONG


def test_a_long_stream_of_content_already_stored_reuses_the_object(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    first = put(store, LONG, run_id="run-0")
    upload = begin(store)
    upload.write(LONG)
    second = upload.commit(T0)
    assert second.id != first.id and second.checksum == first.checksum
    assert keys(s3_server, s3_bucket) == [content_key(first), MARKER_KEY]
    assert store.read(second.id) == LONG


def _abort(upload: ArtifactUpload) -> None:
    upload.abort()


def _overflow(upload: ArtifactUpload) -> None:
    with pytest.raises(ArtifactTooLarge):
        upload.write(b"x" * (3 * PART_SIZE))


def _failed_commit(upload: ArtifactUpload) -> None:
    with pytest.raises(ValueError, match="expires_at"):
        upload.commit(T0 + dt.timedelta(days=2))  # the upload expires a day after T0


@pytest.mark.parametrize("end", [_abort, _overflow, _failed_commit],
                         ids=["abort", "over-bound write", "failed commit"])
def test_a_stream_that_ends_otherwise_leaves_no_object_and_no_upload(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str,
    end: Callable[[ArtifactUpload], None],
) -> None:
    upload = begin(store, expires_at=T0 + dt.timedelta(days=1))
    upload.write(LONG[:PART_SIZE + 10])
    assert uploads(s3_server, s3_bucket) != []  # a part was sent
    end(upload)
    assert keys(s3_server, s3_bucket) == [MARKER_KEY]
    assert uploads(s3_server, s3_bucket) == []
    assert store.list_run("run-1") == []
    with pytest.raises(ArtifactError):
        upload.write(b"more")
    upload.abort()  # idempotent


# --------------------------------------------------------------------------------------------
# Reads verify the checksum
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("stored", "reason"), [
    (b"HELLO S3", "checksum mismatch"),
    (b"hello s3 and more", "size more than 8 bytes, expected 8"),
    (b"hello", "size 5 bytes, expected 8"),
    (None, "the content object is missing"),
])
def test_a_damaged_object_fails_the_checksum_on_read(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str, stored: bytes | None,
    reason: str,
) -> None:
    record = put(store, b"hello s3")
    client = s3_server.client()
    if stored is None:
        client.delete_object(Bucket=s3_bucket, Key=content_key(record))
    else:
        client.put_object(Bucket=s3_bucket, Key=content_key(record), Body=stored)
    with pytest.raises(ArtifactCorrupted) as caught:
        store.read(record.id)
    assert caught.value.reason == reason


def test_a_later_write_repairs_an_object_of_the_wrong_size(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    record = put(store, b"hello s3")
    s3_server.client().put_object(Bucket=s3_bucket, Key=content_key(record), Body=b"cut")
    put(store, b"hello s3", run_id="run-2")
    assert store.read(record.id) == b"hello s3"


# --------------------------------------------------------------------------------------------
# Purge
# --------------------------------------------------------------------------------------------


def test_purge_removes_expired_rows_then_only_their_unshared_objects(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    soon = T0 + dt.timedelta(minutes=1)
    gone = put(store, b"gone", expires_at=soon)
    shared = put(store, b"kept", expires_at=soon)
    kept = put(store, b"kept", run_id="run-2")
    report = store.purge(T0 + dt.timedelta(minutes=2))
    assert report == PurgeReport(artifacts=2, artifact_bytes=8, content_files=1,
                                 staged_uploads=0, freed_bytes=4)
    assert keys(s3_server, s3_bucket) == [content_key(kept), MARKER_KEY]
    assert [r.id for r in store.list_artifacts()] == [kept.id]
    with pytest.raises(ArtifactNotFound):
        store.get(gone.id)
    assert store.read(kept.id) == b"kept" and shared.checksum == kept.checksum
    # Nothing left to do: a second purge removes nothing.
    assert store.purge(T0 + dt.timedelta(minutes=2)) == PurgeReport(artifacts=0, artifact_bytes=0, content_files=0, staged_uploads=0, freed_bytes=0)


def test_purge_leaves_what_is_not_a_content_object_alone(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    client = s3_server.client()
    others = [f"{PREFIX}/sha256/README", f"{PREFIX}-other/sha256/{'0' * 64}", "elsewhere.txt"]
    for key in others:
        client.put_object(Bucket=s3_bucket, Key=key, Body=b"not ours")
    assert store.purge(T0).content_files == 0
    assert keys(s3_server, s3_bucket) == sorted([*others, MARKER_KEY])


def test_purge_takes_stale_staging_left_by_a_dead_process_but_not_an_open_upload(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    client = s3_server.client()
    # What a process that died mid-stream leaves: an upload with a part, or (killed between
    # completing and publishing) a staged object.
    dead = client.create_multipart_upload(Bucket=s3_bucket, Key=f"{PREFIX}/staging/dead-1")
    client.upload_part(Bucket=s3_bucket, Key=f"{PREFIX}/staging/dead-1",
                       UploadId=dead["UploadId"], PartNumber=1, Body=b"p" * 100)
    client.put_object(Bucket=s3_bucket, Key=f"{PREFIX}/staging/dead-2", Body=b"s" * 50)
    staged_at = client.head_object(Bucket=s3_bucket, Key=f"{PREFIX}/staging/dead-2")[
        "LastModified"]
    mine = begin(store)
    mine.write(LONG[:PART_SIZE])  # an open upload of this store: never taken
    fresh = store.purge(staged_at + STAGING_STALE_AFTER - dt.timedelta(seconds=1))
    assert f"{PREFIX}/staging/dead-2" in keys(s3_server, s3_bucket)  # not stale yet
    report = store.purge(staged_at + STAGING_STALE_AFTER + dt.timedelta(seconds=1))
    # The dead upload is judged by its part's LastModified (just before staged_at, within
    # LastModified's one-second precision), so it goes at one of the two instants.
    assert fresh.staged_uploads + report.staged_uploads == 2
    assert fresh.freed_bytes + report.freed_bytes == 150
    assert keys(s3_server, s3_bucket) == [MARKER_KEY]
    assert len(uploads(s3_server, s3_bucket)) == 1
    record = mine.commit(T0)
    assert store.read(record.id) == LONG[:PART_SIZE]


def test_purge_leaves_another_hosts_upload_alone_while_it_still_receives_parts(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    """A video streams for up to its 7,200 s timeout; another host's purge must judge its
    upload by the last part sent, not by when it began (moto dates every multipart upload's
    Initiated in 2010: an upload begun "long ago")."""
    other = open_s3_artifact_store(f"s3://{s3_bucket}/{PREFIX}", s3_server.env(s3_bucket),
                                   tmp_path, FixedClock(T0))
    try:
        upload = other.begin(NewArtifact(
                run_id="run-1", origin=ArtifactOrigin.MODEL_OUTPUT, name="v.mp4",
                media_type="video/mp4", trust=Trust.EXTERNAL_UNTRUSTED), max_bytes=3 * PART_SIZE)
        upload.write(LONG[:PART_SIZE])  # one part sent: the multipart upload exists
        [live] = s3_server.client().list_multipart_uploads(Bucket=s3_bucket)["Uploads"]
        part = s3_server.client().list_parts(Bucket=s3_bucket, Key=live["Key"],
                                             UploadId=live["UploadId"])["Parts"][0]
        assert store.purge(part["LastModified"] + dt.timedelta(minutes=59)).staged_uploads == 0
        upload.write(LONG[PART_SIZE:2 * PART_SIZE])
        record = upload.commit(T0)
        assert other.read(record.id) == LONG[:2 * PART_SIZE]
        # Abandoned for longer than STAGING_STALE_AFTER after its last part, it goes.
        dead = other.begin(NewArtifact(
                run_id="run-1", origin=ArtifactOrigin.MODEL_OUTPUT, name="w.mp4",
                media_type="video/mp4", trust=Trust.EXTERNAL_UNTRUSTED), max_bytes=3 * PART_SIZE)
        dead.write(LONG[:PART_SIZE])
        later = dt.datetime.now(dt.UTC) + STAGING_STALE_AFTER + dt.timedelta(seconds=2)
        assert store.purge(later).staged_uploads == 1
        assert uploads(s3_server, s3_bucket) == []
        dead.abort()
    finally:
        other.close()


def test_purge_skips_an_upload_another_purge_aborted_meanwhile(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    """Two hosts purging at once list the same stale upload; the one that looks at its parts
    second finds it gone (NoSuchUpload), which is done, not the store being unavailable."""
    client = s3_server.client()
    key = f"{PREFIX}/staging/dead"
    dead = client.create_multipart_upload(Bucket=s3_bucket, Key=key)
    client.upload_part(Bucket=s3_bucket, Key=key, UploadId=dead["UploadId"], PartNumber=1,
                       Body=b"p" * 100)

    def the_other_purge_wins(**kwargs: Any) -> None:
        client.abort_multipart_upload(Bucket=s3_bucket, Key=key, UploadId=dead["UploadId"])

    store._client.meta.events.register("before-call.s3.ListParts", the_other_purge_wins)
    later = dt.datetime.now(dt.UTC) + STAGING_STALE_AFTER + dt.timedelta(seconds=2)
    report = store.purge(later)
    assert (report.staged_uploads, report.freed_bytes) == (0, 0)
    assert uploads(s3_server, s3_bucket) == []


def test_toolhost_artifacts_purge_works_against_the_bucket(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    env = s3_server.env(s3_bucket)
    s = open_s3_artifact_store(env["TOOLHOST_ARTIFACT_STORE"], env, tmp_path, FixedClock(T0))
    expired = put(s, b"expired", expires_at=T0 + dt.timedelta(seconds=1))
    kept = put(s, b"kept")
    s.close()
    result = toolhost(tmp_path, "purge", "--json", env=env)
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {
        "artifacts": 1, "artifact_bytes": 7, "content_files": 1, "staged_uploads": 0,
        "freed_bytes": 7}
    assert keys(s3_server, s3_bucket) == [content_key(kept), MARKER_KEY]
    assert content_key(expired) != content_key(kept)


def test_toolhost_artifacts_get_streams_from_the_bucket(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    # LONG is many of the command's chunks: the body is read as a stream, then verified.
    env = s3_server.env(s3_bucket)
    data = tmp_path / "data"  # -o writes outside the data directory (never inside it)
    s = open_s3_artifact_store(env["TOOLHOST_ARTIFACT_STORE"], env, data, FixedClock(T0))
    upload = begin(s)
    upload.write(LONG)
    record = upload.commit(T0)
    assert b"".join(s.read_chunks(record.id, 1 << 20)) == LONG
    s.close()
    out = tmp_path / "out"
    out.mkdir()
    result = toolhost(data, "get", record.id, "-o", str(out / "long.bin"), env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert (out / "long.bin").read_bytes() == LONG
    damage_object(s3_server, s3_bucket, record, LONG[:-1] + b"!")
    refused = toolhost(data, "get", record.id, "-o", str(out / "again.bin"), env=env)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", f"toolhost: artifact {record.id!r} was not written: its stored content no "
               "longer matches its checksum (checksum mismatch)\n")
    assert [p.name for p in out.iterdir()] == ["long.bin"]  # no temp file left


def test_losing_the_server_mid_read_fails_statically(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str
) -> None:
    record = put(store, LONG)

    class LostBody:
        """The real body, whose connection drops after the first read."""

        def __init__(self, body: Any) -> None:
            self.body, self.reads = body, 0

        def read(self, n: int) -> bytes:
            self.reads += 1
            if self.reads > 1:
                from urllib3.exceptions import ProtocolError

                raise ProtocolError("Connection broken")
            return bytes(self.body.read(n))

        def close(self) -> None:
            self.body.close()

    real = store._client

    class Client:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def get_object(self, **kwargs: Any) -> Any:
            response = real.get_object(**kwargs)
            return {**response, "Body": LostBody(response["Body"])}

    store._client = Client()
    chunks = store.read_chunks(record.id, 1 << 20)
    assert next(chunks) == LONG[:1 << 20]
    with pytest.raises(S3Unavailable) as caught:
        next(chunks)
    assert str(caught.value) == (f"the artifact store s3://{s3_bucket}/artifacts is "
                                 "unavailable (GetObject: ProtocolError)")
    assert list(chunks) == []  # closed by the failure
    # `toolhost artifacts get` says so in one line, and fails.
    from toolhost._cli.artifacts import _verify
    from toolhost._cli.common import CommandError

    with pytest.raises(CommandError) as refused:
        _verify(store, record.id)
    assert (str(refused.value), refused.value.code) == (
        f"artifact {record.id!r} was not written: {caught.value}", 1)


# --------------------------------------------------------------------------------------------
# Configuration and start
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["s3:/bucket/p", "https://bucket/p", "s3://Bucket/p",
                                 "s3://ab/p", "s3://bucket/a/../p", "s3://bucket/a//p",
                                 "s3://"])
def test_a_malformed_store_url_is_a_setting_error(tmp_path: Path, url: str) -> None:
    with pytest.raises(SettingError, match="TOOLHOST_ARTIFACT_STORE"):
        open_s3_artifact_store(url, {}, tmp_path, FixedClock(T0))


def test_the_location_parses_bucket_and_prefix() -> None:
    assert S3Location.parse("s3://my-bucket/a/b/") == S3Location("my-bucket", "a/b")
    assert S3Location.parse("s3://my-bucket") == S3Location("my-bucket", "")
    assert S3Location("my-bucket", "").key("sha256", "ab") == "sha256/ab"
    assert str(S3Location("my-bucket", "a/b")) == "s3://my-bucket/a/b"


def test_a_prefix_belongs_to_one_database(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    env = s3_server.env(s3_bucket)
    url = f"s3://{s3_bucket}/{PREFIX}"
    open_s3_artifact_store(url, env, tmp_path / "one", FixedClock(T0)).close()
    open_s3_artifact_store(url, env, tmp_path / "one", FixedClock(T0)).close()  # reopened
    open_s3_artifact_store(url + "-two", env, tmp_path / "two", FixedClock(T0)).close()
    with pytest.raises(StoreUnavailable) as caught:
        open_s3_artifact_store(url, env, tmp_path / "three", FixedClock(T0))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"the artifact store {url} belongs to another toolhost database")
    assert f"{url}/{MARKER}" in message


def test_a_missing_bucket_stops_the_start(s3_server: S3Server, tmp_path: Path) -> None:
    s3_server.start()
    env = s3_server.env("no-such-bucket")
    with pytest.raises(StoreUnavailable) as caught:
        open_s3_artifact_store(env["TOOLHOST_ARTIFACT_STORE"], env, tmp_path, FixedClock(T0))
    assert str(caught.value) == (
        "cannot use the artifact store s3://no-such-bucket/artifacts (GetObject: NoSuchBucket): "
        "the bucket does not exist")


def test_an_unreachable_store_stops_the_start_in_one_line(tmp_path: Path) -> None:
    require_moto()
    down = S3Server()  # never started: nothing listens on its port
    env = down.env("toolhost-down")
    result = toolhost(tmp_path, "purge", env=env)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "toolhost: cannot use the artifact store s3://toolhost-down/artifacts "
        "(GetObject: EndpointConnectionError): cannot reach it: check TOOLHOST_S3_ENDPOINT_URL "
        "(or AWS_ENDPOINT_URL), the network and the server\n")
    assert S3Server.SECRET_KEY not in result.stderr and S3Server.ACCESS_KEY not in result.stderr


# --------------------------------------------------------------------------------------------
# Faults mid-write: nothing half-published, and service back without a restart
# --------------------------------------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[S3Server]:
    """A server of the test's own, to stop and start without disturbing the others."""
    require_moto()
    server = S3Server()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_losing_the_server_mid_stream_fails_statically_and_service_returns(
    own_server: S3Server, tmp_path: Path
) -> None:
    own_server.create_bucket("toolhost-faults")
    env = own_server.env("toolhost-faults")
    s = open_s3_artifact_store(env["TOOLHOST_ARTIFACT_STORE"], env, tmp_path, FixedClock(T0))
    upload = begin(s)
    upload.write(LONG[:PART_SIZE + 1])  # one part is on the server
    own_server.stop()
    upload.write(b"more")  # buffered
    with pytest.raises(S3Unavailable) as caught:
        upload.commit(T0)
    assert str(caught.value) == ("the artifact store s3://toolhost-faults/artifacts is "
                                 "unavailable (UploadPart: EndpointConnectionError)")
    with pytest.raises(ArtifactError, match="aborted"):
        upload.write(b"after")
    assert s.list_run("run-1") == []  # no row: nothing was published
    with pytest.raises(S3Unavailable):
        put(s, b"while down")
    assert s.list_run("run-1") == []
    # Back up (moto forgets everything, so the bucket is made again): the same store serves
    # without being reopened.
    own_server.start()
    own_server.create_bucket("toolhost-faults")
    record = put(s, b"after the restart")
    assert s.read(record.id) == b"after the restart"
    streamed = begin(s)
    streamed.write(LONG)
    assert s.read(streamed.commit(T0).id) == LONG
    s.close()


class _FailingClient:
    """The real client, except that one operation fails the way a lost server makes it fail."""

    def __init__(self, client: Any, operation: str) -> None:
        self._client = client
        self._operation = operation

    def __getattr__(self, name: str) -> Any:
        if name == self._operation:
            def fail(**_: Any) -> Any:
                from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
                    EndpointConnectionError,
                )

                raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
            return fail
        return getattr(self._client, name)


@pytest.mark.parametrize(("operation", "content"), [
    ("upload_part", LONG), ("complete_multipart_upload", LONG), ("copy_object", LONG),
    ("head_object", LONG), ("put_object", b"short"), ("head_object", b"short"),
])
def test_a_fault_at_any_step_of_a_commit_publishes_nothing(
    store: S3ArtifactStore, s3_server: S3Server, s3_bucket: str, operation: str, content: bytes
) -> None:
    upload = begin(store)
    store._client = _FailingClient(store._client, operation)
    with pytest.raises(S3Unavailable):
        upload.write(content)
        upload.commit(T0)
    assert store.list_run("run-1") == []
    assert keys(s3_server, s3_bucket) == [MARKER_KEY]
    assert uploads(s3_server, s3_bucket) == []


# --------------------------------------------------------------------------------------------
# Through the host: selected by TOOLHOST_ARTIFACT_STORE, and a call that meets a lost store
# --------------------------------------------------------------------------------------------

_OUT = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
        "additionalProperties": False}
_IN = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 32}},
       "required": ["name"], "additionalProperties": False}


def _export(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    ref = context.artifacts.write(origin=ArtifactOrigin.EXPORT, name=arguments["name"],
                                  media_type="text/plain", content=f"bytes of {arguments['name']}",
                                  trust=Trust.INTERNAL_TOOL)
    return ToolOutput(structured={"id": ref.id}, content=ref.id)


# A whole minute (make_spec's default is 2 s): the S3 client's first request in a process
# (botocore loading its service models, moto answering its first PUT) took longer than 2 s on
# a loaded CI machine, and these tests are about the bucket, not the deadline.
_PLUGIN = make_plugin(tools=[Tool(make_spec(name="fx.export", input_schema=_IN,
                                            output_schema=_OUT, timeout_s=60), call=_export)])


@pytest.fixture
def faulty_host(own_server: S3Server, tmp_path: Path) -> Iterator[Host]:
    own_server.create_bucket("toolhost-host")
    with Host.from_plugins({"fx-dist": _PLUGIN}, data_dir=tmp_path,
                           settings=Settings(env=own_server.env("toolhost-host"))) as host:
        host.pipeline  # noqa: B018 - composed while the server is up, as a server starts
        yield host


def test_the_host_keeps_artifacts_in_the_bucket_the_setting_names(
    faulty_host: Host, own_server: S3Server
) -> None:
    assert isinstance(faulty_host.pipeline.artifacts, S3ArtifactStore)
    outcome = faulty_host.invoke_sync("fx.export", {"name": "a.txt"})
    assert outcome.ok, outcome
    record = faulty_host.pipeline.artifacts.get(outcome.content)
    assert content_key(record) in keys(own_server, "toolhost-host")


def test_a_call_that_meets_a_lost_store_fails_statically_and_service_returns(
    faulty_host: Host, own_server: S3Server
) -> None:
    own_server.stop()
    lost = faulty_host.invoke_sync("fx.export", {"name": "a.txt"})
    assert lost.status is OutcomeStatus.FAILED and lost.failure is not None
    # A static message; the bucket and the operation are operator detail on the row.
    assert "toolhost-host" not in lost.content and "toolhost-host" not in lost.failure.message
    assert lost.invocation_id is not None
    row = faulty_host.pipeline.row(lost.invocation_id)
    assert row.state is InvocationState.FAILED
    own_server.start()
    own_server.create_bucket("toolhost-host")
    again = faulty_host.invoke_sync("fx.export", {"name": "a.txt"})
    assert again.ok, again
    assert faulty_host.pipeline.artifacts.read(again.content) == b"bytes of a.txt"


def test_a_lost_store_is_the_retryable_upstream_unavailable_failure(
    faulty_host: Host, own_server: S3Server
) -> None:
    own_server.stop()
    lost = faulty_host.invoke_sync("fx.export", {"name": "a.txt"})
    assert lost.failure is not None
    assert lost.failure.reason_code == "tool.upstream_unavailable.artifact_store"
    assert lost.failure.retryable is True
