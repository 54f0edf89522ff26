"""A store whose prefix lies inside another store's (``s3://bkt/prod/sha256``, ``.../staging``,
any prefix under one that holds a marker) is refused at start, whichever of the two starts
first; and purge removes only keys of its own exact layout, ``<prefix>/sha256/<64 hex>`` and
``<prefix>/staging/<id>``, never a deeper key that merely ends like one.

Before: a store at ``s3://bkt/prod/sha256`` started beside the one at ``s3://bkt/prod``, and the
outer one's purge took the inner one's content (``prod/sha256/sha256/<hex>``, whose last
component is 64 hex digits) while its record still referenced it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)

from toolhost._adapters.s3_artifacts import MARKER, S3ArtifactStore, open_s3_artifact_store
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import ArtifactOrigin, NewArtifact
from toolhost._model.settings import StoreUnavailable
from toolhost._model.spec import Trust
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock

HEX = "ab" * 32


def opened(server: S3Server, bucket: str, prefix: str, data_dir: Path) -> S3ArtifactStore:
    return open_s3_artifact_store(f"s3://{bucket}/{prefix}", server.env(bucket), data_dir,
                                  FixedClock(T0))


def keys(server: S3Server, bucket: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def refused(server: S3Server, bucket: str, prefix: str, data_dir: Path) -> str:
    with pytest.raises(StoreUnavailable) as caught:
        opened(server, bucket, prefix, data_dir)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("inner", ["prod/sha256", "prod/staging", "prod/sha256/" + HEX,
                                   "prod/other/deeper"])
def test_a_store_inside_another_stores_prefix_is_refused_at_start(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path, inner: str,
) -> None:
    opened(s3_server, s3_bucket, "prod", tmp_path / "outer").close()
    before = keys(s3_server, s3_bucket)
    assert refused(s3_server, s3_bucket, inner, tmp_path / "inner") == (
        f"the artifact store s3://{s3_bucket}/{inner} lies inside the artifact store "
        f"s3://{s3_bucket}/prod (its s3://{s3_bucket}/prod/{MARKER}), whose keys it would "
        f"share: give it a prefix outside s3://{s3_bucket}/prod/")
    assert keys(s3_server, s3_bucket) == before  # no marker claimed
    opened(s3_server, s3_bucket, "prod-inner", tmp_path / "inner").close()  # a sibling starts


def test_a_store_inside_one_at_the_buckets_root_is_refused(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    opened(s3_server, s3_bucket, "", tmp_path / "outer").close()
    assert f"lies inside the artifact store s3://{s3_bucket} " in refused(
        s3_server, s3_bucket, "sha256", tmp_path / "inner")


@pytest.mark.parametrize("inner", ["prod/sha256", "prod/staging", "prod/other"])
def test_a_store_started_around_another_is_refused_at_start(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path, inner: str,
) -> None:
    opened(s3_server, s3_bucket, inner, tmp_path / "inner").close()
    before = keys(s3_server, s3_bucket)
    assert refused(s3_server, s3_bucket, "prod", tmp_path / "outer") == (
        f"the artifact store s3://{s3_bucket}/prod holds the artifact store "
        f"s3://{s3_bucket}/{inner} (its s3://{s3_bucket}/{inner}/{MARKER}), whose keys it "
        "would share: give one of them a prefix outside the other's")
    assert keys(s3_server, s3_bucket) == before


def test_purge_removes_only_keys_of_its_own_layout(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    """Keys another store holds below this one's areas (placed behind the guard's back, as a
    store nested before it existed left them): none is this store's, whatever its name."""
    store = opened(s3_server, s3_bucket, "prod", tmp_path)
    client = s3_server.client()
    own_stale = f"prod/staging/{new_id()}"
    foreign = [f"prod/sha256/sha256/{HEX}", f"prod/sha256/x/{HEX}",
               f"prod/staging/{MARKER}", f"prod/staging/inner/{new_id()}",
               f"prod/staging/staging/{new_id()}", f"prod/staging/sha256/{HEX}"]
    for key in [own_stale, *foreign]:
        client.put_object(Bucket=s3_bucket, Key=key, Body=b"x" * 10)
    upload = f"prod/staging/staging/{new_id()}"
    client.create_multipart_upload(Bucket=s3_bucket, Key=upload)
    try:
        later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)  # everything is stale
        report = store.purge(later)
        assert (report.content_files, report.staged_uploads) == (0, 1)  # own_stale alone
        assert keys(s3_server, s3_bucket) == sorted([f"prod/{MARKER}", *foreign])
        listed = client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])
        assert [u["Key"] for u in listed] == [upload]
    finally:
        store.close()


class ScopedTo:
    """The server's client with credentials scoped to ``prefix``: reading or listing a key
    outside it is refused (``AccessDenied``, as S3 answers a policy that grants
    ``arn:aws:s3:::bucket/prefix/*`` alone); ``code`` answers instead when given."""

    def __init__(self, client: Any, prefix: str, code: str = "AccessDenied") -> None:
        self._real, self._prefix, self._code = client, prefix + "/", code

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _refuse(self, key: str, operation: str) -> None:
        if not key.startswith(self._prefix):
            raise ClientError({"Error": {"Code": self._code, "Message": "refused"}}, operation)

    def get_object(self, **kwargs: Any) -> Any:
        self._refuse(kwargs["Key"], "GetObject")
        return self._real.get_object(**kwargs)

    def head_object(self, **kwargs: Any) -> Any:
        self._refuse(kwargs["Key"], "HeadObject")
        return self._real.head_object(**kwargs)

    def list_objects_v2(self, **kwargs: Any) -> Any:
        self._refuse(kwargs.get("Prefix", ""), "ListObjectsV2")
        return self._real.list_objects_v2(**kwargs)


def test_a_host_whose_credentials_cover_its_prefix_alone_starts(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    """What docs/operator.md asks for (the permissions on the prefix) is enough: the nesting
    check skips the markers above the prefix it may not read."""
    scoped = ScopedTo(s3_server.client(), "prod/app")
    store = open_s3_artifact_store(f"s3://{s3_bucket}/prod/app", s3_server.env(s3_bucket),
                                   tmp_path, FixedClock(T0), client=scoped)
    try:
        record = store.put(NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT,
                                       name="out.txt", media_type="text/plain",
                                       trust=Trust.INTERNAL_TOOL,
                                       expires_at=T0 + dt.timedelta(minutes=1)), b"scoped")
        assert store.read(record.id) == b"scoped"
        report = store.purge(T0 + dt.timedelta(minutes=2))
        assert (report.artifacts, report.content_files) == (1, 1)
    finally:
        store.close()
    assert keys(s3_server, s3_bucket) == [f"prod/app/{MARKER}"]


def test_another_error_reading_a_marker_above_the_prefix_still_refuses_the_start(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path,
) -> None:
    failing = ScopedTo(s3_server.client(), "prod/app", code="InternalError")
    with pytest.raises(StoreUnavailable) as caught:
        open_s3_artifact_store(f"s3://{s3_bucket}/prod/app", s3_server.env(s3_bucket),
                               tmp_path, FixedClock(T0), client=failing)
    assert str(caught.value).endswith(
        f"cannot use the artifact store s3://{s3_bucket}/prod/app (GetObject: InternalError): "
        "the server answered with an error: check the server")
    assert keys(s3_server, s3_bucket) == []
