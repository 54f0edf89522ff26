"""The seccomp filter bwrap loads before it runs the command (``--seccomp FD``): no set-id
file may come into being in the workspace, not even for the length of a call, and the
command cannot watch the file system.

The sandbox's uid (65534 inside) maps to the host process's own uid, root when the host runs
as root: a set-uid file the command makes is a set-uid program of that user on the host, for
as long as it exists. The kernel gives a file its mode in a handful of system calls, and the
filter refuses, with EPERM, each one whose mode carries S_ISUID or S_ISGID:

- ``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``;
- ``open``, ``openat`` with O_CREAT or O_TMPFILE in the flags, and ``creat``;
- ``mkdir``, ``mkdirat`` (a set-gid directory passes the bit to the directories made in it);
- ``mknod``, ``mknodat``: refused whatever the mode (``S_IFREG|S_ISUID`` is a regular file);
- ``openat2`` takes its mode inside a struct the filter cannot read: ENOSYS, so libc falls
  back to ``openat``; ``io_uring_setup``: ENOSYS, since its OPENAT operation carries a mode no
  filter sees.

On a host that is not root the workspace quota is the host's walk of the tree, every 0.2 s
(``quota.py``). A command told when the host opens a directory could move data into a
directory the walk has just listed, out of one it is about to list: in neither listing, and
the walk says it is complete (D398). So no watch of the kernel's may tell it (a directory's
access time, which a listing may update, is the walk's to keep: it opens each directory with
O_NOATIME, D414):

- ``inotify_init``, ``inotify_init1``, ``fanotify_init``: ENOSYS, a kernel without them
  (``tail -f`` and the like fall back to polling);
- ``fcntl`` with F_NOTIFY (dnotify: a watched directory hears of reads of what it holds, a
  subdirectory's listing too): EINVAL, a kernel without CONFIG_DNOTIFY; every other ``fcntl``
  command is allowed.

Everything else is allowed. A system call of another ABI than the one the filter was built
for (i386 through ``int 0x80`` and x32 on x86_64) would bypass the numbers above, so it kills
the process. The program is classic BPF over ``struct seccomp_data`` (``nr``, ``arch``,
``instruction_pointer``, ``args[6]``), built here with ``struct`` for x86_64 and aarch64;
on any other machine there is no filter and the tool fails closed.
"""

from __future__ import annotations

import errno
import functools
import platform
import stat
import struct

__all__ = ["SeccompUnavailable", "filter_program"]

# Classic BPF opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000

# Offsets into struct seccomp_data; an argument's low 32 bits (both machines are little-endian,
# and every mode and flags argument here is 32 bits or narrower).
_NR = 0
_ARCH = 4


def _arg(index: int) -> int:
    return 16 + 8 * index


_SET_ID = stat.S_ISUID | stat.S_ISGID
_O_CREAT = 0o100
_O_TMPFILE = 0o20000000  # __O_TMPFILE, without O_DIRECTORY (which differs between machines)
_X32_BIT = 0x40000000
_F_NOTIFY = 1024 + 2  # F_LINUX_SPECIFIC_BASE + 2 (linux/fcntl.h)

#: Per machine: its AUDIT_ARCH value, whether it has the x32 ABI to refuse, and its system
#: call numbers (asm/unistd_64.h; aarch64 uses the generic table, which has only the *at calls).
_MACHINES: dict[str, tuple[int, bool, dict[str, int]]] = {
    "x86_64": (0xC000003E, True, {
        "open": 2, "creat": 85, "openat": 257, "openat2": 437,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
        "mkdir": 83, "mkdirat": 258, "mknod": 133, "mknodat": 259,
        "io_uring_setup": 425,
        "inotify_init": 253, "inotify_init1": 294, "fanotify_init": 300, "fcntl": 72,
    }),
    "aarch64": (0xC00000B7, False, {
        "openat": 56, "openat2": 437,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452,
        "mkdirat": 34, "mknodat": 33,
        "io_uring_setup": 425,
        "inotify_init1": 26, "fanotify_init": 262, "fcntl": 25,
    }),
}
_MACHINES["amd64"] = _MACHINES["x86_64"]
_MACHINES["arm64"] = _MACHINES["aarch64"]

#: For each call the filter looks into: (index of its flags argument or None when it always
#: creates, index of its mode argument). Refused when it creates and the mode has a set-id bit.
_MODE_CHECKS: dict[str, tuple[int | None, int]] = {
    "chmod": (None, 1), "fchmod": (None, 1), "fchmodat": (None, 2), "fchmodat2": (None, 2),
    "creat": (None, 1), "open": (1, 2), "openat": (2, 3),
    "mkdir": (None, 1), "mkdirat": (None, 2),
}
#: For each call refused for one value of an argument: (the argument's index, that value, the
#: errno). fcntl's command is an unsigned int, so its low 32 bits are all the kernel reads.
_VALUE_CHECKS: dict[str, tuple[int, int, int]] = {
    "fcntl": (1, _F_NOTIFY, errno.EINVAL),
}
#: Refused whatever the arguments, and with which errno.
_REFUSED = {"mknod": errno.EPERM, "mknodat": errno.EPERM,
            "openat2": errno.ENOSYS, "io_uring_setup": errno.ENOSYS,
            "inotify_init": errno.ENOSYS, "inotify_init1": errno.ENOSYS,
            "fanotify_init": errno.ENOSYS}


class SeccompUnavailable(Exception):
    """No filter for this machine; ``reason`` is one line for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _mode_block(flags: int | None, mode: int) -> list[bytes]:
    """The instructions for one call's arguments, ending in a return either way."""
    block: list[bytes] = []
    if flags is not None:
        # Not creating: the mode argument is ignored by the kernel (and may be garbage).
        block += [_insn(_LD_ABS, _arg(flags)),
                  _insn(_JSET, _O_CREAT | _O_TMPFILE, jt=1, jf=0),
                  _insn(_RET, _ALLOW)]
    block += [_insn(_LD_ABS, _arg(mode)),
              _insn(_JSET, _SET_ID, jt=0, jf=1),
              _insn(_RET, _ERRNO | errno.EPERM),
              _insn(_RET, _ALLOW)]
    return block


def _value_block(index: int, value: int, code: int) -> list[bytes]:
    """The instructions for a call refused, with errno ``code``, when its argument ``index``
    is ``value``; allowed otherwise."""
    return [_insn(_LD_ABS, _arg(index)),
            _insn(_JEQ, value, jt=0, jf=1),
            _insn(_RET, _ERRNO | code),
            _insn(_RET, _ALLOW)]


def filter_program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one) as bwrap reads it: ``struct
    sock_filter`` instructions back to back.

    :raises SeccompUnavailable: no filter is known for the machine.
    """
    machine = machine or platform.machine()
    if machine not in _MACHINES:
        raise SeccompUnavailable(
            f"no seccomp filter for this machine ({machine}); x86_64 and aarch64 only")
    return _program(machine)


@functools.cache
def _program(machine: str) -> bytes:
    """The filter for a machine ``_MACHINES`` knows: built once a process (the same bytes at
    every call, 30-40 µs of Python each time)."""
    arch, x32, numbers = _MACHINES[machine]
    blocks = [(numbers[name], _mode_block(*_MODE_CHECKS[name]))
              for name in _MODE_CHECKS if name in numbers]
    values = [(numbers[name], _value_block(*_VALUE_CHECKS[name]))
              for name in _VALUE_CHECKS if name in numbers]
    refused = [(numbers[name], [_insn(_RET, _ERRNO | code)])
               for name, code in _REFUSED.items() if name in numbers]
    cases = blocks + values + refused
    head = [_insn(_LD_ABS, _ARCH), _insn(_JEQ, arch, jt=1, jf=0), _insn(_RET, _KILL_PROCESS),
            _insn(_LD_ABS, _NR)]
    if x32:
        head += [_insn(_JGE, _X32_BIT, jt=0, jf=1), _insn(_RET, _KILL_PROCESS)]
    # The dispatch: one comparison per call, jumping forward to its block; then ALLOW. A jump
    # offset is a byte, which this short program never exceeds.
    dispatch: list[bytes] = []
    bodies: list[bytes] = []
    for i, (number, body) in enumerate(cases):
        offset = (len(cases) - i - 1) + 1 + len(bodies)
        assert offset < 256
        dispatch.append(_insn(_JEQ, number, jt=offset, jf=0))
        bodies += body
    program = [*head, *dispatch, _insn(_RET, _ALLOW), *bodies]
    return b"".join(program)

