"""Content a purge (another host's too) took between a read's look at the record and its open
of the content is not found, not damaged (D363), for every reader: ``toolhost artifacts get``
answers "no artifact", as the resolver answers ``not_found``, because the store itself says so
(``JoinedArtifactStore``: content missing under a record that is gone now). Content missing
under a record still there stays the corruption alarm.

Before: ``toolhost artifacts get`` on one host, while the cron purge of another took the
expired artifact in that window, exited 1 with "its stored content no longer matches its
checksum (the content object is missing)"."""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_server import pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)

from toolhost._adapters.pg_artifacts import PostgresS3ArtifactStore, open_pg_s3_artifact_store
from toolhost._adapters.sqlite_artifacts import open_artifact_store
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    NewArtifact,
)
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import ArtifactStore
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock
from toolhost.testing import run_toolhost

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

EXPIRES = T0 + dt.timedelta(days=1)  # long past for a real clock
CONTENT = b"purged meanwhile" * 1000

#: ``toolhost`` whose get, once it has read the record and before it opens the content, waits
#: for another process's ``toolhost artifacts purge`` (another host's cron) to finish.
PURGED_IN_BETWEEN = textwrap.dedent("""\
    import subprocess, sys
    from toolhost._adapters import file_artifacts
    from toolhost._cli.main import main

    real = file_artifacts.FileContent.chunks

    def chunks(self, record, chunk_size):
        file_artifacts.FileContent.chunks = real
        purge = subprocess.run([sys.executable, "-m", "toolhost._cli", "artifacts", "purge"],
                               capture_output=True, text=True)
        assert purge.returncode == 0 and "purged 1 expired artifact" in purge.stdout, purge
        return real(self, record, chunk_size)

    file_artifacts.FileContent.chunks = chunks
    raise SystemExit(main(sys.argv[1:]))
    """)


def put(store: ArtifactStore, *, expires_at: dt.datetime | None = EXPIRES) -> ArtifactRecord:
    return store.put(NewArtifact(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="out.bin",
                                 media_type="application/octet-stream",
                                 trust=Trust.INTERNAL_TOOL, expires_at=expires_at), CONTENT)


@pytest.mark.parametrize("output", ["file", "-"])
def test_get_of_an_artifact_another_hosts_purge_takes_meanwhile_is_no_artifact(
    tmp_path: Path, output: str,
) -> None:
    data = tmp_path / "data"
    store = open_artifact_store(data, FixedClock(T0))
    try:
        artifact_id = put(store).id
    finally:
        store.close()
    target = tmp_path / "out.bin"
    got = run_toolhost("artifacts", "get", artifact_id, "-o",
                       str(target) if output == "file" else "-", data_dir=data, plugins="",
                       command=[sys.executable, "-c", PURGED_IN_BETWEEN])
    assert (got.returncode, got.stdout, got.stderr) == (
        1, "", f"toolhost: no artifact '{artifact_id}' (toolhost artifacts list shows them)\n")
    assert not target.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


# --------------------------------------------------------------------------------------------
# The store, as two hosts on PostgreSQL and a bucket see it
# --------------------------------------------------------------------------------------------


@pytest.fixture
def hosts(s3_server: S3Server, s3_bucket: str,
          pg_database: str) -> Iterator[list[PostgresS3ArtifactStore]]:
    opened = [open_pg_s3_artifact_store(f"s3://{s3_bucket}/prod", pg_database,
                                        s3_server.env(s3_bucket), FixedClock(T0))
              for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def purged_first(reader: PostgresS3ArtifactStore, purger: PostgresS3ArtifactStore,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``reader``'s next open of content runs ``purger``'s purge first."""
    real = reader.content.chunks

    def chunks(record: ArtifactRecord, chunk_size: int) -> Any:
        monkeypatch.setattr(reader.content, "chunks", real)
        assert purger.purge(EXPIRES + dt.timedelta(seconds=1)).artifacts == 1
        return real(record, chunk_size)

    monkeypatch.setattr(reader.content, "chunks", chunks)


def test_content_another_host_purged_under_a_record_just_read_is_not_found(
    hosts: list[PostgresS3ArtifactStore], monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = hosts
    for read in (lambda i: b.read(i), lambda i: b.read_chunks(i)):
        artifact_id = put(a).id
        purged_first(b, a, monkeypatch)
        with pytest.raises(ArtifactNotFound) as caught:
            read(artifact_id)
        assert caught.value.artifact_id == artifact_id


def test_content_missing_under_a_record_still_there_is_still_corrupted(
    hosts: list[PostgresS3ArtifactStore], s3_server: S3Server, s3_bucket: str,
) -> None:
    a, b = hosts
    record = put(a, expires_at=None)
    s3_server.client().delete_object(
        Bucket=s3_bucket, Key=f"prod/sha256/{record.checksum.removeprefix('sha256:')}")
    for read in (b.read, b.read_chunks):
        with pytest.raises(ArtifactCorrupted, match="the content object is missing"):
            read(record.id)
