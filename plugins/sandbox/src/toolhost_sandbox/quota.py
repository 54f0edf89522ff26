"""The workspace quota: how much the command may leave in the workspace, checked from the host
while it runs.

RLIMIT_FSIZE bounds each file, not their number, so without this one call could fill the
host's disk (the data directory's: its SQLite stores and artifacts too). The runner measures
the workspace every ``INTERVAL_S`` (longer for a big tree: ``PAUSE_PER_ENTRY_S``) and kills
the sandbox once it holds more than ``QUOTA_BYTES`` of disk blocks, ``QUOTA_ENTRIES`` entries
or ``QUOTA_DEPTH`` levels. Counted: disk blocks, not sizes (a sparse file costs what it
stores), each inode once (hard links), everything the workspace holds (files written before
the call too).

The walk runs beside a command that may rename directories under it. It holds at most three
fds whatever the depth (it climbs back by ``..``, checking it is the directory it came from,
and gives up on that measurement otherwise); a directory renamed away between its listing and
its opening is missed by one measurement, not by the next.
"""

from __future__ import annotations

import os
import stat

import attrs

__all__ = ["INTERVAL_S", "PAUSE_PER_ENTRY_S", "QUOTA_BYTES", "QUOTA_DEPTH", "QUOTA_ENTRIES", "Usage", "measure"]

#: Disk the workspace may use: 1 GiB.
QUOTA_BYTES = 1024 * 1024 * 1024
#: Entries (files, directories, anything) in the workspace.
QUOTA_ENTRIES = 200_000
#: Directory levels: 2048 is what the workspace tools' 4096-byte paths can reach.
QUOTA_DEPTH = 2048
#: Seconds between two measurements, at least.
INTERVAL_S = 0.2
#: And per entry the last one counted: a walk costs a few microseconds an entry, so this keeps
#: the host's time spent measuring under about a third of the call's (no clock is read).
PAUSE_PER_ENTRY_S = 0.00002

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@attrs.define
class Usage:
    """One measurement: ``over`` names the quota passed (``bytes``, ``entries``, ``depth``),
    or is None; the walk stops as soon as one is."""

    disk_bytes: int = 0
    entries: int = 0
    depth: int = 0
    over: str | None = None
    _linked: set[tuple[int, int]] = attrs.field(factory=set, repr=False)

    def count(self, info: os.stat_result) -> None:
        self.entries += 1
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in self._linked:
                return
            self._linked.add((info.st_dev, info.st_ino))
        self.disk_bytes += info.st_blocks * 512
        if self.disk_bytes > QUOTA_BYTES:
            self.over = "bytes"
        elif self.entries > QUOTA_ENTRIES:
            self.over = "entries"


def _scan(dir_fd: int, usage: Usage) -> list[tuple[str, int, int]]:
    """Count one directory's entries; return its subdirectories (name, device, inode)."""
    subdirs: list[tuple[str, int, int]] = []
    with os.scandir(dir_fd) as it:
        for entry in it:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            usage.count(info)
            if usage.over is not None:
                break
            if stat.S_ISDIR(info.st_mode):
                subdirs.append((entry.name, info.st_dev, info.st_ino))
    return subdirs


def measure(root: int) -> Usage:
    """The workspace's usage under the directory fd ``root``, stopping at the first quota
    passed. A directory that vanishes or moves during the walk is left out of this
    measurement."""
    usage = Usage()
    try:
        current = os.dup(root)
    except OSError:
        return usage  # no fd to spare this time: the next measurement tries again
    try:
        here = os.fstat(current)
        stack = [((here.st_dev, here.st_ino), _scan(current, usage))]
        while usage.over is None:
            _, pending = stack[-1]
            if not pending:
                stack.pop()
                if not stack:
                    break
                parent = os.open("..", _O_DIR, dir_fd=current)
                os.close(current)
                current = parent
                here = os.fstat(current)
                if (here.st_dev, here.st_ino) != stack[-1][0]:
                    break  # moved under the walk: this measurement ends here
                continue
            name, device, inode = pending.pop()
            try:
                child = os.open(name, _O_DIR, dir_fd=current)
            except OSError:
                continue  # gone, or swapped for something else, since it was listed
            here = os.fstat(child)
            if (here.st_dev, here.st_ino) != (device, inode):
                os.close(child)
                continue
            os.close(current)
            current = child
            usage.depth = max(usage.depth, len(stack))
            if usage.depth > QUOTA_DEPTH:
                usage.over = "depth"
                break
            stack.append(((device, inode), _scan(current, usage)))
    except OSError:
        pass  # unreadable meanwhile: what was counted stands
    finally:
        os.close(current)
    return usage
