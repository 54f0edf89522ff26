"""The ArtifactStore on S3-compatible storage: ``TOOLHOST_ARTIFACT_STORE=s3://bucket/prefix``.

Content goes to the bucket by address: the object for content with sha256 ``h`` is
``<prefix>/sha256/<h>``, so identical bytes are stored once and a key says what its bytes must
hash to. Metadata stays in the ``artifacts`` table of the database, next to the invocation
record, with the SQLite store's schema and queries (this store is that store with its content
moved): the identity rule, claims, listings and purge's "is this content still referenced"
check need a transactional index, which a bucket is not. Hosts share a bucket prefix only by
sharing that database, so a prefix is bound to one database by a marker object
(``<prefix>/toolhost-store.json``) and another database is refused at start: its purge would
delete content that only the first one references. On SQLite that database is one host's;
``pg_artifacts`` keeps the same metadata on PostgreSQL, so every host on that database shares
the prefix.

Reads verify size and checksum and raise ``ArtifactCorrupted`` otherwise. A streamed write is
buffered up to one part; a stream that ends within it is one PUT at its content address on
commit. A longer one is a multipart upload to ``<prefix>/staging/<id>``, completed on commit,
copied (server-side) to its content address and deleted; an abort, a failed write or a failed
commit aborts the multipart upload, so nothing is published. Purge removes what has expired,
then every content object no row references, then staging objects and multipart uploads a dead
process left behind.

The object store failing (unreachable, refusing, out of service) is ``S3Unavailable``: one line
that names the bucket and the operation, never a credential. At start it is ``StoreUnavailable``.
boto3's client reconnects on its own, so service returns when the server does, without a restart.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from toolhost._adapters.sqlite_artifacts import (
    MIGRATIONS,
    SQLiteArtifactStore,
    StreamedUpload,
    VerifiedChunks,
    _check_expiry,
    _check_retention,
    _Metadata,
)
from toolhost._adapters.sqlite_db import DATABASE_NAME, Migration, connect, migrate
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactRecord,
    ArtifactStoreUnavailable,
    as_utc,
)
from toolhost._model.digest import sha256_digest
from toolhost._model.settings import SettingError, StoreUnavailable
from toolhost._ports.artifacts import STAGING_STALE_AFTER
from toolhost._ports.clock import Clock

__all__ = [
    "MARKER",
    "PART_SIZE",
    "S3_MIGRATIONS",
    "S3ArtifactStore",
    "S3ArtifactUpload",
    "S3Location",
    "S3Unavailable",
    "open_s3_artifact_store",
    "s3_client",
]

#: How much of a stream is buffered before it becomes a multipart upload, and the size of each
#: part but the last (S3's minimum part is 5 MiB; 8 MiB keeps a 512 MiB artifact at 64 parts).
PART_SIZE = 8 * 1024 * 1024
#: The marker object that binds a prefix to one database (see the module docstring).
MARKER = "toolhost-store.json"
_MARKER_FORMAT = 1
# S3's bucket naming rules, minus the dotted forms path-style requests cannot always address.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_HEX_KEY = re.compile(r"^[0-9a-f]{64}$")
# Error codes that mean "no such object" (HEAD answers with the bare status).
_MISSING = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchUpload"})

#: The ``s3_artifacts`` component's schema: which store id this database uses for a location.
S3_MIGRATIONS = (
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
)


class S3Unavailable(ArtifactStoreUnavailable):
    """The object store did not serve a request: unreachable, refusing, or failing.

    ``operation`` is the S3 call, ``problem`` a short static description (an error code or an
    exception's class name); neither holds a credential or the endpoint's address. Retryable:
    the next call tries the server again.
    """

    def __init__(self, location: str, operation: str, problem: str) -> None:
        super().__init__(f"the artifact store {location} is unavailable "
                         f"({operation}: {problem})")
        self.location = location
        self.operation = operation
        self.problem = problem


@attrs.frozen
class S3Location:
    """``s3://bucket/prefix``, parsed. ``prefix`` has no leading or trailing slash."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        """:raises SettingError: for anything but ``s3://bucket`` or ``s3://bucket/prefix``."""
        rest = url.strip().removeprefix("s3://")
        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        if (not url.strip().startswith("s3://") or not _BUCKET.match(bucket) or ".." in bucket
                or any(part in ("", ".", "..") for part in prefix.split("/") if prefix)):
            raise SettingError(
                f"TOOLHOST_ARTIFACT_STORE={url!r} is not s3://bucket or s3://bucket/prefix "
                "(a bucket name is 3 to 63 lower-case letters, digits, '.' or '-')")
        return cls(bucket, prefix)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, *parts: str) -> str:
        return "/".join((self.prefix, *parts) if self.prefix else parts)


def s3_client(env: Mapping[str, str]) -> Any:
    """A boto3 S3 client configured from the settings' environment.

    The endpoint is ``TOOLHOST_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL`` (unset: AWS itself),
    the region ``AWS_REGION`` or ``AWS_DEFAULT_REGION``; credentials are the standard
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, else boto3's own
    chain (profile, instance role). Never logged.

    :raises ImportError: boto3 is not installed (the ``s3`` extra).
    """
    import boto3  # type: ignore[import-untyped, unused-ignore]
    from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

    def setting(*names: str) -> str | None:
        return next((v.strip() for n in names if (v := env.get(n, "")).strip()), None)

    endpoint = setting("TOOLHOST_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL")
    session = boto3.session.Session(
        aws_access_key_id=setting("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=setting("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=setting("AWS_SESSION_TOKEN"),
        region_name=setting("AWS_REGION", "AWS_DEFAULT_REGION") or "us-east-1",
    )
    config = Config(
        # Path-style for a named endpoint: S3-compatible servers rarely have wildcard DNS.
        s3={"addressing_style": "path" if endpoint else "auto"},
        # A few quick attempts, then the call fails (retryable) rather than hanging a tool.
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=5,
        read_timeout=60,
        # Our own sha256 is the integrity check; the newer default CRC headers are refused by
        # some S3-compatible servers.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client("s3", endpoint_url=endpoint, config=config)


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def _describe(exc: BaseException) -> str:
    # The error code when the server answered, else the exception's class: str(exc) may
    # carry the endpoint URL (and so whatever an operator put in it).
    return _error_code(exc) or type(exc).__name__


class S3ArtifactStore(SQLiteArtifactStore):
    """Content in ``location``'s bucket through ``client``; metadata in ``conn``'s ``artifacts``.

    The metadata side is ``SQLiteArtifactStore``'s, unchanged: this class replaces only where
    content lives (``_chunks``, which ``read`` and ``read_chunks`` use, ``_store``, ``begin``
    and purge's two sweeps).
    Purge safety is the same argument with objects for files: a content object is deleted
    only inside the write transaction that found no row referencing it, and a write checks
    inside its own transaction that its object is there (a HEAD) and puts it back if not,
    before its row commits.
    Construction applies the migrations, checks the bucket answers and binds the prefix to this
    database (``StoreUnavailable`` otherwise).
    """

    def __init__(
        self,
        location: S3Location,
        client: Any,
        conn: sqlite3.Connection,
        clock: Clock,
        *,
        owns_connection: bool = False,
        owns_client: bool = False,
        retention: _dt.timedelta | None = None,
    ) -> None:
        # Not SQLiteArtifactStore.__init__: it would make a content directory this store
        # never uses. These are the attributes its metadata methods read.
        self.location = location
        self._client = client
        self._owns_client = owns_client
        self._conn = conn
        self._clock = clock
        self._owns_connection = owns_connection
        self._retention = _check_retention(retention)
        self._lock = threading.RLock()
        # Staging keys and multipart upload ids this instance has open: purge never takes them.
        self._open: set[str] = set()
        migrate(conn, (*MIGRATIONS, *S3_MIGRATIONS))
        self._bind()

    # -- port ----------------------------------------------------------------------------------

    def _chunks(self, record: ArtifactRecord, chunk_size: int) -> VerifiedChunks:
        """``record``'s content object as verified chunks (``read`` and ``read_chunks`` are
        the base class's): one GetObject, its streaming body read as the chunks are, and
        closing the chunks before the end drops the connection rather than read the rest."""
        try:
            response = self._client.get_object(
                Bucket=self.location.bucket, Key=self._content_key(record.checksum))
        except Exception as exc:
            if _error_code(exc) in _MISSING:
                raise ArtifactCorrupted(record.id, "the content object is missing") from None
            raise self._unavailable("GetObject", exc) from None
        body = response["Body"]

        def lost(exc: Exception) -> Exception:  # the connection dropped mid-body
            return self._unavailable("GetObject", exc)

        return VerifiedChunks(record, body.read, body.close, chunk_size, failed=lost)

    def _upload(self, meta: _Metadata, limit: int) -> StreamedUpload:
        """An S3 upload: nothing reaches the bucket until a part is full."""
        return S3ArtifactUpload(self, meta, limit)

    def close(self) -> None:
        """Close the database connection and the client if this store made them."""
        super().close()
        if self._owns_client:
            with contextlib.suppress(Exception):
                self._client.close()

    # -- content -------------------------------------------------------------------------------

    def _store(
        self, meta: _Metadata, content: bytes, *, now: _dt.datetime | None
    ) -> ArtifactRecord:
        # As SQLiteArtifactStore._store: the object first, outside the transaction (a crash
        # leaves an unreferenced object, never a row without content); inside it, only a HEAD,
        # and a PUT again if a purge took the object meanwhile.
        created_at = now if now is not None else as_utc(self._clock.now())
        _check_expiry(meta, created_at)
        checksum = sha256_digest(content)
        key = self._content_key(checksum)
        if not self._has_object(key, len(content)):
            self._put_object(key, content)

        def restore() -> None:
            if not self._has_object(key, len(content)):
                self._put_object(key, content)

        return self._record(meta, len(content), checksum, created_at, reuse=now is not None,
                            place=restore)

    def _publish(
        self, meta: _Metadata, size: int, checksum: str, created_at: _dt.datetime,
        *, content: bytes | None = None, staged: str | None = None,
    ) -> ArtifactRecord:
        """Record a committed stream: ``content`` (one part, PUT) or the ``staged`` object
        (copied to its content address unless an object of that size is already there)."""
        key = self._content_key(checksum)

        def place() -> None:
            if self._has_object(key, size):
                return
            if content is not None:
                self._put_object(key, content)
            elif staged is not None:
                self._copy_object(staged, key)

        place()  # outside the transaction: a large copy never holds the write lock
        return self._record(meta, size, checksum, created_at, reuse=True, place=place)

    def _content_key(self, checksum: str) -> str:
        return self.location.key("sha256", checksum.removeprefix("sha256:"))

    def _staging_key(self) -> str:
        return self.location.key("staging", new_id())

    def _has_object(self, key: str, size: int) -> bool:
        """Whether ``key`` holds an object of ``size`` bytes (a HEAD; a wrong size is a
        damaged object, which the caller replaces with the good bytes)."""
        try:
            head = self._client.head_object(Bucket=self.location.bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) in _MISSING:
                return False
            raise self._unavailable("HeadObject", exc) from None
        return bool(head.get("ContentLength") == size)

    def _put_object(self, key: str, content: bytes) -> None:
        # Content-MD5 makes the server refuse bytes damaged on the way, before they replace
        # anything.
        md5 = base64.b64encode(hashlib.md5(content, usedforsecurity=False).digest()).decode()
        self._call("PutObject", self._client.put_object, Bucket=self.location.bucket, Key=key,
                   Body=content, ContentMD5=md5)

    def _copy_object(self, source: str, key: str) -> None:
        # One server-side copy: the ceiling (512 MiB) is far below CopyObject's 5 GiB limit.
        self._call("CopyObject", self._client.copy_object, Bucket=self.location.bucket, Key=key,
                   CopySource={"Bucket": self.location.bucket, "Key": source})

    def _delete_object(self, key: str) -> None:
        self._call("DeleteObject", self._client.delete_object, Bucket=self.location.bucket,
                   Key=key)

    def _call(self, operation: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return method(**kwargs)
        except Exception as exc:
            raise self._unavailable(operation, exc) from None

    def _unavailable(self, operation: str, exc: BaseException) -> S3Unavailable:
        return S3Unavailable(str(self.location), operation, _describe(exc))

    def _pages(self, operation: str, method: str, key: str, **kwargs: Any) -> Iterator[Any]:
        """Every item under ``key`` in a listing, page by page."""
        paginator = self._client.get_paginator(method)
        try:
            for page in paginator.paginate(Bucket=self.location.bucket, **kwargs):
                yield page.get(key, [])
        except Exception as exc:
            raise self._unavailable(operation, exc) from None

    # -- purge ---------------------------------------------------------------------------------

    def _sweep_content(self) -> tuple[int, int]:
        """Remove every content object no row references: (objects, bytes).

        One transaction per listed page holds the database's write lock while it checks and
        deletes, so a write (which HEADs its object under that lock) either finds the object
        gone and puts it back, or commits its row first and the check here keeps the object.
        """
        objects = freed = 0
        for page in self._pages("ListObjectsV2", "list_objects_v2", "Contents",
                                Prefix=self.location.key("sha256", "")):
            candidates = [(o["Key"], int(o.get("Size", 0))) for o in page
                          if _HEX_KEY.match(o["Key"].rsplit("/", 1)[-1])]
            if candidates:
                removed, removed_bytes = self._sweep_page(candidates)
                objects += removed
                freed += removed_bytes
        return objects, freed

    def _sweep_page(self, candidates: list[tuple[str, int]]) -> tuple[int, int]:
        """Delete the listed (key, size) content objects no row references, in one write
        transaction: (objects, bytes). The metadata's database decides how that transaction
        keeps writers out (here SQLite's write lock)."""
        objects = freed = 0
        with self._transaction():
            for key, size in candidates:
                checksum = "sha256:" + key.rsplit("/", 1)[-1]
                if self._conn.execute(
                    "SELECT 1 FROM artifacts WHERE checksum = ? LIMIT 1", (checksum,)
                ).fetchone() is not None:
                    continue
                self._delete_object(key)
                objects += 1
                freed += size
        return objects, freed

    def _sweep_staging(self, now: _dt.datetime) -> tuple[int, int]:
        """Remove staging objects and abort multipart uploads older than STAGING_STALE_AFTER
        before ``now`` that this instance does not have open: (uploads, bytes).

        The object's LastModified and the upload's Initiated are the server's record of when
        they were made; ``now`` is the caller's instant. No tool runs for an hour, so an upload
        that old belongs to a process that died.
        """
        cutoff = now - STAGING_STALE_AFTER
        prefix = self.location.key("staging", "")
        removed = freed = 0
        for page in self._pages("ListObjectsV2", "list_objects_v2", "Contents", Prefix=prefix):
            for item in page:
                if item["Key"] in self._open or item["LastModified"] > cutoff:
                    continue
                self._delete_object(item["Key"])
                removed += 1
                freed += int(item.get("Size", 0))
        for page in self._pages("ListMultipartUploads", "list_multipart_uploads", "Uploads",
                                Prefix=prefix):
            for upload in page:
                if upload["UploadId"] in self._open or upload["Initiated"] > cutoff:
                    continue
                parts = self._call("ListParts", self._client.list_parts,
                                   Bucket=self.location.bucket, Key=upload["Key"],
                                   UploadId=upload["UploadId"])
                try:
                    self._client.abort_multipart_upload(
                        Bucket=self.location.bucket, Key=upload["Key"],
                        UploadId=upload["UploadId"])
                except Exception as exc:
                    if _error_code(exc) in _MISSING:  # its owner finished or aborted it
                        continue
                    raise self._unavailable("AbortMultipartUpload", exc) from None
                removed += 1
                freed += sum(int(p.get("Size", 0)) for p in parts.get("Parts", []))
        return removed, freed

    # -- the prefix's owner --------------------------------------------------------------------

    def _bind(self) -> None:
        """Check the bucket answers and that the prefix belongs to this database, claiming it
        if no database has yet. :raises StoreUnavailable:"""
        store_id = self._store_id()
        marker_key = self.location.key(MARKER)
        marker = json.dumps({"format": _MARKER_FORMAT, "store_id": store_id}).encode()
        for _ in range(2):  # a create that loses a race reads the winner's marker
            try:
                response = self._client.get_object(Bucket=self.location.bucket, Key=marker_key)
                found = response["Body"].read()
            except Exception as exc:
                if _error_code(exc) not in _MISSING:
                    raise self._cannot_start("GetObject", exc) from None
            else:
                return self._check_marker(found, store_id)
            try:
                self._client.put_object(Bucket=self.location.bucket, Key=marker_key,
                                        Body=marker, IfNoneMatch="*")
            except Exception as exc:
                if _error_code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise self._cannot_start("PutObject", exc) from None
            else:
                return None
        raise self._cannot_start("PutObject", RuntimeError("the marker keeps changing"))

    def _store_id(self) -> str:
        """This database's store id for the location, made on first use."""
        location = str(self.location)
        with self._transaction():
            self._conn.execute(
                "INSERT OR IGNORE INTO artifact_buckets (location, store_id) VALUES (?, ?)",
                (location, new_id()))
            (store_id,) = self._conn.execute(
                "SELECT store_id FROM artifact_buckets WHERE location = ?", (location,)
            ).fetchone()
        return str(store_id)

    def _check_marker(self, found: bytes, store_id: str) -> None:
        try:
            owner = json.loads(found)["store_id"]
        except (ValueError, KeyError, TypeError):
            owner = None
        if owner == store_id:
            return
        marker = f"{self.location}/{MARKER}"
        raise StoreUnavailable(
            self._database(),
            f"the artifact store {self.location} belongs to another toolhost database "
            f"(its {marker} names store {owner!r}, this database's is {store_id!r}), whose "
            "purge would delete this one's content: give each database its own prefix (or "
            f"share the database), or delete {marker} if that database is gone for good")

    def _cannot_start(self, operation: str, exc: BaseException) -> StoreUnavailable:
        code = _describe(exc)
        why = {
            "NoSuchBucket": "the bucket does not exist",
            "AccessDenied": "access denied: check the AWS credentials and the bucket's policy",
            "InvalidAccessKeyId": "the AWS access key is not known to the server",
            "SignatureDoesNotMatch": "the AWS secret key does not match the access key",
            "NoCredentialsError": "no AWS credentials: set AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY (or a profile or an instance role)",
        }.get(code)
        if why is None:
            # No answer at all (a connection refused or timed out), or one we have no advice for.
            why = ("the server answered with an error: check the server" if _error_code(exc)
                   else "cannot reach it: check TOOLHOST_S3_ENDPOINT_URL (or AWS_ENDPOINT_URL), "
                        "the network and the server")
        return StoreUnavailable(
            self._database(),
            f"cannot use the artifact store {self.location} ({operation}: {code}): {why}")

    def _database(self) -> Path:
        # StoreUnavailable names a path: the database this store's metadata is in.
        row = self._conn.execute("PRAGMA database_list").fetchone()
        return Path(row[2]) if row is not None and row[2] else Path(DATABASE_NAME)


class S3ArtifactUpload(StreamedUpload):
    """``ArtifactUpload`` for ``S3ArtifactStore``: a buffered part, then a multipart upload.

    Bytes are hashed as they arrive and held until ``PART_SIZE`` of them are; only then is a
    multipart upload created (to a staging key) and each full buffer sent as a part, so memory
    stays at one part. ``commit`` of a stream that never filled a part is one PUT at its content
    address; otherwise it sends the last part, completes the upload, publishes the staged object
    under the identity rule and deletes it. ``abort``, an over-bound write, a failed write and a
    failed commit all abort the multipart upload (or delete the staged object); no row is
    inserted.
    """

    def __init__(self, store: S3ArtifactStore, meta: _Metadata, limit: int) -> None:
        super().__init__(meta, limit)
        self._store = store
        self._buffer = bytearray()
        self._key: str | None = None  # the staging key, once a multipart upload exists
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._completed = False  # the staged object exists (commit got that far)

    def _stage_chunk(self, chunk: bytes, total: int) -> None:
        self._buffer += chunk
        while len(self._buffer) >= PART_SIZE:
            self._send_part(bytes(self._buffer[:PART_SIZE]))
            del self._buffer[:PART_SIZE]

    def _publish(self, created_at: _dt.datetime, checksum: str) -> ArtifactRecord:
        if self._upload_id is None:
            return self._store._publish(self._meta, self._written, checksum, created_at,
                                        content=bytes(self._buffer))
        if self._buffer:
            self._send_part(bytes(self._buffer))
        self._complete()
        assert self._key is not None
        return self._store._publish(self._meta, self._written, checksum, created_at,
                                    staged=self._key)

    def _committed(self) -> None:
        # Published: the staged copy is only a leftover now, and a purge would find it.
        with contextlib.suppress(S3Unavailable):
            self._drop_staged()
        self._release()

    def __del__(self) -> None:
        # Dropped without commit or abort (a caller's bug): no network call from the garbage
        # collector, which may run at shutdown; the handles are released so that purge
        # aborts the multipart upload once it is stale.
        if getattr(self, "_state", None) == "open":
            self._state = "aborted"
            with contextlib.suppress(Exception):
                self._release()

    def _send_part(self, data: bytes) -> None:
        store = self._store
        if self._upload_id is None:
            self._key = store._staging_key()
            store._open.add(self._key)
            created = store._call("CreateMultipartUpload", store._client.create_multipart_upload,
                                  Bucket=store.location.bucket, Key=self._key)
            self._upload_id = str(created["UploadId"])
            store._open.add(self._upload_id)
        number = len(self._parts) + 1
        sent = store._call("UploadPart", store._client.upload_part,
                           Bucket=store.location.bucket, Key=self._key, UploadId=self._upload_id,
                           PartNumber=number, Body=data)
        self._parts.append({"PartNumber": number, "ETag": sent["ETag"]})

    def _complete(self) -> None:
        store = self._store
        store._call("CompleteMultipartUpload", store._client.complete_multipart_upload,
                    Bucket=store.location.bucket, Key=self._key, UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts})
        self._completed = True

    def _drop_staged(self) -> None:
        if self._completed and self._key is not None:
            self._store._delete_object(self._key)
            self._completed = False

    def _release(self) -> None:
        self._buffer = bytearray()
        for handle in (self._key, self._upload_id):
            if handle is not None:
                self._store._open.discard(handle)

    def _discard(self) -> None:
        """Abort for good: the multipart upload, or the staged object if it was completed.
        A server that cannot be reached leaves it to purge (it is never published)."""
        self._state = "aborted"
        store = self._store
        try:
            if self._completed:
                self._drop_staged()
            elif self._upload_id is not None:
                store._call("AbortMultipartUpload", store._client.abort_multipart_upload,
                            Bucket=store.location.bucket, Key=self._key,
                            UploadId=self._upload_id)
        except S3Unavailable:
            pass
        finally:
            self._release()


def open_s3_artifact_store(
    url: str,
    env: Mapping[str, str],
    data_dir: Path,
    clock: Clock,
    conn: sqlite3.Connection | None = None,
    *,
    retention: _dt.timedelta | None = None,
    client: Any = None,
) -> S3ArtifactStore:
    """The store ``TOOLHOST_ARTIFACT_STORE=url`` names, its metadata in ``conn`` or, when none
    is given, in ``data_dir / DATABASE_NAME`` opened here (and closed by ``close()``). Without
    ``client`` one is built from ``env`` (``s3_client``), and closed by ``close()`` too.

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
                Path(data_dir), f"TOOLHOST_ARTIFACT_STORE names an S3 bucket, which needs boto3 "
                f"(not installed: {exc.name}): pip install 'toolhost-core[s3]'") from None
    owns = conn is None
    if conn is None:
        conn = connect(Path(data_dir) / DATABASE_NAME)
    try:
        return S3ArtifactStore(location, client, conn, clock, owns_connection=owns,
                               owns_client=owns_client, retention=retention)
    except BaseException:
        if owns:
            conn.close()
        if owns_client:
            with contextlib.suppress(Exception):
                client.close()
        raise
