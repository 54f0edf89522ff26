"""Artifact content as files: the content for sha256 ``h`` lives at
``<root>/sha256/<h[:2]>/<h[2:]>``, so identical bytes are on disk once however many runs write
them, and a file's own path says what its bytes must hash to.

Writes are atomic (a temp file in the shard, fsync, ``os.replace``, fsync of the directory);
an existing file is verified, not trusted, and a damaged one replaced with the good bytes. A
streamed upload is staged beside the shards (same filesystem, so publishing is a rename) and
hashed as it is written, never held in memory whole. Purge removes a file only inside the
metadata's transaction that found no record referencing it (``ArtifactMetadata.sweep``), and
a write checks inside its own that its file is still there, so the two cannot cross.

The filesystem failing a write, a staging or a read (a full or read-only disk, an I/O error, a
file size limit, no descriptor left) is ``FileStoreUnavailable``, as an object store that does
not answer is ``S3Unavailable``: the store's outage, retryable, never the artifact's damage. A
content file that is missing or is not a regular file is the artifact's: ``ArtifactCorrupted``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from toolhost._adapters.artifact_parts import ArtifactMetadata, Place
from toolhost._adapters.artifact_streams import StreamedUpload, VerifiedChunks
from toolhost._adapters.system_clock import new_id
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactRecord,
    ArtifactStoreUnavailable,
    NewArtifact,
)
from toolhost._model.data_layout import make_private_dirs
from toolhost._model.digest import sha256_checksum
from toolhost._ports.artifacts import STAGING_STALE_AFTER

__all__ = ["FileArtifactUpload", "FileContent", "FileStoreUnavailable"]

_READ_CHUNK = 1024 * 1024
# Staged uploads live beside the shards under a name no content address can have: content
# files are named by hex digits only.
_STAGED_SUFFIX = ".upload"
# A streamed upload asks the kernel to start writing its staged bytes back every this many
# bytes, so the fsync at commit waits for the last stretch only, not for the whole file.
_WRITEBACK_EVERY = 4 * 1024 * 1024
# What purge recognizes under sha256/: shard directories and content files by their hex names;
# anything else there (an operator's file) is left alone.
_SHARD = re.compile(r"^[0-9a-f]{2}$")
_OBJECT = re.compile(r"^[0-9a-f]{62}$")
#: A content file: never through a link, and never waiting on a FIFO someone put there.
_O_CONTENT = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class FileStoreUnavailable(ArtifactStoreUnavailable):
    """The filesystem under the store (its content files, or its SQLite metadata's database)
    did not serve a request: full, read-only, failing.

    ``operation`` is what the store was doing (stage, write, read), ``problem`` the error's
    name (``ENOSPC``, ``EIO``, ``EFBIG``; SQLite's ``SQLITE_FULL``, ``SQLITE_IOERR_WRITE``) or,
    without one, the exception's class. Retryable
    as an object store's outage is: the disk may have room or be back at the next call, and
    nothing was published.
    """

    def __init__(self, location: Path, operation: str, problem: str) -> None:
        super().__init__(f"the artifact store {location} is unavailable ({operation}: {problem})")
        self.location = location
        self.operation = operation
        self.problem = problem


class _NotRegular(OSError):
    """A content path that is a link, a FIFO, a device: the artifact's damage, not the disk's."""


#: The errors that say the store's layout is damaged (a shard directory replaced by a file, a
#: directory where content belongs, a link): a retry would meet them again. Every other error
#: is a filesystem not serving (full, failing, read-only, out of descriptors, refusing us, a
#: network or FUSE mount gone: ENOTCONN, ESTALE, EREMOTEIO ...), which a retry can get past.
_DAMAGE = frozenset({errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG})


def _is_outage(exc: OSError) -> bool:
    return exc.errno not in _DAMAGE and not isinstance(exc, _NotRegular)


@contextlib.contextmanager
def _served(root: Path, operation: str) -> Iterator[None]:
    """The block's OSError that is an outage as the store's ``FileStoreUnavailable`` naming
    ``operation``; any other is raised as it is."""
    try:
        yield
    except OSError as exc:
        if not _is_outage(exc):
            raise
        raise _unavailable(root, operation, exc) from exc


def _unavailable(root: Path, operation: str, exc: OSError) -> FileStoreUnavailable:
    problem = (errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno is not None
               else type(exc).__name__)
    return FileStoreUnavailable(root, operation, problem)


def _fsync_dir(path: Path) -> None:
    # Makes a rename or a new directory entry durable, not just the file's bytes.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_content(path: Path) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file; OSError otherwise (a link, a
    FIFO, a device: each made ``artifacts get`` or a dedupe check wait for ever, or read
    what the link named)."""
    try:
        fd = os.open(path, _O_CONTENT)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):  # a link; a socket
            raise _NotRegular(f"{path.name} is not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _NotRegular(f"{path.name} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_matches(path: Path, size: int, checksum: str) -> bool:
    """Whether ``path`` holds exactly ``size`` bytes hashing to ``checksum`` (streamed)."""
    digest = hashlib.sha256()
    seen = 0
    try:
        with _open_content(path) as f:
            while chunk := f.read(_READ_CHUNK):
                seen += len(chunk)
                if seen > size:
                    return False
                digest.update(chunk)
    except OSError:
        return False
    return seen == size and sha256_checksum(digest) == checksum


class FileContent:
    """Content-addressed files under ``root`` (``ArtifactContent``). Makes ``root/sha256``
    (private) at once. Safe to share between threads and with other processes over the same
    files: a content file is only ever atomically replaced with identical bytes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._blobs = self.root / "sha256"
        make_private_dirs(self._blobs)
        # Temp and staging files this instance has open: purge never takes them, however old.
        # Only set.add/discard touch it (atomic under the GIL), so an upload's __del__ needs
        # no lock that the collecting thread might already hold.
        self.in_use: set[Path] = set()

    def path(self, checksum: str) -> Path:
        """Where the content of ``checksum`` lives."""
        hexdigest = checksum.removeprefix("sha256:")
        return self._blobs / hexdigest[:2] / hexdigest[2:]

    # -- ArtifactContent -----------------------------------------------------------------------

    def put(self, checksum: str, content: bytes) -> Place:
        """See ``ArtifactContent.put``: the file (if not there intact), and, inside the
        transaction, the file again only if a purge took it meanwhile."""
        with _served(self.root, "write"):
            self.ensure(checksum, content)
        path = self.path(checksum)

        def restore() -> None:
            with _served(self.root, "write"):
                if not path.exists():
                    self.ensure(checksum, content)

        return restore

    def chunks(self, record: ArtifactRecord, chunk_size: int) -> VerifiedChunks:
        """See ``ArtifactContent.chunks``: the content file, opened, read lazily."""
        try:
            f = _open_content(self.path(record.checksum))
        except (FileNotFoundError, NotADirectoryError):  # the file, or its shard, gone
            raise ArtifactCorrupted(record.id, "the content file is missing") from None
        except OSError as exc:
            if _is_outage(exc):  # EACCES, EIO, EMFILE: the disk's failure, not the file's
                raise _unavailable(self.root, "read", exc) from exc
            raise ArtifactCorrupted(record.id, f"the content file is unreadable: {exc}") from exc

        def unreadable(exc: Exception) -> Exception:
            # A read that fails (EIO) is the disk's; bytes that are wrong are caught by the
            # size and checksum checks, as ArtifactCorrupted.
            if isinstance(exc, OSError):
                if _is_outage(exc):
                    return _unavailable(self.root, "read", exc)
                return ArtifactCorrupted(record.id, f"the content file is unreadable: {exc}")
            return exc

        return VerifiedChunks(record, f.read, f.close, chunk_size, failed=unreadable)

    def begin(self, new: NewArtifact, limit: int, metadata: ArtifactMetadata) -> StreamedUpload:
        """See ``ArtifactContent.begin``: a staging file, created now."""
        with _served(self.root, "stage"):
            return FileArtifactUpload(self, new, limit, metadata)

    def sweep(self, metadata: ArtifactMetadata) -> tuple[int, int]:
        """Remove every content file no record references: (files, bytes).

        One metadata transaction per shard checks and unlinks, so a write (which checks for
        its file inside its own) either sees the file gone and puts it back, or commits its
        record first and the check here keeps the file.
        """
        files = freed = 0
        for shard in sorted(p for p in self._blobs.iterdir() if _SHARD.fullmatch(p.name)):
            if not shard.is_dir() or shard.is_symlink():
                continue
            objects = sorted(p for p in shard.iterdir() if _OBJECT.fullmatch(p.name))
            if not objects:
                continue
            removed, removed_bytes = metadata.sweep(
                [(f"sha256:{shard.name}{path.name}", path) for path in objects], _remove)
            if removed:
                files += removed
                freed += removed_bytes
                _fsync_dir(shard)
        return files, freed

    def sweep_staging(self, now: _dt.datetime) -> tuple[int, int]:
        """Remove staging and temp files untouched for STAGING_STALE_AFTER before ``now``
        that this instance does not have open: (files, bytes)."""
        # The file's mtime is the filesystem's record of its last write; `now` is the caller's
        # instant. Nothing here reads the time itself.
        cutoff = (now - STAGING_STALE_AFTER).timestamp()
        candidates = list(self._blobs.glob(f".*{_STAGED_SUFFIX}"))
        for shard in self._blobs.iterdir():
            if _SHARD.fullmatch(shard.name) and shard.is_dir() and not shard.is_symlink():
                candidates.extend(shard.glob(".*.tmp"))
        files = freed = 0
        for path in sorted(candidates):
            if path in self.in_use:
                continue
            try:
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode) or info.st_mtime > cutoff:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            files += 1
            freed += info.st_size
        return files, freed

    def close(self) -> None:
        """Nothing to release: every file is closed when its read or write ends."""

    # -- files ---------------------------------------------------------------------------------

    def ensure(self, checksum: str, content: bytes) -> bool:
        """Make the content file exist with exactly ``content``; True if a file was written.

        An existing file is verified, not trusted: a damaged one is replaced with the good bytes
        (which also repairs every record sharing it).
        """
        path = self.path(checksum)
        if path.exists() and _file_matches(path, len(content), checksum):
            return False
        shard = self.shard_for(path)
        tmp = shard / f".{new_id()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.in_use.add(tmp)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
            # Concurrent writers of the same content each replace the file with identical
            # bytes; a reader sees either the old complete file or the new complete file.
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        finally:
            self.in_use.discard(tmp)
        _fsync_dir(shard)
        return True

    def shard_for(self, path: Path) -> Path:
        """The shard directory of a content path, made (durably) if need be."""
        shard = path.parent
        if not shard.is_dir():
            shard.mkdir(exist_ok=True)
            _fsync_dir(self._blobs)
        return shard

    def stage(self) -> tuple[Path, IO[bytes]]:
        """A fresh staging file for an upload, open for writing."""
        tmp = self._blobs / f".{new_id()}{_STAGED_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            staged = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            tmp.unlink()
            raise
        self.in_use.add(tmp)
        return tmp, staged

    def unstage(self, tmp: Path) -> None:
        """The staging file is done with: remove it if it is still there (a disk that
        refuses even that leaves it to purge, which takes it once it is stale)."""
        with contextlib.suppress(OSError):
            tmp.unlink()
        self.in_use.discard(tmp)


def _remove(path: Path) -> int | None:
    """Unlink a content file nothing references: its size, or None when it is gone already or
    is not something a write put there (left alone)."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            return None
        path.unlink()
    except FileNotFoundError:
        return None
    return info.st_size


class FileArtifactUpload(StreamedUpload):
    """``ArtifactUpload`` for ``FileContent``: a staging file hashed as it is written.

    Bytes go straight to a staging file beside the shards while a sha256 is fed chunk by chunk,
    so the content is never held in memory whole. ``commit`` fsyncs it and, inside the
    record's transaction, renames it to its content address unless an intact file is there
    (the existing file is hashed before, outside the transaction: it can be large); the
    staging file is removed once the record has committed. ``abort``, an over-bound write, a
    failed write and a failed commit all close and delete the staging file; no record is
    inserted.
    """

    def __init__(self, content: FileContent, new: NewArtifact, limit: int,
                 metadata: ArtifactMetadata) -> None:
        super().__init__(new, limit, metadata)
        self._content = content
        self._written_back = 0  # where the last writeback request ended
        self._tmp, self._file = content.stage()

    def _stage_chunk(self, chunk: bytes, total: int) -> None:
        with _served(self._content.root, "stage"):
            self._file.write(chunk)
            if total - self._written_back >= _WRITEBACK_EVERY:
                self._file.flush()  # the kernel can only write back what it was given
                self._start_writeback(total)

    def _staged(self, checksum: str) -> Place:
        root = self._content.root
        with _served(root, "stage"):
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            path = self._content.path(checksum)
            intact = path.exists() and _file_matches(path, self._written, checksum)
            shard = self._content.shard_for(path)
        tmp = self._tmp

        # A failure after the rename leaves the content file at its address: harmless, it is
        # only ever the bytes its name says, and a later write of them reuses it.
        def place() -> None:
            with _served(root, "write"):
                if not intact or not path.exists():
                    os.replace(tmp, path)
                    _fsync_dir(shard)

        return place

    def _committed(self) -> None:
        self._content.unstage(self._tmp)

    def __del__(self) -> None:
        # An upload dropped without commit or abort (a caller's bug, a thread that died) must
        # not hold its descriptor and staging file until the process exits. Nobody else can
        # hold the lock once the object is unreachable; a half-built one has no ``_state``.
        if getattr(self, "_state", None) == "open":
            with contextlib.suppress(Exception):
                self._discard()

    def _start_writeback(self, end: int) -> None:
        # POSIX_FADV_DONTNEED on freshly written (dirty) pages starts their writeback without
        # waiting for it and drops none of them (pages being written back stay cached). Only
        # a hint: where it is missing or refused, commit's fsync does all the work as before.
        if hasattr(os, "posix_fadvise"):
            with contextlib.suppress(OSError):
                os.posix_fadvise(self._file.fileno(), self._written_back,
                                 end - self._written_back, os.POSIX_FADV_DONTNEED)
        self._written_back = end

    def _discard(self) -> None:
        self._state = "aborted"
        with contextlib.suppress(OSError):
            self._file.close()
        self._content.unstage(self._tmp)
