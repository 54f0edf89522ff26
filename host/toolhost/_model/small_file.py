"""A small regular file read whole, as the host reads what an operator's setting names.

A setting names the file (a token file, a secret's ``{ file = "PATH" }``), so it may name
anything: a FIFO (opening one would block the start), a device (``/dev/zero`` never ends), a
directory, or something far larger than a secret. Opened without blocking and checked on the
open descriptor, whatever a link points at; read only when regular and within the limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from toolhost._model.errors import ToolhostError

__all__ = ["UnreadableFile", "read_small_file"]


class UnreadableFile(ToolhostError):
    """Why ``read_small_file`` read nothing: the system's ``error``, or the file is not
    regular, or ``too_large``. The caller words it for the setting that named the file."""

    def __init__(self, *, error: OSError | None = None, too_large: bool = False) -> None:
        super().__init__(error or ("too large" if too_large else "not a regular file"))
        self.error = error
        self.too_large = too_large


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    :raises UnreadableFile: it cannot be opened or read, is not a regular file, or holds
        more than ``limit`` bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnreadableFile(error=exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile()
        if info.st_size > limit:
            raise UnreadableFile(too_large=True)
        data = os.read(fd, limit + 1)
    except OSError as exc:
        raise UnreadableFile(error=exc) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew since fstat
        raise UnreadableFile(too_large=True)
    return data
