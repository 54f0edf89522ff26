"""The limits a command runs under, besides wall time (``runner``): CPU, memory, processes,
file size, open files, core dumps, and the output ``runner`` reads (``OUTPUT_LIMIT``).

Resource limits (``setrlimit``) are set on the launcher before it becomes bwrap, so bwrap and
everything the command starts inherit them. Two of them are not enough on their own, and a
per-call cgroup (v1 ``pids`` and ``memory`` hierarchies, when this process may write them)
closes the gaps:

- RLIMIT_NPROC is not enforced for a process that is root on the host, even inside a user
  namespace (its uid maps to host root, which the kernel exempts). As root, a ``pids``
  cgroup is therefore required: without one the tool fails closed. As any other user,
  RLIMIT_NPROC applies (it counts that user's processes).
- RLIMIT_AS bounds each process, not their sum; a ``memory`` cgroup, where there is one,
  bounds the whole sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import resource
import signal
import threading
from pathlib import Path

__all__ = [
    "CPU_SLACK_S",
    "FILE_BYTES",
    "MEMORY_BYTES",
    "OPEN_FILES",
    "OUTPUT_LIMIT",
    "PROCESSES",
    "Cgroup",
    "LimitsUnavailable",
    "apply_rlimits",
    "cgroup_for_call",
]

#: Address space of each process, and (with a memory cgroup) of the whole sandbox.
MEMORY_BYTES = 1024 * 1024 * 1024
#: Processes (and threads) at once in the sandbox.
PROCESSES = 128
#: The largest file the command may write.
FILE_BYTES = 64 * 1024 * 1024
OPEN_FILES = 1024
#: stdout and stderr together: past it the sandbox is killed and the output cut there.
OUTPUT_LIMIT = 1024 * 1024
#: CPU seconds a process may use beyond the call's wall time: the wall clock ends it first;
#: this ends a process that somehow outlived it.
CPU_SLACK_S = 1

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_names = itertools.count()


class LimitsUnavailable(Exception):
    """A limit cannot be enforced here; ``reason`` is one line for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def apply_rlimits(pid: int, timeout_s: int) -> None:
    """Set every resource limit on ``pid`` (the launcher, before it execs bwrap)."""
    cpu = timeout_s + CPU_SLACK_S
    for which, value in (
        (resource.RLIMIT_AS, MEMORY_BYTES),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, FILE_BYTES),
        (resource.RLIMIT_NPROC, PROCESSES),
        (resource.RLIMIT_NOFILE, OPEN_FILES),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.prlimit(pid, which, (value, value))


def _own_path(controller: str) -> str | None:
    """This process's cgroup in ``controller``'s v1 hierarchy (``/proc/self/cgroup``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def _make(controller: str) -> Path | None:
    """A fresh child of this process's own cgroup (so its parent's limits still bind), or
    None when the hierarchy is not there or not writable."""
    own = _own_path(controller)
    if own is None:
        return None
    parent = _CGROUP_ROOT / controller / own.lstrip("/")
    if not (parent / "cgroup.procs").is_file():
        return None
    while True:
        path = parent / f"toolhost-sandbox-{os.getpid()}-{next(_names)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
        except OSError:
            return None


class Cgroup:
    """One call's ``pids`` (and, where possible, ``memory``) cgroup: ``add`` the launcher
    before it becomes bwrap, ``kill`` everything in it, ``remove`` it afterwards."""

    def __init__(self, dirs: list[Path]) -> None:
        self._dirs = dirs

    @classmethod
    def create(cls) -> Cgroup | None:
        """A cgroup with the process limit, or None when none can be made here."""
        pids = _make("pids")
        if pids is None:
            return None
        group = cls([pids])
        try:
            (pids / "pids.max").write_text(str(PROCESSES))
        except OSError:
            group.remove()
            return None
        memory = _make("memory")
        if memory is not None:
            group._dirs.append(memory)
            try:
                (memory / "memory.limit_in_bytes").write_text(str(MEMORY_BYTES))
                swap = memory / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(str(MEMORY_BYTES))
            except OSError:
                group._dirs.remove(memory)
                with contextlib.suppress(OSError):
                    memory.rmdir()
        return group

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
        """SIGKILL every process still in the group (a second net under the namespace kill)."""
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


_ROOT_WITHOUT_PIDS = (
    "running as root, where RLIMIT_NPROC is not enforced, and no writable pids cgroup (v1, "
    "/sys/fs/cgroup/pids) exists to limit processes instead; run the host as an unprivileged "
    "user or give it a pids cgroup")


def cgroup_for_call() -> Cgroup | None:
    """The call's cgroup; None where RLIMIT_NPROC alone limits processes (a non-root uid).

    :raises LimitsUnavailable: as root with no pids cgroup: no process limit would hold.
    """
    group = Cgroup.create()
    if group is None and os.geteuid() == 0:
        raise LimitsUnavailable(_ROOT_WITHOUT_PIDS)
    return group
