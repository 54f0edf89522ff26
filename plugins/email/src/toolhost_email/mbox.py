"""An mbox file's messages exactly as ``mailbox.mbox`` reads them, found with ``bytes.find``.

``mailbox.mbox`` builds its table of contents line by line (a ``readline`` and a ``tell`` for
every line of the file) and reads each message through two file proxies; for a large export
that is a tenth of an import. The rules are its own (POSIX line ends): a message starts at each
line that begins with ``From ``, its bytes start after that line, and it ends where the next
such line starts, or one byte earlier when the line before that is empty; the last one ends at
the end of the file, or one byte earlier when the file ends with an empty line. A message is
read no further than ``limit`` bytes. The tests hold the two readings equal.

``Reading`` is one import's hold on the file: a shared POSIX lock (the one mail clients and
delivery agents take to write an mbox), and a check after every message read that the file is
still the one whose offsets were taken: a client that rewrites the mbox in place (mutt's sync)
or replaces it would otherwise have its new bytes read at the old offsets, torn.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["Changed", "Locked", "Reading", "messages", "spans"]

#: How much of the file one search reads.
_BLOCK: Final = 1 << 20
_FROM: Final = b"\nFrom "


def spans(file: BinaryIO, block: int = _BLOCK) -> list[tuple[int, int]]:
    """Each message's (start of its "From " line, end), as ``mailbox.mbox``'s table of
    contents has them, reading ``file`` from where it is to its end."""
    # (where a "From " line starts, whether the line before it is empty); a newline before
    # the file's first byte makes a "From " line there one like any other.
    starts: list[tuple[int, bool]] = []
    data = tail = b"\n"
    offset = -1  # where ``tail`` (the end of what was read, for a match across two reads) is
    while chunk := file.read(block):
        data = tail + chunk
        at = data.find(_FROM, max(0, len(tail) - len(_FROM) + 1))
        while at >= 0:
            starts.append((offset + at + 1, at > 0 and data[at - 1] == 0x0A))
            at = data.find(_FROM, at + 1)
        tail = data[-len(_FROM):]
        offset += len(data) - len(tail)
    if not starts:
        return []
    size = offset + len(tail)
    ends = [start - 1 if empty else start for start, empty in starts[1:]]
    ends.append(size - 1 if data.endswith(b"\n\n") else size)  # the last line is empty
    return [(start, end) for (start, _), end in zip(starts, ends, strict=True)]


def messages(file: BinaryIO, limit: int) -> Iterator[bytes]:
    """Each message's bytes (without its "From " line), at most ``limit`` of them."""
    for start, end in spans(file):  # before any message is read, as mailbox.mbox does
        after = _past_line(file, start, end)
        file.seek(after)
        yield file.read(min(end - after, limit)) if end > after else b""


def _past_line(file: BinaryIO, start: int, end: int, block: int = _BLOCK) -> int:
    """Where the line at ``start`` ends (past its newline; ``end`` if it runs on to there), read
    a block at a time: a ``readline`` would hold a hostile 40 MiB "From " line whole."""
    file.seek(start)
    at = start
    while at < end and (chunk := file.read(min(block, end - at))):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(chunk)
    return at


class Changed(Exception):
    """The file was written, truncated, replaced or removed since its offsets were taken."""


class Locked(Exception):
    """Another program held a write lock on the file for all of ``Reading``'s wait."""


#: What says the file is the one read: its device and inode (at the path too), size,
#: modification and change times. A same-size rewrite inside one tick of the file system's
#: clock keeps all of them; a writer that takes the lock cannot make one meanwhile.
_Identity = tuple[int, int, int, int, int]
#: How long a writer's lock is waited for (its deliveries hold it for milliseconds).
_LOCK_WAIT_S: Final = 5.0
#: What ``fcntl`` answers when another process holds a conflicting lock.
_HELD: Final = frozenset({errno.EACCES, errno.EAGAIN})


def _identity(st: os.stat_result) -> _Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Reading:
    """``path`` opened for reading, under a shared ``fcntl`` lock where the file system has
    locks, its identity taken before anything of it is read.

    Not a dot-lock (``path.lock``): that one is exclusive, needs write access to the mail
    directory, and one left by a killed import would stop delivery. A writer that takes no
    lock at all is caught by ``unchanged``, which the messages call after every read.

    :raises Locked: a writer held its lock longer than ``_LOCK_WAIT_S``.
    :raises OSError: the file cannot be opened.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: BinaryIO = path.open("rb")
        try:
            _lock_shared(self.file.fileno())
            self._identity = _identity(os.fstat(self.file.fileno()))
        except BaseException:
            self.file.close()  # closing lets go of the lock too
            raise

    def __enter__(self) -> Reading:
        return self

    def __exit__(self, *_: object) -> None:
        self.file.close()

    def unchanged(self) -> None:
        """:raises Changed: the open file or the one at ``path`` is not the one first read."""
        try:
            at_path = _identity(os.stat(self.path))
        except OSError as exc:  # removed or moved away
            raise Changed from exc
        if not _identity(os.fstat(self.file.fileno())) == at_path == self._identity:
            raise Changed

    def messages(self, limit: int) -> Iterator[bytes]:
        """``messages`` of the file from its start, each checked ``unchanged`` once read.

        :raises Changed: as soon as a read may have seen the file other than it was."""
        self.file.seek(0)
        for raw in messages(self.file, limit):
            self.unchanged()
            yield raw


def _lock_shared(fd: int) -> None:
    """A shared lock on ``fd``, waited for (counted pauses, no clock read) while a writer
    holds one; none where the file system keeps no locks (ENOLCK, an NFS mount without
    lockd): ``Reading.unchanged`` guards the read alone there."""
    waited, pause = 0.0, 0.01
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in _HELD:
                return
            if waited >= _LOCK_WAIT_S:
                raise Locked from exc
        time.sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.25)
