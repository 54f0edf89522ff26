"""A full disk in this process, for tests of what a store or a tool does when a write fails:
``file_size_limit`` makes every write past a size fail with EFBIG, as ENOSPC would, without
filling a real disk or mounting one."""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Iterator

__all__ = ["file_size_limit"]


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Within the block, a write that would take a file of this process past ``limit``
    bytes fails with EFBIG (SIGXFSZ, which would kill the process, is ignored meanwhile)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
