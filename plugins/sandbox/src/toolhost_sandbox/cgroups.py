"""A per-call cgroup with the process (and memory) limit: v1 ``pids``/``memory`` hierarchies,
or a delegated cgroup v2 subtree.

Where the hierarchies are is read from ``/proc/self/mountinfo`` and this process's place in
them from ``/proc/self/cgroup`` (``MOUNTINFO`` and ``OWN_CGROUPS``: a test points them at an
empty file to hide every cgroup), never assumed to be under ``/sys/fs/cgroup``.

cgroup v2's "no internal processes" rule: a child gets a working ``pids.max`` only when its
parent lists ``pids`` in ``cgroup.subtree_control``, and a cgroup (other than the root) may
enable that only while no process is in it. This process's own cgroup holds this process, so
the call's cgroup is made in the first of these that offers ``pids`` (enabling it there if the
kernel allows): this process's own cgroup (the root cgroup only, in practice), else its parent
if that is delegated (a systemd unit with ``Delegate=yes`` whose processes sit in a leaf:
systemd marks it with the xattr ``trusted.delegate``, or ``user.delegate``, set to ``1``).
A parent not so marked (``system.slice`` for a unit without ``Delegate=yes``) is systemd's
to manage and is never written to. This process is never moved: a host whose own cgroup holds
it and is the delegated one has no v2 subtree to use (docs/decisions.md D263).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import threading
from pathlib import Path

__all__ = ["MOUNTINFO", "OWN_CGROUPS", "Cgroup"]

#: The files this module reads to find the hierarchies (module attributes: a test may hide them).
MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")

_names = itertools.count()


def _mounts() -> list[tuple[str, str, str, list[str]]]:
    """(root within the hierarchy, mount point, fs type, super options) of each cgroup mount."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        fstype = fields[dash + 1]
        if fstype in ("cgroup", "cgroup2") and len(fields) > dash + 3:
            # Mount points escape space, tab, newline and backslash as octal (\040).
            point = fields[4].encode().decode("unicode_escape")
            found.append((fields[3], point, fstype, fields[dash + 3].split(",")))
    return found


def _own(controller: str | None) -> str | None:
    """This process's cgroup path in ``controller``'s v1 hierarchy, or in v2 (None)."""
    try:
        lines = OWN_CGROUPS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if controller is None and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if controller is not None and controller in parts[1].split(","):
            return parts[2]
    return None


def _directory(own: str, fstype: str, controller: str | None) -> Path | None:
    """The directory of the cgroup ``own`` under a mount of the hierarchy, if one shows it."""
    for root, point, kind, options in _mounts():
        if kind != fstype or (controller is not None and controller not in options):
            continue
        if own == root or own.startswith(root.rstrip("/") + "/"):
            path = Path(point) / own[len(root):].lstrip("/")
            if (path / "cgroup.procs").is_file():
                return path
    return None


def _mkdir_child(parent: Path) -> Path | None:
    while True:
        path = parent / f"toolhost-sandbox-{os.getpid()}-{next(_names)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
        except OSError:
            return None


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _delegated(path: Path) -> bool:
    """systemd delegated ``path`` (``Delegate=yes``): its xattr says so."""
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(path, name) == b"1":
                return True
    return False


def _enabled(parent: Path, controller: str) -> bool:
    """``controller`` is on in ``parent``'s subtree_control, turned on here if the kernel lets
    us (it refuses, EBUSY, while processes sit in ``parent`` itself)."""
    if controller in _words(parent / "cgroup.subtree_control"):
        return True
    if controller not in _words(parent / "cgroup.controllers"):
        return False
    try:
        (parent / "cgroup.subtree_control").write_text(f"+{controller}")
    except OSError:
        return False
    return controller in _words(parent / "cgroup.subtree_control")


class Cgroup:
    """One call's cgroup: ``add`` the launcher before it becomes bwrap, ``kill`` everything in
    it, ``remove`` it afterwards. ``version`` is 1 or 2."""

    def __init__(self, dirs: list[Path], version: int) -> None:
        self._dirs = dirs
        self.version = version

    @property
    def path(self) -> Path:
        """The directory whose ``pids.max`` holds the process limit."""
        return self._dirs[0]

    @classmethod
    def create(cls, processes: int, memory_bytes: int) -> Cgroup | None:
        """A cgroup limiting processes (v1 first, then v2), or None when none can be made."""
        return cls._create_v1(processes, memory_bytes) or cls._create_v2(processes, memory_bytes)

    @classmethod
    def _create_v1(cls, processes: int, memory_bytes: int) -> Cgroup | None:
        pids = cls._v1_child("pids")
        if pids is None:
            return None
        group = cls([pids], 1)
        try:
            (pids / "pids.max").write_text(str(processes))
        except OSError:
            group.remove()
            return None
        memory = cls._v1_child("memory")
        if memory is not None:
            try:
                (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
                swap = memory / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(str(memory_bytes))
                group._dirs.append(memory)
            except OSError:
                with contextlib.suppress(OSError):
                    memory.rmdir()
        return group

    @staticmethod
    def _v1_child(controller: str) -> Path | None:
        """A fresh child of this process's own v1 cgroup (so its parent's limits still bind)."""
        own = _own(controller)
        parent = None if own is None else _directory(own, "cgroup", controller)
        return None if parent is None else _mkdir_child(parent)

    @classmethod
    def _create_v2(cls, processes: int, memory_bytes: int) -> Cgroup | None:
        own = _own(None)
        here = None if own is None else _directory(own, "cgroup2", None)
        if here is None:
            return None
        candidates = [here]
        if own != "/" and (here.parent / "cgroup.procs").is_file() and _delegated(here.parent):
            candidates.append(here.parent)  # the delegated subtree this process's leaf is in
        for parent in candidates:
            if not _enabled(parent, "pids"):
                continue
            path = _mkdir_child(parent)
            if path is None:
                continue
            group = cls([path], 2)
            try:
                (path / "pids.max").write_text(str(processes))
            except OSError:
                group.remove()
                continue
            if _enabled(parent, "memory"):
                with contextlib.suppress(OSError):
                    (path / "memory.max").write_text(str(memory_bytes))
                    # v1's memsw bound memory and swap together; here swap is its own figure.
                    swap = path / "memory.swap.max"
                    if swap.exists():
                        swap.write_text("0")
            return group
        return None

    def add(self, pid: int) -> None:
        for path in self._dirs:
            (path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            text = (self._dirs[0] / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill(self) -> None:
        """SIGKILL every process still in the group (a second net under the namespace kill):
        v2's ``cgroup.kill`` where the kernel has it (no pid read then signalled, no race
        with a fork), and each listed pid in any case."""
        kill_file = self._dirs[0] / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, *, wait_s: float = 5.0) -> None:
        """Kill what is left and remove the directories; a process still exiting keeps a
        cgroup busy (EBUSY) for a moment, so this retries for up to ``wait_s``."""
        pause = threading.Event()
        tries = max(1, int(wait_s / 0.01))
        for path in reversed(self._dirs):
            for _ in range(tries):
                self.kill()
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    pause.wait(0.01)
