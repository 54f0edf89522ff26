"""An mbox file's messages exactly as ``mailbox.mbox`` reads them, found with ``bytes.find``.

``mailbox.mbox`` builds its table of contents line by line (a ``readline`` and a ``tell`` for
every line of the file) and reads each message through two file proxies; for a large export
that is a tenth of an import. The rules are its own (POSIX line ends): a message starts at each
line that begins with ``From ``, its bytes start after that line, and it ends where the next
such line starts, or one byte earlier when the line before that is empty; the last one ends at
the end of the file, or one byte earlier when the file ends with an empty line. A message is
read no further than ``limit`` bytes. The tests hold the two readings equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Final

__all__ = ["messages", "spans"]

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
