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

Getting the sandbox into the call's cgroup: writing another process's pid to ``cgroup.procs``
takes the kernel's global migration lock, whose entry waits for an RCU grace period whenever
no migration happened in the last one: 10-12 ms here, a call's whole cost several times over.
A thread that moves itself (``0`` to a v1 ``tasks`` file) skips that lock, and a process it
forks is born in its cgroup. So on v1 the calling thread steps into the call's cgroup for the
moment it starts bwrap (``entered``) and steps back out; the sandbox is never migrated. v2
cgroups take no single thread (outside threaded subtrees): there the sandbox is ``add``-ed.
The thread opens its way back out (the parents' ``tasks``) before it steps in, so that no lack
of file descriptors can keep it inside; and while the main thread is inside, ``/proc/self/
cgroup`` (the main thread's) names the call's cgroup: this process's own place is then the one
read last while it was not (``_own``), or a call starting meanwhile would nest in that one.

The call's cgroup's name (this process's pid and a count of its calls) is never shown to the
sandbox: its cgroup namespace is made in that cgroup (``runner``), so it sees ``/`` there. The
pid in it is what finds, at a process's first call in a parent, the cgroups a host killed
mid-call left there (``_sweep``).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MOUNTINFO", "OWN_CGROUPS", "THREAD_CGROUPS", "Cgroup", "StepOutFailed"]

#: The files this module reads to find the hierarchies (module attributes: a test may hide them).
MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")
#: The calling thread's own cgroups (``entered``: it steps in only from its process's).
THREAD_CGROUPS = Path("/proc/thread-self/cgroup")

_names = itertools.count()
#: ``OWN_CGROUPS``' text read last while the main thread was not inside a call's cgroup, and
#: whether it is now (``_own``; ``entered``).
_own_text: dict[Path, str] = {}
_own_lock = threading.Lock()
_main_inside = False
#: ``_directory``'s findings: (mount table, own cgroup, fs type, controller) -> directory.
_found: dict[tuple[Path, str, str, str | None], Path] = {}
#: Removing a cgroup whose last process is still exiting (EBUSY): the first pause, doubled up
#: to the longest. Most are free within a millisecond.
_FIRST_PAUSE_S = 0.0005
_LONGEST_PAUSE_S = 0.01


def _read(path: Path) -> str:
    """A small file's text, read without buffered text I/O: cgroup files are read and
    written a dozen times a call."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def _write(path: Path, text: str) -> None:
    """``text`` written to ``path`` in one write (a cgroup file takes one value a write)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _main_stepping(inside: bool) -> None:
    """The main thread is stepping into a call's cgroup (True), or is back out (False)."""
    global _main_inside  # its own cgroups were read just before, outside (``_exits``)
    with _own_lock:
        _main_inside = inside


def _mounts() -> list[tuple[str, str, str, list[str]]]:
    """(root within the hierarchy, mount point, fs type, super options) of each cgroup mount."""
    try:
        lines = _read(MOUNTINFO).splitlines()
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


def _own_cgroups() -> str:
    """This process's own cgroups (``OWN_CGROUPS``' text), as they were before the main thread
    stepped into a call's cgroup, if it is inside one now.

    :raises OSError: the file could not be read.
    """
    with _own_lock:
        known = _own_text.get(OWN_CGROUPS)
        if _main_inside and known is not None:
            return known
        text = _read(OWN_CGROUPS)
        if not _main_inside:
            _own_text[OWN_CGROUPS] = text
        return text


def _own(controller: str | None) -> str | None:
    """This process's cgroup path in ``controller``'s v1 hierarchy, or in v2 (None)."""
    try:
        lines = _own_cgroups().splitlines()
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
    """The directory of the cgroup ``own`` under a mount of the hierarchy, if one shows it:
    found once a process (reading and parsing the mount table cost a call 0.1-0.2 ms a
    hierarchy), and found again once it is gone."""
    key = (MOUNTINFO, own, fstype, controller)
    found = _found.get(key)
    if found is not None and (found / "cgroup.procs").is_file():
        return found
    found = _find_directory(own, fstype, controller)
    if found is not None:
        _found[key] = found
    return found


def _find_directory(own: str, fstype: str, controller: str | None) -> Path | None:
    for root, point, kind, options in _mounts():
        if kind != fstype or (controller is not None and controller not in options):
            continue
        if own == root or own.startswith(root.rstrip("/") + "/"):
            path = Path(point) / own[len(root):].lstrip("/")
            if (path / "cgroup.procs").is_file():
                return path
    return None


#: A call's cgroup: ``toolhost-sandbox-<pid>-<count>``, the pid of the host that made it.
_CALL_CGROUP = re.compile(r"toolhost-sandbox-([0-9]+)-[0-9]+")
#: The parents this process swept of leftovers: once each, as a listing a call is too dear.
_swept: set[Path] = set()
#: A cgroup younger than this is never taken for a leftover: a host in another pid namespace
#: (whose pid this one cannot see) may be between making its call's cgroup and using it.
LEFTOVER_AGE_S = 600.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none has it, or none could
        return False
    except OSError:  # another user's: alive
        pass
    return True


def _sweep(parent: Path, made: Path) -> None:
    """Remove the call cgroups in ``parent`` that a host left when it was killed (SIGKILL,
    the OOM killer) mid-call (D445): those of a pid no process has, older than ``LEFTOVER_AGE_S``
    than ``made``, just made there (its time is now, on the filesystem's own clock). One
    still holding a process is refused by the kernel (EBUSY) and kept."""
    if parent in _swept:
        return
    _swept.add(parent)
    try:
        now = made.stat().st_mtime
    except OSError:
        return
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            found = _CALL_CGROUP.fullmatch(entry.name)
            if found is None or int(found[1]) == os.getpid() or _alive(int(found[1])):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime >= LEFTOVER_AGE_S:
                    os.rmdir(entry.path)


def _mkdir_child(parent: Path) -> Path | None:
    while True:
        path = parent / f"toolhost-sandbox-{os.getpid()}-{next(_names)}"
        try:
            path.mkdir()
            _sweep(parent, path)
            return path
        except FileExistsError:
            continue
        except OSError:
            return None


def _words(path: Path) -> set[str]:
    try:
        return set(_read(path).split())
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
        _write(parent / "cgroup.subtree_control", f"+{controller}")
    except OSError:
        return False
    return controller in _words(parent / "cgroup.subtree_control")


class StepOutFailed(OSError):
    """A thread could not step back out of a call's cgroup (``Cgroup.entered``)."""


class Cgroup:
    """One call's cgroup: ``add`` the sandbox's init before it starts the command, ``kill``
    everything in it, ``remove`` it afterwards. ``version`` is 1 or 2."""

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
            _write(pids / "pids.max", str(processes))
        except OSError:
            group.remove()
            return None
        memory = cls._v1_child("memory")
        if memory is not None:
            try:
                _write(memory / "memory.limit_in_bytes", str(memory_bytes))
                swap = memory / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    _write(swap, str(memory_bytes))
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
                _write(path / "pids.max", str(processes))
            except OSError:
                group.remove()
                continue
            if _enabled(parent, "memory"):
                with contextlib.suppress(OSError):
                    _write(path / "memory.max", str(memory_bytes))
                    # v1's memsw bound memory and swap together; here swap is its own figure.
                    swap = path / "memory.swap.max"
                    if swap.exists():
                        _write(swap, "0")
            return group
        return None

    @contextlib.contextmanager
    def entered(self) -> Iterator[bool]:
        """The calling thread inside the cgroup for the block, True, where it can move itself
        (v1, from its process's own cgroups, which are the cgroup's parents): a process it
        forks meanwhile is born in the cgroup, with no migration to wait for. False where it
        cannot (v2; a thread placed elsewhere; its way back out could not be opened): ``add``
        a process instead (``runner``: a launcher, before it execs bwrap).

        The way back out (each parent's ``tasks``) is opened before the thread steps in, to
        step out through where a fresh open fails; and each directory is stepped out of even
        if another fails.

        :raises StepOutFailed: the thread could not move back out (the call must not go on).
        """
        exits = self._exits()
        moved: list[int] = []
        main = threading.current_thread() is threading.main_thread()
        try:
            if exits and main:
                _main_stepping(True)
            for path, exit_fd in zip(self._dirs, exits, strict=True):
                _write(path / "tasks", "0")  # "0": the writing thread, alone
                moved.append(exit_fd)
        except OSError:
            # In some of the directories only (or none): back out of those, and add instead.
            self._close(exits, moved, main)
            exits, moved = [], []
        try:
            yield bool(moved)
        finally:
            self._close(exits, moved, main)

    def _exits(self) -> list[int]:
        """The parents' ``tasks``, open for writing, where the calling thread may step in;
        none where it may not."""
        if self.version != 1:
            return []
        try:
            if _read(THREAD_CGROUPS) != _own_cgroups():
                return []  # a thread placed elsewhere: its way back is not the parents'
        except OSError:
            return []
        exits: list[int] = []
        try:
            for path in self._dirs:
                exits.append(os.open(path.parent / "tasks", os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in exits:
                os.close(fd)
            return []
        return exits

    def _close(self, exits: list[int], moved: list[int], main: bool) -> None:
        """Step out of each directory of ``moved`` (the thread is back where it was only if
        each went through), then close ``exits``: through the parent's ``tasks`` opened
        afresh, else through ``exits``' fd, opened before the thread stepped in (a fresh open
        fails when this process is out of file descriptors).

        :raises StepOutFailed: a step out failed both ways.
        """
        failed: OSError | None = None
        for path, fd in reversed(list(zip(self._dirs, moved, strict=False))):
            try:
                _write(path.parent / "tasks", "0")
                continue
            except OSError:
                pass
            try:
                os.write(fd, b"0")
            except OSError as exc:
                failed = failed or exc
        for fd in exits:
            os.close(fd)
        if exits and main and failed is None:
            _main_stepping(False)
        if failed is not None:
            raise StepOutFailed(failed.errno, failed.strerror)

    def add(self, pid: int) -> None:
        for path in self._dirs:
            _write(path / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        try:
            text = _read(self._dirs[0] / "cgroup.procs")
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill(self) -> None:
        """SIGKILL every process still in the group (a second net under the namespace kill):
        v2's ``cgroup.kill`` where the kernel has it (no pid read then signalled, no race
        with a fork), and each listed pid in any case."""
        if self.version == 2 and (self._dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self._dirs[0] / "cgroup.kill", "1")
        for pid in self.pids():
            if pid == os.getpid():
                continue  # a thread of this process, starting a sandbox (``entered``)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, *, wait_s: float = 5.0) -> None:
        """Kill what is left and remove the directories; a process still exiting keeps a
        cgroup busy (EBUSY) for a moment, so this retries for up to ``wait_s``."""
        pause = threading.Event()
        for path in reversed(self._dirs):
            slept, pause_s = 0.0, _FIRST_PAUSE_S
            while True:
                try:
                    path.rmdir()  # refused (EBUSY) while any process is in it
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or slept >= wait_s:
                        break
                self.kill()
                pause.wait(pause_s)
                slept, pause_s = slept + pause_s, min(pause_s * 2, _LONGEST_PAUSE_S)
