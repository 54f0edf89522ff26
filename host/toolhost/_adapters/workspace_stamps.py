"""Provenance stamps: what the host wrote into a workspace, and the file it left there.

A stamp holds only while the file at its path is still exactly the one stamped (device, inode,
size, mtime, ctime: ctime moves on every change and no process can set it back), so a stamp
can lower trust by going stale, never raise it for bytes the host did not write.

A run's workspace outlives one process (a call approved by ``toolhost approve`` runs in it,
and the session that paused goes on in it afterwards), so the stamps of a host-made workspace
are kept in a file beside its root, never inside it (the sandbox binds the root only). The
file is a log: one JSON line per change, appended under an exclusive ``flock``, read from
where this process last stopped; the last line about a path wins. Merging two processes'
stamps is then their order in the log, which is safe either way: a stale stamp no longer
matches its file. A torn or foreign line is skipped (its path reads UNKNOWN). When the log is
much longer than what it holds, the appender rewrites it (a new file, which readers notice
and read whole). Each file of the log begins with a line of its own random epoch: a rewrite
can be given the inode number of the file it replaced, and only the epoch tells them apart.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path

import attrs

from toolhost._adapters.system_clock import new_id
from toolhost._model.workspace import Provenance

__all__ = ["Stamp", "StampBook"]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Rewrite the log once it has this many times the lines it holds, and at least this many.
_COMPACT_RATIO = 4
_COMPACT_MIN_LINES = 4096
_PROVENANCE = {p.value: p for p in Provenance}


@attrs.frozen
class Stamp:
    """What a write left on disk; provenance holds only while the file is still that file."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    provenance: Provenance

    @property
    def key(self) -> tuple[int, int, int, int, int]:
        return (self.device, self.inode, self.size, self.mtime_ns, self.ctime_ns)


def _epoch_line() -> bytes:
    """The first line of a log file: a random epoch, which no other file of the log has."""
    return (json.dumps(["#epoch", new_id()]) + "\n").encode()


def _first_line(data: bytes) -> bytes:
    return data.split(b"\n", 1)[0]


def _line(path: str, stamp: Stamp | None) -> bytes:
    value = None if stamp is None else [*stamp.key, stamp.provenance.value]
    return (json.dumps([path, value], ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _parse(line: bytes) -> tuple[str, Stamp | None] | None:
    """(path, stamp or None for a removal), ``("", None)`` for a clear, None for a bad line."""
    try:
        path, value = json.loads(line)
        if isinstance(value, str):  # the epoch line
            return None
        if value is None:
            return (path, None) if isinstance(path, str) else None
        device, inode, size, mtime_ns, ctime_ns, provenance = value
        key = (device, inode, size, mtime_ns, ctime_ns)
        if not isinstance(path, str) or not all(type(k) is int for k in key):
            return None
        return path, Stamp(device, inode, size, mtime_ns, ctime_ns, _PROVENANCE[provenance])
    except (ValueError, TypeError, KeyError):
        return None


class StampBook:
    """One workspace's stamps: in memory only (``log`` None: an operator's directory, which
    nothing else opens as a run's), or kept in the log file ``log`` shared by every process
    of the host that opens the workspace. Not thread-safe: the handle calls it under its
    lock."""

    def __init__(self, log: Path | None = None) -> None:
        self._log = log
        self._stamps: dict[str, Stamp] = {}
        #: What of the log this process has read: its inode and the offset read to.
        self._read_at: tuple[int, int] | None = None
        #: Lines in the log up to ``_read_at`` (when to rewrite it).
        self._lines = 0
        #: The first line (the epoch) of the log file read to ``_read_at``.
        self._epoch = b""

    def get(self, path: str) -> Stamp | None:
        self._catch_up()
        return self._stamps.get(path)

    def paths(self) -> Collection[str]:
        self._catch_up()
        return self._stamps.keys()

    def __len__(self) -> int:
        self._catch_up()
        return len(self._stamps)

    def apply(self, changes: Mapping[str, Stamp | None]) -> None:
        """Set (a Stamp) or drop (None) the stamp of each path."""
        if not changes:
            return
        with self._appending() as append:
            for path, stamp in changes.items():
                self._set(path, stamp)
                append(_line(path, stamp))

    def clear(self) -> None:
        with self._appending() as append:
            self._stamps.clear()
            append(_line("", None))

    def _set(self, path: str, stamp: Stamp | None) -> None:
        if not path:  # the log's "clear" line
            self._stamps.clear()
        elif stamp is None:
            self._stamps.pop(path, None)
        else:
            self._stamps[path] = stamp

    # ------------------------------------------------------------------ the log

    def _catch_up(self, fd: int | None = None) -> None:
        """Read what other processes appended since this one last read (all of it, when the
        log was rewritten). Without a readable log, the stamps in memory are all there is."""
        if self._log is None:
            return
        own = fd is None
        if own:
            try:  # the usual case, nothing new: one stat
                info = os.stat(self._log)
            except OSError:
                return
            if self._read_at == (info.st_ino, info.st_size):
                return
            try:
                fd = os.open(self._log, os.O_RDONLY | os.O_NOFOLLOW | _O_CLOEXEC)
            except OSError:
                return
        assert fd is not None
        try:
            info = os.fstat(fd)
            if self._read_at is not None and self._read_at == (info.st_ino, info.st_size):
                return
            offset = 0
            if self._read_at is not None and self._read_at[0] == info.st_ino and (
                    _first_line(os.pread(fd, len(self._epoch) + 1, 0)) == self._epoch):
                offset = self._read_at[1]
            else:  # a new log, or the log rewritten (a new epoch, even under the same inode)
                self._stamps.clear()
                self._lines = 0
            data = os.pread(fd, info.st_size - offset, offset) if info.st_size > offset else b""
            if offset == 0:
                self._epoch = _first_line(data)
            # Only whole lines: a line being appended is read once it ends.
            end = data.rfind(b"\n") + 1
            for line in data[:end].splitlines():
                self._lines += 1
                parsed = _parse(line)
                if parsed is not None:
                    self._set(*parsed)
            self._read_at = (info.st_ino, offset + end)
        except OSError:
            return
        finally:
            if own:
                os.close(fd)

    @contextlib.contextmanager
    def _appending(self) -> Iterator[Callable[[bytes], None]]:
        """Append lines to the log under its lock, having first read what others appended;
        without a log, change the stamps in memory only. A log that cannot be written leaves
        this process's stamps in memory (the others read UNKNOWN: untrusted, never wrong)."""
        lines: list[bytes] = []
        fd = self._locked_log()
        if fd is None:
            yield lines.append
            return
        try:
            self._catch_up(fd)
            yield lines.append
            if lines:
                if os.fstat(fd).st_size == 0:  # a new log file begins with its epoch
                    epoch = _epoch_line()
                    self._epoch = epoch.rstrip(b"\n")
                    lines.insert(0, epoch)
                with contextlib.suppress(OSError):
                    view = memoryview(b"".join(lines))
                    while view:
                        view = view[os.write(fd, view):]
                    info = os.fstat(fd)
                    self._read_at = (info.st_ino, info.st_size)
                    self._lines += len(lines)
                    if self._lines > max(_COMPACT_MIN_LINES,
                                         _COMPACT_RATIO * len(self._stamps)):
                        self._compact()
        finally:
            os.close(fd)  # releases the lock

    def _locked_log(self) -> int | None:
        """The log, open for appending and locked; None without one. The lock is taken on
        the file the path names when it is held: a rewrite replaces the file, and a process
        that waited on the old one's lock must not append to what nobody reads any more."""
        if self._log is None:
            return None
        while True:
            try:
                fd = os.open(self._log, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                             | _O_CLOEXEC, 0o600)
            except OSError:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if os.fstat(fd).st_ino == os.stat(self._log).st_ino:
                    return fd
            except OSError:
                pass
            os.close(fd)

    def _compact(self) -> None:
        """Rewrite the log as the stamps it holds (called with its lock held)."""
        assert self._log is not None
        temp = self._log.with_name(self._log.name + ".tmp")
        epoch = _epoch_line()
        data = epoch + b"".join(_line(path, stamp) for path, stamp in self._stamps.items())
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | _O_CLOEXEC,
                     0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, self._log)
        self._read_at = (os.stat(self._log).st_ino, len(data))
        self._lines = len(self._stamps) + 1
        self._epoch = epoch.rstrip(b"\n")

