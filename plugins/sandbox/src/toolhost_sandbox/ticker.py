"""A periodic tick as a file descriptor (Linux ``timerfd``, CLOCK_MONOTONIC).

The runner waits on it beside the command's pipes, so a call needs no thread of its own for
its timeout, its progress or its quota checks (a thread per call, and the GIL handed between
them, cost more than the rest of a short call's host side), and the plugin reads no clock: the
kernel counts the ticks, and ``passed`` says how many went by, late reads included.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import time

__all__ = ["Ticker"]

# <sys/timerfd.h>: the flags are O_CLOEXEC and O_NONBLOCK by definition.
_TFD_FLAGS = os.O_CLOEXEC | os.O_NONBLOCK
_NS = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL:
    """libc, with its timerfd functions typed (looked up at the first ``Ticker``, not at
    import: a libc without them, not Linux's, must fail a call closed, not the import).

    :raises OSError: ENOSYS: this libc has no timerfd.
    """
    global _LIBC
    if _LIBC is None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            create, settime = libc.timerfd_create, libc.timerfd_settime
        except AttributeError:
            raise OSError(errno.ENOSYS, "timerfd: not in this libc") from None
        create.argtypes = [ctypes.c_int, ctypes.c_int]
        create.restype = ctypes.c_int
        settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec),
                            ctypes.c_void_p]
        settime.restype = ctypes.c_int
        _LIBC = libc
    return _LIBC


_LIBC: ctypes.CDLL | None = None


def _raise_errno(what: str) -> None:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


class Ticker:
    """Ticks every ``every_s`` seconds from its creation until ``close``.

    :raises OSError: no timer could be made (out of file descriptors, or no timerfd).
    """

    def __init__(self, every_s: float) -> None:
        libc = _libc()
        fd = int(libc.timerfd_create(time.CLOCK_MONOTONIC, _TFD_FLAGS))
        if fd < 0:
            _raise_errno("timerfd_create")
        self._fd = fd
        seconds, nanoseconds = divmod(round(every_s * _NS), _NS)
        period = _Timespec(seconds, nanoseconds)
        spec = _Itimerspec(period, period)
        if libc.timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0:
            os.close(fd)
            _raise_errno("timerfd_settime")

    def fileno(self) -> int:
        return self._fd

    def passed(self) -> int:
        """The ticks since the last call (0 when none: it never blocks)."""
        try:
            return int.from_bytes(os.read(self._fd, 8), sys.byteorder)
        except BlockingIOError:
            return 0

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
