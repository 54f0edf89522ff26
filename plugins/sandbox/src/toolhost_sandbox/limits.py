"""The limits a command runs under, besides wall time (``runner``): CPU, memory, processes,
file size, open files, core dumps, and the output ``runner`` reads (``OUTPUT_LIMIT``).

Resource limits (``setrlimit``) are set on the sandbox's init before it starts the command
(``runner``'s gate), or under a sandbox uid on the launcher before it becomes bwrap, so
everything the command starts inherits them. Two of them are not enough on their own:

- RLIMIT_NPROC is not enforced for a process whose real uid is root on the host, even inside
  a user namespace (its uid maps to host root, which the kernel exempts).
- RLIMIT_AS bounds each process, not their sum; a ``memory`` cgroup, where there is one,
  bounds the whole sandbox.

So each call picks how its processes are limited (``limits_for_call``, docs/decisions.md
D263): a per-call cgroup where one can be made (``cgroups``: v1 ``pids``, else a delegated v2
subtree); and, as root, always a dedicated unprivileged uid (``sandbox_user``), under which
RLIMIT_NPROC holds too. As root the sandbox must never run as this process's uid (D320):
bwrap maps the command's uid to it, and a command whose uid is the host's root may write the
host's /proc/sys (the kernel checks the uid there, not capabilities; bwrap leaves /proc/sys
writable when it cannot write it itself). As any other user RLIMIT_NPROC holds already (it
counts that user's processes). As root with no sandbox uid, the tool fails closed.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from toolhost import Settings
from toolhost_sandbox.cgroups import Cgroup
from toolhost_sandbox.sandbox_user import (
    UIDS_SETTING,
    SandboxUser,
    UidsInUse,
    UserUnavailable,
    lease,
    uid_range,
)

__all__ = [
    "CPU_SLACK_S",
    "FILE_BYTES",
    "MEMORY_BYTES",
    "OPEN_FILES",
    "OUTPUT_LIMIT",
    "PROCESSES",
    "CallLimits",
    "Cgroup",
    "LimitsUnavailable",
    "SandboxesBusy",
    "apply_rlimits",
    "limits_for_call",
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


class LimitsUnavailable(Exception):
    """A limit cannot be enforced here; ``reason`` is one line for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SandboxesBusy(LimitsUnavailable):
    """Every sandbox uid is in use by other calls: this call's limits cannot be had now, and
    may be in a moment."""


def apply_rlimits(pid: int, timeout_s: int) -> None:
    """Set every resource limit on ``pid`` (the sandbox's init before it starts the command,
    or the launcher before it execs bwrap)."""
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


@dataclass
class CallLimits:
    """How one call's processes are limited: its ``cgroup``, or the sandbox ``user`` it runs
    as, or neither (a non-root host: RLIMIT_NPROC). ``mechanism`` says which, for the
    operator. ``release`` (idempotent) removes the cgroup and frees the uid."""

    cgroup: Cgroup | None = None
    user: SandboxUser | None = None

    @property
    def mechanism(self) -> str:
        if self.cgroup is not None:
            group = f"a cgroup v{self.cgroup.version} pids.max of {PROCESSES} ({self.cgroup.path})"
            return group if self.user is None else f"{group}, under the sandbox uid {self.user.uid}"
        if self.user is not None:
            return f"RLIMIT_NPROC {PROCESSES} under the sandbox uid {self.user.uid}"
        return f"RLIMIT_NPROC {PROCESSES} under this process's uid {os.geteuid()}"

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.user is not None:
            self.user.release()


def _root_without_user(why: str) -> str:
    return ("running as root, where the sandbox must run under a uid of its own (as this "
            "process's, its commands could change the host's kernel settings), with no sandbox "
            f"uid to run under ({why}); set {UIDS_SETTING} to a free range, or run the host as "
            "an unprivileged user")


#: This process's user namespace's uid map: inside, outside, count per line.
UID_MAP = Path("/proc/self/uid_map")


def _kernels_root() -> bool:
    """Whether this process's uid 0 is the kernel's (``/proc/self/uid_map`` maps it to 0, or
    says nothing): the uid a sandbox must never run as."""
    try:
        lines = UID_MAP.read_text(encoding="ascii").splitlines()
    except OSError:
        return True
    for line in lines:
        fields = line.split()
        if len(fields) == 3 and fields[0] == "0":
            return fields[1] == "0"
    return True


def limits_for_call(settings: Settings) -> CallLimits:
    """The call's limits: a cgroup where one can be made; and as root a sandbox uid of its
    own, always (else, not root, RLIMIT_NPROC under this process's uid).

    :raises LimitsUnavailable: as root with no usable sandbox uid.
    """
    group = Cgroup.create(PROCESSES, MEMORY_BYTES)
    if os.geteuid() != 0 or (group is not None and not _kernels_root()):
        # A container's root (its uid 0 another uid to the kernel) is no threat to the host's
        # /proc/sys, and a cgroup holds its processes: no sandbox uid needed.
        return CallLimits(cgroup=group)
    try:
        return CallLimits(cgroup=group, user=lease(uid_range(settings)))
    except UserUnavailable as exc:
        if group is not None:
            group.remove()
        if isinstance(exc, UidsInUse):
            raise SandboxesBusy(exc.reason) from None
        raise LimitsUnavailable(_root_without_user(exc.reason)) from None
