"""A sandboxed command cannot watch the file system (the seccomp filter, D398's last gap): on a
host that is not root, a command told when the host's usage walk lists a directory could move
its data out of the walk's way and leave the walk "complete" without it.

- Inside real bwrap: ``inotify_init``/``inotify_init1``/``fanotify_init`` fail with ENOSYS,
  ``fcntl(F_NOTIFY)`` with EINVAL (whatever the command argument's upper 32 bits, which the
  kernel ignores); every other ``fcntl`` command, and the set-id refusals, as before.
- ``tail -f`` still follows a file: it falls back to polling, as on a kernel without inotify.
- The filter's decisions for both machines, by running its program on ``seccomp_data``
  records here (an aarch64 filter cannot be loaded on this machine).
"""

from __future__ import annotations

import errno
import struct

import pytest

from sandbox_support import Call, structured
from toolhost_sandbox.seccomp import filter_program

#: A probe run in the sandbox: one line per system call, its errno's name or ``ok``.
_PROBE = """
import ctypes, errno, fcntl, os, platform
libc = ctypes.CDLL(None, use_errno=True)
def result(value):
    return 'ok' if value >= 0 else errno.errorcode[ctypes.get_errno()]
def raised(act):
    try:
        act()
        return 'ok'
    except OSError as exc:
        return errno.errorcode[exc.errno]
if platform.machine() == 'x86_64':  # the generic table (aarch64) has no inotify_init
    print('inotify_init', result(libc.syscall(253)))
else:
    print('inotify_init', 'ENOSYS')
print('inotify_init1', result(libc.inotify_init1(os.O_CLOEXEC)))
# FAN_CLASS_NOTIF | FAN_REPORT_FID: what a user without CAP_SYS_ADMIN may ask for.
print('fanotify_init', result(libc.fanotify_init(0x200, os.O_RDONLY)))
os.mkdir('d')
fd = os.open('d', os.O_RDONLY | os.O_DIRECTORY)
print('F_NOTIFY', raised(
    lambda: fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_CREATE | fcntl.DN_MULTISHOT)))
fcntl_nr = 72 if platform.machine() == 'x86_64' else 25
# The kernel reads the command as an unsigned int: the upper bits change nothing.
wide = libc.syscall(fcntl_nr, fd, ctypes.c_long((1 << 32) | fcntl.F_NOTIFY), fcntl.DN_CREATE)
print('F_NOTIFY-wide', result(wide))
print('F_GETFL', 'ok' if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECTORY else 'wrong')
print('F_SETFD', raised(lambda: fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)))
print('F_DUPFD_CLOEXEC', raised(lambda: os.close(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))))
with open('f', 'w') as f:
    print('F_SETLK', raised(lambda: fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)))
print('chmod-setuid', raised(lambda: os.chmod('f', 0o4755)))
print('chmod', raised(lambda: os.chmod('f', 0o755)))
"""


def test_watching_the_file_system_is_refused_and_nothing_else(call: Call) -> None:
    result = structured(call(f"python3 - <<'EOF'\n{_PROBE}\nEOF"))
    assert result["stderr"] == ""
    assert result["stdout"].splitlines() == [
        "inotify_init ENOSYS", "inotify_init1 ENOSYS", "fanotify_init ENOSYS",
        "F_NOTIFY EINVAL", "F_NOTIFY-wide EINVAL",
        "F_GETFL ok", "F_SETFD ok", "F_DUPFD_CLOEXEC ok", "F_SETLK ok",
        "chmod-setuid EPERM", "chmod ok"]


def test_tail_follows_a_file_by_polling(call: Call) -> None:
    # A line appended while ``tail -f`` runs reaches its output; it said it polls.
    result = structured(call(
        "echo first > log; (sleep 1; echo later >> log) & "
        "timeout 4 tail -s 0.2 -f log; echo tail=$?", 20))
    assert result["stdout"] == "first\nlater\ntail=124\n"
    assert "inotify cannot be used, reverting to polling" in result["stderr"]


# ---------------------------------------------------------------- the program itself

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _decide(program: bytes, arch: int, nr: int, *args: int) -> int:
    """What the classic BPF ``program`` returns for one ``struct seccomp_data``."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args, *[0] * (6 - len(args)))
    insns: list[tuple[int, int, int, int]] = [
        struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]
    pc, accumulator = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == _RET:
            return k
        if code == _LD_ABS:
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
            continue
        taken = {_JEQ: accumulator == k, _JGE: accumulator >= k,
                 _JSET: bool(accumulator & k)}[code]
        pc += 1 + (jt if taken else jf)


#: Per machine: inotify_init (None: not in its table), inotify_init1, fanotify_init, fcntl,
#: and a call the filter has no business with (getpid).
_NUMBERS = {"x86_64": (253, 294, 300, 72, 39), "aarch64": (None, 26, 262, 25, 172)}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_watching_on_both_machines(machine: str) -> None:
    program, arch = filter_program(machine), _ARCH[machine]
    init, init1, fanotify, fcntl_nr, getpid = _NUMBERS[machine]
    for number in (init, init1, fanotify):
        if number is not None:
            assert _decide(program, arch, number) == _ERRNO | errno.ENOSYS, (machine, number)
    f_notify = 1026
    assert _decide(program, arch, fcntl_nr, 3, f_notify, 4) == _ERRNO | errno.EINVAL
    assert _decide(program, arch, fcntl_nr, 3, (1 << 32) | f_notify, 4) == _ERRNO | errno.EINVAL
    for command in (0, 1, 2, 3, 4, 5, 6, 7, 1024, 1025, 1030, 1031, 1033, 1034):
        assert _decide(program, arch, fcntl_nr, 3, command, 0) == _ALLOW, (machine, command)
    assert _decide(program, arch, getpid) == _ALLOW
    # The set-id refusals are still there: fchmodat(AT_FDCWD, "x", 04755).
    fchmodat = {"x86_64": 268, "aarch64": 53}[machine]
    assert _decide(program, arch, fchmodat, 2**64 - 100, 0, 0o4755) == _ERRNO | errno.EPERM
    assert _decide(program, arch, fchmodat, 2**64 - 100, 0, 0o755) == _ALLOW

