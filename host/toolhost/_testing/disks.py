"""A full disk or a spent descriptor table in this process, for tests of what a store or a tool
does then: ``file_size_limit`` makes every write past a size fail with EFBIG, as ENOSPC would,
without filling a real disk or mounting one; ``open_file_limit`` leaves the process only a few
more descriptors than it holds."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
from collections.abc import Iterator

__all__ = ["file_size_limit", "open_file_limit"]


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


@contextlib.contextmanager
def open_file_limit(spare: int = 64) -> Iterator[int]:
    """Within the block, this process may open only ``spare`` more descriptors than it has
    open now (its soft RLIMIT_NOFILE, never raised); yields that limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = min(len(os.listdir("/proc/self/fd")) + spare, soft)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
