"""Artifact content on S3-compatible storage: ``TOOLHOST_ARTIFACT_STORE=s3://bucket/prefix``.

Content goes to the bucket by address: the object for content with sha256 ``h`` is
``<prefix>/sha256/<h>``, so identical bytes are stored once and a key says what its bytes must
hash to. Metadata stays in an ``artifacts`` table (``artifact_parts``): the identity rule,
claims, listings and purge's "is this content still referenced" check need a transactional
index, which a bucket is not. ``S3ArtifactStore`` joins the bucket with the SQLite metadata of
the host's data directory; ``pg_artifacts`` joins it with metadata on PostgreSQL, so every host
on that database shares the prefix. Hosts share a bucket prefix only by sharing that database,
so a prefix is bound to one database by a marker object (``<prefix>/toolhost-store.json``) and
another database is refused at start: its purge would delete content that only the first one
references. The database in turn is bound to one location (``artifact_location``): a store of
another prefix or bucket is refused at start, as none of the records' content is there, unless
that prefix holds a copy of the bound one's marker, which moves the binding there (D572). A
prefix inside another store's, or holding one, is refused too, and purge removes only keys of
its own exact layout (``<prefix>/sha256/<64 hex>``, ``<prefix>/staging/<id>``).

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
The requests that carry no content (the marker, a HEAD, ``/readyz``'s probe) go through a second
client bounded in seconds (``QUICK_TIMEOUT_S``), so a server that accepts connections and never
answers stops a start, or fails a probe, within seconds rather than minutes.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import attrs

from toolhost._adapters.artifact_parts import (
    ArtifactMetadata,
    Place,
    check_retention,
)
from toolhost._adapters.artifact_store import JoinedArtifactStore
from toolhost._adapters.artifact_streams import StreamedUpload, VerifiedChunks
from toolhost._adapters.http import trust_roots_file
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactMetadata
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactRecord,
    ArtifactStoreUnavailable,
    NewArtifact,
)
from toolhost._model.settings import SettingError, StoreUnavailable, redact_url_password
from toolhost._ports.artifacts import STAGING_STALE_AFTER
from toolhost._ports.clock import Clock

__all__ = [
    "MARKER",
    "PART_SIZE",
    "S3ArtifactStore",
    "S3ArtifactUpload",
    "S3Clients",
    "S3Content",
    "S3Location",
    "S3Unavailable",
    "check_endpoint_url",
    "close_clients",
    "endpoint_setting",
    "open_s3_artifact_store",
    "s3_client",
    "s3_clients",
    "shown_url",
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
#: An S3 error code refusing the credentials a request (a GET answers ``AccessDenied``, a HEAD
#: a bare 403).
_DENIED = frozenset({"AccessDenied", "403", "Forbidden"})
#: The connect and read timeout, in seconds, of a request that carries no content (the marker,
#: a HEAD, the readiness probe), tried twice: a server that never answers costs a start or a
#: probe about 2 x 5 s, where the content client's 60 s read timeout and four attempts cost 4 min.
QUICK_TIMEOUT_S = 5
_QUICK_ATTEMPTS = 2


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
    def parse(cls, url: str, *, named: str | None = None) -> S3Location:
        """``named``: how a refusal begins (``Settings.named_value``), else the variable and
        ``url`` as given.

        :raises SettingError: for anything but ``s3://bucket`` or ``s3://bucket/prefix``.
        """
        rest = url.strip().removeprefix("s3://")
        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        if (not url.strip().startswith("s3://") or not _BUCKET.fullmatch(bucket) or ".." in bucket
                or any(part in ("", ".", "..") for part in prefix.split("/") if prefix)):
            named = named or f"TOOLHOST_ARTIFACT_STORE={shown_url(url)!r}"
            raise SettingError(
                f"{named} is not s3://bucket or s3://bucket/prefix "
                "(a bucket name is 3 to 63 lower-case letters, digits, '.' or '-')")
        return cls(bucket, prefix)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, *parts: str) -> str:
        return "/".join((self.prefix, *parts) if self.prefix else parts)


#: The variables that name the S3 endpoint, the first one set winning.
ENDPOINT_SETTINGS = ("TOOLHOST_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL")


def endpoint_setting(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(the variable, its value) that names the endpoint; None: AWS itself."""
    return next(((name, value.strip()) for name in ENDPOINT_SETTINGS
                 if (value := env.get(name, "")).strip()), None)


def shown_url(url: str) -> str:
    """An S3 setting's URL (the store, its endpoint) as an error may quote it: a credential
    parameter's value masked (``redact_url_password``), and any userinfo all of it, up to its
    last ``@``: an S3 secret key often holds a ``/``, which ends the userinfo
    ``redact_url_password`` knows."""
    shown = redact_url_password(url)
    scheme, separator, rest = shown.partition("://")
    if not separator:  # `s3:/KEY:SECRET@bucket`, `KEY:SECRET@bucket`: not a URL, still masked
        scheme, rest = "", shown
    if "@" in rest:
        shown = f"{scheme}{separator}***@{rest.rpartition('@')[2]}"
    return shown


def check_endpoint_url(url: str, *, named: str) -> None:
    """Refuse an endpoint botocore could not use: its client's construction raises
    ``ValueError`` quoting the URL as written (``http://[::1``, ``http://my_minio:9000``), a
    traceback. ``named``: how a refusal begins (``Settings.named_value``, no credential in it).

    :raises SettingError: not ``http(s)://host[:port][/path]``, or a host botocore refuses.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        # urlsplit drops tabs and newlines (botocore refuses them); .port raises for a port
        # that is not a number from 0 to 65535; a query or fragment names no endpoint.
        usable = (parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
                  and (parts.port is None or parts.port > 0) and not parts.query
                  and not parts.fragment and url.isprintable()
                  and not any(c.isspace() for c in url))
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        usable = False
    if not usable:
        raise SettingError(f"{named} is not an endpoint: set it to http(s)://host[:port], or "
                           "unset it for AWS itself")
    if not _botocore_takes_host(url):
        raise SettingError(f"{named} is not an endpoint botocore accepts: its host must be an "
                           "IP address or a DNS name (letters, digits and '-', labels of up to "
                           "63 characters; no '_')")


def _botocore_takes_host(url: str) -> bool:
    """Whether botocore's own test (``endpoint.create_endpoint``) passes the URL: asked of
    botocore itself, so the rule is the installed version's, not a copy."""
    try:
        from botocore.utils import (  # type: ignore[import-untyped, unused-ignore]
            is_valid_endpoint_url,
            is_valid_ipv6_endpoint_url,
        )
    except ImportError:  # no S3 client to refuse it: opening the store names the extra
        return True
    return bool(is_valid_endpoint_url(url) or is_valid_ipv6_endpoint_url(url))


class S3Clients(NamedTuple):
    """The two clients of one store, of one session (a second client costs milliseconds, a
    second session a tenth of a second): ``transfer`` for content, whose bodies may be slow to
    come, ``quick`` for requests that carry none, bounded by ``QUICK_TIMEOUT_S``."""

    transfer: Any
    quick: Any


def s3_client(env: Mapping[str, str]) -> Any:
    """The content client of ``s3_clients(env)``. :raises ImportError, SettingError:"""
    return s3_clients(env).transfer


def s3_clients(env: Mapping[str, str]) -> S3Clients:
    """boto3 S3 clients configured from the settings' environment.

    The endpoint is ``TOOLHOST_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL`` (unset: AWS itself),
    the region ``AWS_REGION`` or ``AWS_DEFAULT_REGION``; credentials are the standard
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, else boto3's own
    chain (profile, instance role). Never logged. Where the bucket is and how it is reached
    are the settings' alone, as for every outbound client of the host (D327): no proxy
    variable, no endpoint from boto3's own variables or config files (``AWS_ENDPOINT_URL_S3``,
    ``~/.aws/config``), and the host's trust roots with ``TOOLHOST_CA_BUNDLE`` rather than
    ``AWS_CA_BUNDLE``.

    :raises ImportError: boto3 is not installed (the ``s3`` extra).
    :raises SettingError: the endpoint is not a URL botocore could use, or botocore refused
        another setting (the region).
    """
    import boto3  # type: ignore[import-untyped, unused-ignore]
    from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

    def setting(*names: str) -> str | None:
        return next((v.strip() for n in names if (v := env.get(n, "")).strip()), None)

    named_endpoint = endpoint_setting(env)
    endpoint = None
    if named_endpoint is not None:
        # The composition checked it where it was written; a store opened without it (a
        # script, a test) still gets one line, naming the variable.
        name, endpoint = named_endpoint
        check_endpoint_url(endpoint, named=f"{name}={shown_url(endpoint)!r}")
    config = Config(
        # Path-style for a named endpoint: S3-compatible servers rarely have wildcard DNS.
        s3={"addressing_style": "path" if endpoint else "auto"},
        # Content: a few attempts, each reading as long as a large body may take, then the
        # call fails (retryable) rather than hanging a tool.
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=5,
        read_timeout=60,
        # Our own sha256 is the integrity check; the newer default CRC headers are refused by
        # some S3-compatible servers.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        # Given (even empty), boto3 reads no proxy from the environment.
        proxies={},
        ignore_configured_endpoint_urls=True,
    )
    quick = config.merge(Config(
        retries={"mode": "standard", "total_max_attempts": _QUICK_ATTEMPTS},
        connect_timeout=QUICK_TIMEOUT_S, read_timeout=QUICK_TIMEOUT_S))
    verify = trust_roots_file(env)  # its own one-line HttpConfigError, a ValueError too
    try:
        session = boto3.session.Session(
            aws_access_key_id=setting("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=setting("AWS_SECRET_ACCESS_KEY"),
            aws_session_token=setting("AWS_SESSION_TOKEN"),
            region_name=setting("AWS_REGION", "AWS_DEFAULT_REGION") or "us-east-1",
        )
        return S3Clients(
            session.client("s3", endpoint_url=endpoint, config=config, verify=verify),
            session.client("s3", endpoint_url=endpoint, config=quick, verify=verify))
    except ValueError as exc:
        # botocore's words quote the endpoint as written, password and all (a region it
        # refuses is a ValueError too): one line, the URL masked, no traceback.
        words = str(exc).replace(endpoint, shown_url(endpoint)) if endpoint else str(exc)
        raise SettingError(f"boto3 refused the S3 settings: {redact_url_password(words)}"
                           ) from None


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


class S3Content:
    """Content in ``location``'s bucket through ``client`` (``ArtifactContent``).

    Purge safety is the files' argument with objects for files: a content object is deleted
    only inside the metadata transaction that found no record referencing it, and a write
    checks inside its own transaction that its object is there (a HEAD) and puts it back if
    not, before its record commits. ``bind`` checks the bucket answers and binds the prefix to
    the metadata's database. Requests that carry no content go through ``quick_client`` (the
    ``quick`` of ``S3Clients``; ``client`` itself when none is given). ``close()`` closes the
    clients with ``owns_client``.
    """

    def __init__(self, location: S3Location, client: Any, *, quick_client: Any = None,
                 owns_client: bool = False) -> None:
        self.location = location
        self.client = client
        self.quick = client if quick_client is None else quick_client
        self._owns_client = owns_client
        # Staging keys and multipart upload ids this instance has open: purge never takes them.
        self.open_handles: set[str] = set()

    # -- ArtifactContent -----------------------------------------------------------------------

    def put(self, checksum: str, content: bytes) -> Place:
        """See ``ArtifactContent.put``: the object first, outside the transaction; inside it,
        only a HEAD, and a PUT again if a purge took the object meanwhile."""
        key = self.content_key(checksum)

        def restore() -> None:
            if not self.has_object(key, len(content)):
                self.put_object(key, content)

        restore()
        return restore

    def chunks(self, record: ArtifactRecord, chunk_size: int) -> VerifiedChunks:
        """``record``'s content object as verified chunks: one GetObject, its streaming body
        read as the chunks are, and closing the chunks before the end drops the connection
        rather than read the rest."""
        try:
            response = self.client.get_object(
                Bucket=self.location.bucket, Key=self.content_key(record.checksum))
        except Exception as exc:
            if _error_code(exc) in _MISSING:
                raise ArtifactCorrupted(record.id, "the content object is missing") from None
            raise self.unavailable("GetObject", exc) from None
        body = response["Body"]

        def lost(exc: Exception) -> Exception:  # the connection dropped mid-body
            return self.unavailable("GetObject", exc)

        return VerifiedChunks(record, body.read, body.close, chunk_size, failed=lost)

    def begin(self, new: NewArtifact, limit: int, metadata: ArtifactMetadata) -> StreamedUpload:
        """An S3 upload: nothing reaches the bucket until a part is full."""
        return S3ArtifactUpload(self, new, limit, metadata)

    def sweep(self, metadata: ArtifactMetadata) -> tuple[int, int]:
        """Remove every content object no record references: (objects, bytes), one
        ``metadata.sweep`` per listed page."""
        objects = freed = 0
        prefix = self.location.key("sha256", "")
        # Only keys of this store's own layout, `<prefix>/sha256/<64 hex>`: a deeper key ending
        # in 64 hex digits is another store's (one nested here, D572), never this one's.
        for page in self._pages("ListObjectsV2", "list_objects_v2", "Contents",
                                Prefix=prefix, Delimiter="/"):
            candidates = [("sha256:" + name, (o["Key"], int(o.get("Size", 0)))) for o in page
                          if _HEX_KEY.fullmatch(name := o["Key"].removeprefix(prefix))]
            if candidates:
                removed, removed_bytes = metadata.sweep(candidates, self._remove)
                objects += removed
                freed += removed_bytes
        return objects, freed

    def sweep_staging(self, now: _dt.datetime) -> tuple[int, int]:
        """Remove staging objects and abort multipart uploads untouched for
        STAGING_STALE_AFTER before ``now`` that this instance does not have open:
        (uploads, bytes).

        An upload is judged by its last write, as a staged file is by its mtime: its newest
        part's LastModified, or its Initiated while it has no part yet. Not by Initiated alone:
        a video streams for up to its 7,200 s timeout, and another host's purge must not abort
        an upload that is still receiving parts an hour after it began (D362). The object's
        LastModified and a part's are the server's record; ``now`` is the caller's instant.
        An upload that is gone by the time it is looked at (another purge aborted it, or its
        owner completed it) is skipped, as is one whose abort finds it gone.
        """
        cutoff = now - STAGING_STALE_AFTER
        prefix = self.location.key("staging", "")

        def ours(key: str) -> bool:
            # `<prefix>/staging/<id>` only: a deeper key, or a marker, is another store's
            # (one nested here, D572), whatever its age.
            name = key.removeprefix(prefix)
            return key.startswith(prefix) and "/" not in name and name not in ("", MARKER)

        removed = freed = 0
        for page in self._pages("ListObjectsV2", "list_objects_v2", "Contents", Prefix=prefix,
                                Delimiter="/"):
            for item in page:
                if (not ours(item["Key"]) or item["Key"] in self.open_handles
                        or item["LastModified"] > cutoff):
                    continue
                self.delete_object(item["Key"])
                removed += 1
                freed += int(item.get("Size", 0))
        for page in self._pages("ListMultipartUploads", "list_multipart_uploads", "Uploads",
                                Prefix=prefix):
            for upload in page:
                if (not ours(upload["Key"]) or upload["UploadId"] in self.open_handles
                        or upload["Initiated"] > cutoff):
                    continue
                parts = self._parts(upload["Key"], upload["UploadId"])
                if parts is None:  # another purge aborted it, or its owner completed it
                    continue
                touched = max((p["LastModified"] for p in parts), default=upload["Initiated"])
                if touched > cutoff:  # still being written: a part came within the hour
                    continue
                try:
                    self.client.abort_multipart_upload(
                        Bucket=self.location.bucket, Key=upload["Key"],
                        UploadId=upload["UploadId"])
                except Exception as exc:
                    if _error_code(exc) in _MISSING:  # its owner finished or aborted it
                        continue
                    raise self.unavailable("AbortMultipartUpload", exc) from None
                removed += 1
                freed += sum(int(p.get("Size", 0)) for p in parts)
        return removed, freed

    def _parts(self, key: str, upload_id: str) -> list[dict[str, Any]] | None:
        """Every part of a multipart upload, or None when the upload no longer exists."""
        parts: list[dict[str, Any]] = []
        try:
            for page in self.client.get_paginator("list_parts").paginate(
                    Bucket=self.location.bucket, Key=key, UploadId=upload_id):
                parts.extend(page.get("Parts", []))
        except Exception as exc:
            if _error_code(exc) in _MISSING:
                return None
            raise self.unavailable("ListParts", exc) from None
        return parts

    def ready(self) -> bool:
        """Whether the bucket answers now (``GET /readyz``): the marker read by the quick
        client, so within seconds. A marker that is gone still counts (the bucket answered);
        a bucket that is gone, refused credentials or no answer do not. A GetObject, not a
        HEAD: a HEAD's 404 cannot tell a missing bucket from a missing object."""
        try:
            self._marker()
        except Exception:
            return False
        return True

    def close(self) -> None:
        """Close the clients if this content made them."""
        if self._owns_client:
            close_clients(S3Clients(self.client, self.quick))

    # -- objects -------------------------------------------------------------------------------

    def content_key(self, checksum: str) -> str:
        return self.location.key("sha256", checksum.removeprefix("sha256:"))

    def staging_key(self) -> str:
        return self.location.key("staging", new_id())

    def has_object(self, key: str, size: int) -> bool:
        """Whether ``key`` holds an object of ``size`` bytes (a HEAD; a wrong size is a
        damaged object, which the caller replaces with the good bytes)."""
        try:
            head = self.quick.head_object(Bucket=self.location.bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) in _MISSING:
                return False
            raise self.unavailable("HeadObject", exc) from None
        return bool(head.get("ContentLength") == size)

    def put_object(self, key: str, content: bytes) -> None:
        # Content-MD5 makes the server refuse bytes damaged on the way, before they replace
        # anything.
        md5 = base64.b64encode(hashlib.md5(content, usedforsecurity=False).digest()).decode()
        self.call("PutObject", self.client.put_object, Bucket=self.location.bucket, Key=key,
                  Body=content, ContentMD5=md5)

    def copy_object(self, source: str, key: str) -> None:
        # One server-side copy: the ceiling (512 MiB) is far below CopyObject's 5 GiB limit.
        self.call("CopyObject", self.client.copy_object, Bucket=self.location.bucket, Key=key,
                  CopySource={"Bucket": self.location.bucket, "Key": source})

    def delete_object(self, key: str) -> None:
        self.call("DeleteObject", self.client.delete_object, Bucket=self.location.bucket,
                  Key=key)

    def call(self, operation: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        """``method(**kwargs)``, its failure an ``S3Unavailable`` naming ``operation``."""
        try:
            return method(**kwargs)
        except Exception as exc:
            raise self.unavailable(operation, exc) from None

    def unavailable(self, operation: str, exc: BaseException) -> S3Unavailable:
        return S3Unavailable(str(self.location), operation, _describe(exc))

    def _remove(self, item: tuple[str, int]) -> int:
        key, size = item
        self.delete_object(key)
        return size

    def _pages(self, operation: str, method: str, key: str, **kwargs: Any) -> Iterator[Any]:
        """Every item under ``key`` in a listing, page by page."""
        paginator = self.client.get_paginator(method)
        try:
            for page in paginator.paginate(Bucket=self.location.bucket, **kwargs):
                yield page.get(key, [])
        except Exception as exc:
            raise self.unavailable(operation, exc) from None

    # -- the prefix's owner --------------------------------------------------------------------

    def bind(self, metadata: ArtifactMetadata) -> None:
        """Check the bucket answers; that the prefix lies inside no other store's prefix and
        holds none (as far as the credentials let it look); that ``metadata``'s database is
        bound to this location, binding it if it is bound to none (or moving it here when its
        prefix was copied here whole, marker included); and that the prefix belongs to that
        database, claiming it if no database has yet. Nothing is bound or claimed when any of
        it is refused, but for a move whose marker could not be rewritten after the database
        was rebound here: the next start here completes it.

        :raises StoreUnavailable: naming the database.
        """
        database = metadata.database
        try:
            found = self._marker()
        except Exception as exc:
            raise self._cannot_start(database, "GetObject", exc) from None
        self._refuse_nested(database)
        here = str(self.location)
        bound = metadata.bound_location()
        if bound is not None and bound != here:
            self._move_here(metadata, bound, found)
        store_id = metadata.store_id(here)  # after a move, the new one it gave this prefix
        claimed = self._claim(metadata, store_id, found)
        if bound is None:
            now_bound = metadata.bind_location(here)
            if now_bound != here:  # another location's first start won
                if claimed == "created":  # the marker this start wrote: not this prefix's
                    with contextlib.suppress(Exception):
                        self.delete_marker()
                raise self._bound_elsewhere(database, now_bound)
        if claimed == "copied":
            # The prefix holds this database's content under another of its ids (copied
            # here whole: a move, one interrupted before its rewrite, or a host that read the
            # copied marker before another's move rewrote it): it names this prefix's id from
            # now on, as the one left where it came from names that one's.
            self.write_marker(database, store_id)

    def _claim(self, metadata: ArtifactMetadata, store_id: str, found: bytes | None) -> str:
        """The prefix's marker (``found``, as read) names ``store_id`` ("ours"), or another id
        this database issued ("copied": its content was copied here whole), or is written
        naming it with ``If-None-Match: *`` ("created"), so two first starts can't both win."""
        database = metadata.database
        marker = json.dumps({"format": _MARKER_FORMAT, "store_id": store_id}).encode()
        for attempt in range(2):  # a create that loses a race reads the winner's marker
            if attempt:
                try:
                    found = self._marker()
                except Exception as exc:
                    raise self._cannot_start(database, "GetObject", exc) from None
            if found is not None:
                owner = _owner(found)
                if owner == store_id:
                    return "ours"
                if isinstance(owner, str) and metadata.issued(owner):
                    return "copied"
                raise self._foreign_marker(database, owner, store_id)
            try:
                self.quick.put_object(Bucket=self.location.bucket,
                                      Key=self.location.key(MARKER), Body=marker,
                                      IfNoneMatch="*")
            except Exception as exc:
                if _error_code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise self._cannot_start(database, "PutObject", exc) from None
            else:
                return "created"
        raise self._cannot_start(database, "PutObject", RuntimeError("the marker keeps changing"))

    def write_marker(self, database: Path, store_id: str) -> None:
        """Make the prefix's marker name ``store_id`` (the same bytes whoever writes them)."""
        marker = json.dumps({"format": _MARKER_FORMAT, "store_id": store_id}).encode()
        try:
            self.quick.put_object(Bucket=self.location.bucket, Key=self.location.key(MARKER),
                                  Body=marker)
        except Exception as exc:
            raise self._cannot_start(database, "PutObject", exc) from None

    def delete_marker(self) -> None:
        self.quick.delete_object(Bucket=self.location.bucket, Key=self.location.key(MARKER))

    def _move_here(self, metadata: ArtifactMetadata, bound: str, found: bytes | None) -> None:
        """The database is bound to ``bound``: rebind it here if this prefix's marker
        (``found``) is ``bound``'s, which only copying that prefix here whole puts here (the
        operator moving the content, D572); refuse otherwise. ``bind`` then rewrites the
        copied marker to name this prefix's own new id: the one left at ``bound`` names the
        old id still, so a host started there later is refused rather than moving the
        database back (away from what was written here since). Should that rewrite fail, the
        next start here finds the database bound here and the old id, one it issued, and
        rewrites it then."""
        database, here = metadata.database, str(self.location)
        if found is None or _owner(found) != metadata.store_id(bound):
            raise self._bound_elsewhere(database, bound)
        if (now_bound := metadata.bind_location(here, moved_from=bound)) != here:
            raise self._bound_elsewhere(database, now_bound)

    def _bound_elsewhere(self, database: Path, bound: str) -> StoreUnavailable:
        return StoreUnavailable(
            database,
            f"the artifact store {self.location} is not this database's: its artifacts are in "
            f"{bound} (set TOOLHOST_ARTIFACT_STORE={bound}; to move them here, stop every host "
            f"on this database and copy everything under {bound}/ to {self.location}/, its "
            f"{MARKER} included, before starting one)")

    def _refuse_nested(self, database: Path) -> None:
        """Refuse a prefix inside another store's (a prefix above it holds a marker) or
        holding another store one level down (its ``sha256/`` and ``staging/`` included): two
        stores sharing keys is what D182 forbids, and a purge that took any key ending in a
        content address once removed the nested store's content (D572). ``sweep`` keeps to its
        exact layout too, so a nesting this misses (deeper, started at the same instant, or
        behind a key the credentials may not read) still loses nothing."""
        location = self.location
        parts = location.prefix.split("/") if location.prefix else []
        operation = "GetObject"
        try:
            for depth in range(len(parts)):
                outer = S3Location(location.bucket, "/".join(parts[:depth]))
                if self._nested_marker(outer.key(MARKER)) is not None:
                    raise StoreUnavailable(
                        database,
                        f"the artifact store {location} lies inside the artifact store {outer} "
                        f"(its {outer}/{MARKER}), whose keys it would share: give it a prefix "
                        f"outside {outer}/")
            operation = "ListObjectsV2"
            try:
                listed = self.quick.list_objects_v2(Bucket=location.bucket,
                                                    Prefix=location.key(""), Delimiter="/")
            except Exception as exc:
                if _error_code(exc) not in _DENIED:
                    raise
                listed = {}
            operation = "GetObject"
            for folder in listed.get("CommonPrefixes", []):
                inner = S3Location(location.bucket, str(folder["Prefix"]).rstrip("/"))
                if self._nested_marker(inner.key(MARKER)) is not None:
                    raise StoreUnavailable(
                        database,
                        f"the artifact store {location} holds the artifact store {inner} "
                        f"(its {inner}/{MARKER}), whose keys it would share: give one of them "
                        "a prefix outside the other's")
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise self._cannot_start(database, operation, exc) from None

    def _nested_marker(self, key: str) -> bytes | None:
        """The marker at ``key``, another prefix's, None when there is none or the credentials
        may not read it: credentials scoped to this prefix (all docs/operator.md asks for) may
        not look outside it, and purge keeps to its exact layout, so a nesting the check
        cannot see loses nothing (D572)."""
        try:
            return self._marker(key)
        except Exception as exc:
            if _error_code(exc) in _DENIED:
                return None
            raise

    def _marker(self, key: str | None = None) -> bytes | None:
        """The marker's bytes (the one at ``key``, else this prefix's), None when the bucket
        has none; whatever else the quick client raised (a bucket that is gone, refused
        credentials, no answer) is raised."""
        try:
            response = self.quick.get_object(Bucket=self.location.bucket,
                                             Key=self.location.key(MARKER) if key is None
                                             else key)
        except Exception as exc:
            if _error_code(exc) in _MISSING:
                return None
            raise
        with contextlib.closing(response["Body"]) as body:
            return bytes(body.read())

    def _foreign_marker(self, database: Path, owner: object,
                        store_id: str) -> StoreUnavailable:
        marker = f"{self.location}/{MARKER}"
        return StoreUnavailable(
            database,
            f"the artifact store {self.location} belongs to another toolhost database "
            f"(its {marker} names store {owner!r}, this database's is {store_id!r}), whose "
            "purge would delete this one's content: give each database its own prefix (or "
            f"share the database), or delete {marker} if that database is gone for good")

    def _cannot_start(self, database: Path, operation: str,
                      exc: BaseException) -> StoreUnavailable:
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
            database,
            f"cannot use the artifact store {self.location} ({operation}: {code}): {why}")


def _owner(marker: bytes) -> object:
    """The store id a marker's bytes name (None for bytes that are not a marker)."""
    try:
        return json.loads(marker)["store_id"]
    except (ValueError, KeyError, TypeError):
        return None


class S3ArtifactUpload(StreamedUpload):
    """``ArtifactUpload`` for ``S3Content``: a buffered part, then a multipart upload.

    Bytes are hashed as they arrive and held until ``PART_SIZE`` of them are; only then is a
    multipart upload created (to a staging key) and each full buffer sent as a part, so memory
    stays at one part. ``commit`` of a stream that never filled a part is one PUT at its content
    address; otherwise it sends the last part, completes the upload, copies the staged object
    to its address (unless an object of that size is there) and deletes it once the record has
    committed. ``abort``, an over-bound write, a failed write and a failed commit all abort the
    multipart upload (or delete the staged object); no record is inserted.
    """

    def __init__(self, content: S3Content, new: NewArtifact, limit: int,
                 metadata: ArtifactMetadata) -> None:
        super().__init__(new, limit, metadata)
        self._content = content
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

    def _staged(self, checksum: str) -> Place:
        content = self._content
        if self._upload_id is None:
            return content.put(checksum, bytes(self._buffer))
        if self._buffer:
            self._send_part(bytes(self._buffer))
        self._complete()
        key, staged, size = content.content_key(checksum), self._key, self._written
        assert staged is not None

        def place() -> None:
            if not content.has_object(key, size):
                content.copy_object(staged, key)

        place()  # outside the transaction: a large copy never holds the write lock
        return place

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
        content = self._content
        if self._upload_id is None:
            self._key = content.staging_key()
            content.open_handles.add(self._key)
            created = content.call("CreateMultipartUpload",
                                   content.client.create_multipart_upload,
                                   Bucket=content.location.bucket, Key=self._key)
            self._upload_id = str(created["UploadId"])
            content.open_handles.add(self._upload_id)
        number = len(self._parts) + 1
        sent = content.call("UploadPart", content.client.upload_part,
                            Bucket=content.location.bucket, Key=self._key,
                            UploadId=self._upload_id, PartNumber=number, Body=data)
        self._parts.append({"PartNumber": number, "ETag": sent["ETag"]})

    def _complete(self) -> None:
        content = self._content
        content.call("CompleteMultipartUpload", content.client.complete_multipart_upload,
                     Bucket=content.location.bucket, Key=self._key, UploadId=self._upload_id,
                     MultipartUpload={"Parts": self._parts})
        self._completed = True

    def _drop_staged(self) -> None:
        if self._completed and self._key is not None:
            self._content.delete_object(self._key)
            self._completed = False

    def _release(self) -> None:
        self._buffer = bytearray()
        for handle in (self._key, self._upload_id):
            if handle is not None:
                self._content.open_handles.discard(handle)

    def _discard(self) -> None:
        """Abort for good: the multipart upload, or the staged object if it was completed.
        A server that cannot be reached leaves it to purge (it is never published)."""
        self._state = "aborted"
        content = self._content
        try:
            if self._completed:
                self._drop_staged()
            elif self._upload_id is not None:
                content.call("AbortMultipartUpload", content.client.abort_multipart_upload,
                             Bucket=content.location.bucket, Key=self._key,
                             UploadId=self._upload_id)
        except S3Unavailable:
            pass
        finally:
            self._release()


class S3ArtifactStore(JoinedArtifactStore):
    """Content in ``location``'s bucket through ``client`` (and ``quick_client``, see
    ``S3Content``); metadata in ``conn``'s ``artifacts`` (``SQLiteArtifactMetadata``).
    Construction applies the migrations, checks the bucket answers and binds the prefix to
    this database (``StoreUnavailable`` otherwise). A composition: every method but ``ready``
    is ``JoinedArtifactStore``'s."""

    def __init__(
        self,
        location: S3Location,
        client: Any,
        conn: sqlite3.Connection,
        clock: Clock,
        *,
        quick_client: Any = None,
        owns_connection: bool = False,
        owns_client: bool = False,
        retention: _dt.timedelta | None = None,
    ) -> None:
        retention = check_retention(retention)
        metadata = SQLiteArtifactMetadata(conn, owns_connection=owns_connection)
        content = S3Content(location, client, quick_client=quick_client,
                            owns_client=owns_client)
        content.bind(metadata)
        super().__init__(metadata, content, clock, retention=retention)
        self._bucket = content

    def ready(self) -> bool:
        """See ``JoinedArtifactStore.ready``: the metadata, then the bucket."""
        return super().ready() and self._bucket.ready()

    @property
    def _client(self) -> Any:
        """The S3 client the content calls (tests swap in a failing one)."""
        return self._bucket.client

    @_client.setter
    def _client(self, client: Any) -> None:
        # Both clients: a test's failing client stands for the server, whichever asks it.
        self._bucket.client = self._bucket.quick = client


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
    retention = check_retention(retention)
    clients, owns_client = given_or_new_client(client, env, Path(data_dir))
    owns = conn is None
    if conn is None:
        conn = connect(Path(data_dir) / DATABASE_NAME)
    try:
        return S3ArtifactStore(location, clients.transfer, conn, clock,
                               quick_client=clients.quick, owns_connection=owns,
                               owns_client=owns_client, retention=retention)
    except BaseException:
        if owns:
            conn.close()
        if owns_client:
            close_clients(clients)
        raise


def given_or_new_client(client: Any, env: Mapping[str, str],
                        database: Path) -> tuple[S3Clients, bool]:
    """``client`` (for both uses), or the clients built from ``env`` (``s3_clients``): (the
    clients, whether they were built here, so their store closes them).

    :raises StoreUnavailable: boto3 is missing (named after ``database``).
    """
    if client is not None:
        return S3Clients(client, client), False
    try:
        return s3_clients(env), True
    except ImportError as exc:
        raise StoreUnavailable(
            database, f"TOOLHOST_ARTIFACT_STORE names an S3 bucket, which needs boto3 "
            f"(not installed: {exc.name}): pip install 'toolhost-core[s3]'") from None


def close_clients(clients: S3Clients) -> None:
    """Close a store's clients (one client given for both is closed twice, which botocore
    allows)."""
    for client in clients:
        with contextlib.suppress(Exception):
            client.close()
