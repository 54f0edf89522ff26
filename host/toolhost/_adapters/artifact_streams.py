"""What every artifact content (``artifact_parts.ArtifactContent``) shares: its content read
back as verified chunks, and the bookkeeping of a streamed upload (the bound, the running
sha256, the states), so that a content writes only how it stages and places bytes.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import threading
from collections.abc import Callable
from types import TracebackType

from toolhost._adapters.artifact_parts import ArtifactMetadata, Place
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactError,
    ArtifactRecord,
    ArtifactTooLarge,
    NewArtifact,
    as_utc,
)
from toolhost._model.digest import sha256_checksum

__all__ = ["StreamedUpload", "VerifiedChunks"]


class VerifiedChunks:
    """``ArtifactChunks`` over an open source of a record's content: what every content's
    ``chunks`` hands out.

    ``read(n)`` returns up to ``n`` bytes (``b""`` at the end), ``close()`` releases the
    source, and ``failed`` turns what ``read`` raises into the store's error (an unreadable
    file, a lost server). Never asks for more than one byte past the recorded size, and hashes
    every chunk as it goes; the chunk that completes the size is returned only once the end
    of the source and the checksum are confirmed. Not for concurrent use by several threads.
    """

    def __init__(
        self,
        record: ArtifactRecord,
        read: Callable[[int], bytes],
        close: Callable[[], object],
        chunk_size: int,
        *,
        failed: Callable[[Exception], Exception],
    ) -> None:
        self._record = record
        self._read = read
        self._close: Callable[[], object] | None = close
        self._chunk_size = chunk_size
        self._failed = failed
        self._digest = hashlib.sha256()
        self._seen = 0
        self._done = False

    def __iter__(self) -> VerifiedChunks:
        return self

    def __next__(self) -> bytes:
        if self._done:
            raise StopIteration
        try:
            chunk = self._next_chunk()
        except BaseException:
            self.close()
            raise
        if not chunk and self._done:
            raise StopIteration
        return chunk

    def close(self) -> None:
        """See ``ArtifactChunks.close``."""
        self._done = True
        close, self._close = self._close, None
        if close is not None:
            with contextlib.suppress(Exception):  # a read-only source: nothing is lost
                close()

    def __enter__(self) -> VerifiedChunks:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # Dropped half-read: the descriptor or connection goes now, not at the collector's
        # leisure. A half-built one has no ``_close``.
        if getattr(self, "_close", None) is not None:
            with contextlib.suppress(Exception):
                self.close()

    def _next_chunk(self) -> bytes:
        record = self._record
        want = min(self._chunk_size, record.size - self._seen)
        chunk = self._fill(want)
        self._seen += len(chunk)
        self._digest.update(chunk)
        if self._seen < record.size:
            if len(chunk) < want:  # the source ended early
                raise ArtifactCorrupted(
                    record.id, f"size {self._seen} bytes, expected {record.size}")
            return chunk
        # The chunk that completes the content: verified before anyone sees it.
        if self._fill(1):
            raise ArtifactCorrupted(
                record.id, f"size more than {record.size} bytes, expected {record.size}")
        if sha256_checksum(self._digest) != record.checksum:
            raise ArtifactCorrupted(record.id, "checksum mismatch")
        self.close()
        return chunk

    def _fill(self, n: int) -> bytes:
        """Up to ``n`` bytes, fewer only at the end of the source (a read may return less)."""
        if n == 0:
            return b""
        try:
            data = self._read(n)
            if 0 < len(data) < n:
                parts = [data]
                got = len(data)
                while got < n and (more := self._read(n - got)):
                    parts.append(more)
                    got += len(more)
                data = b"".join(parts)
        except Exception as exc:
            raise self._failed(exc) from None
        return data


class StreamedUpload:
    """What every content's ``ArtifactUpload`` shares: the bound checked before a byte is
    staged, a sha256 fed chunk by chunk, one lock over the calls (so an abort from another
    thread, a cancellation, is safe), and an upload that stays committed or aborted once it is.

    A content's upload stages bytes (``_stage_chunk``), readies them for publishing
    (``_staged``, which returns the ``Place`` the metadata's transaction runs), drops what
    staging left once published (``_committed``) and drops them (``_discard``, which leaves
    ``_state`` "aborted"); a failure in any of them discards the upload, so nothing is ever
    published half-written.
    """

    def __init__(self, new: NewArtifact, limit: int, metadata: ArtifactMetadata) -> None:
        self._new = new
        self._limit = limit
        self._metadata = metadata
        self._lock = threading.Lock()
        self._digest = hashlib.sha256()
        self._written = 0
        self._overflow: int | None = None  # the size an over-bound write would have reached
        self._state = "open"  # then "committed" or "aborted", for good

    @property
    def bytes_written(self) -> int:
        """See ``ArtifactUpload.bytes_written``."""
        return self._written

    def write(self, chunk: bytes) -> None:
        """See ``ArtifactUpload.write``."""
        if not isinstance(chunk, bytes):
            raise TypeError(f"artifact content must be bytes, got {type(chunk).__name__}")
        with self._lock:
            self._check_open()
            total = self._written + len(chunk)
            # Checked before the chunk is staged: bytes past the bound are never kept.
            if total > self._limit:
                self._overflow = total
                self._discard()
                raise ArtifactTooLarge(total, self._limit)
            try:
                self._stage_chunk(chunk, total)
            except BaseException:
                # A failed stage leaves the staged bytes unknown; the digest can no longer be
                # trusted to describe them, so the upload cannot continue.
                self._discard()
                raise
            self._digest.update(chunk)
            self._written = total

    def commit(self, now: _dt.datetime) -> ArtifactRecord:
        """See ``ArtifactUpload.commit``: the record under the identity rule, as
        ``put_or_reuse`` at ``now`` would make it."""
        with self._lock:
            self._check_open()
            try:
                checksum = sha256_checksum(self._digest)
                new = self._new.record(new_id(), self._written, checksum, as_utc(now))
                record = self._metadata.record(new, reuse=True, place=self._staged(checksum))
            except BaseException:
                self._discard()
                raise
            self._state = "committed"
            self._committed()
            return record

    def abort(self) -> None:
        """See ``ArtifactUpload.abort``."""
        with self._lock:
            if self._state == "open":
                self._discard()

    def _stage_chunk(self, chunk: bytes, total: int) -> None:
        """Keep ``chunk``; ``total`` is the upload's size with it."""
        raise NotImplementedError

    def _staged(self, checksum: str) -> Place:
        """Ready what was staged, of ``checksum``, for its address (outside the metadata's
        transaction: it may be slow), and return what places it there inside it."""
        raise NotImplementedError

    def _committed(self) -> None:
        """After the publish: drop what staging left behind."""

    def _discard(self) -> None:
        """Drop what was staged, for good; ``_state`` becomes "aborted"."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._state == "committed":
            raise ArtifactError("the upload is already committed")
        if self._state == "aborted":
            if self._overflow is not None:
                raise ArtifactTooLarge(self._overflow, self._limit)
            raise ArtifactError("the upload was aborted")
