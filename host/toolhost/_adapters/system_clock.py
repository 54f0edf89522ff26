"""The one module that reads ambient time or makes identifiers.

A static check (``toolhost.testing.find_ambient_reads``, run over the host and every plugin)
refuses any other module that calls ``datetime.now``, ``time.time``, ``uuid.uuid4`` and the
like, so determinism is a property of the ports rather than of each tool's good manners.
"""

from __future__ import annotations

import datetime as _dt
import time as _time
import uuid as _uuid

__all__ = ["SystemClock", "monotonic", "new_id"]


class SystemClock:
    """The process clock, as an aware UTC datetime."""

    def now(self) -> _dt.datetime:
        return _dt.datetime.now(_dt.UTC)


def monotonic() -> float:
    """Seconds on a monotonic clock, for deadlines and timings."""
    return _time.monotonic()


def new_id() -> str:
    """A fresh random identifier (UUID4, hex form)."""
    return _uuid.uuid4().hex
