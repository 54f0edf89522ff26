"""The one module that reads ambient time or makes identifiers.

A static check (``toolhost.testing.find_ambient_reads``, run over the host and every plugin)
refuses any other module that calls ``datetime.now``, ``time.time``, ``uuid.uuid4`` and the
like, so determinism is a property of the ports rather than of each tool's good manners.
"""

from __future__ import annotations

import datetime as _dt
import os as _os
import time as _time

__all__ = ["SystemClock", "monotonic", "new_id", "new_invocation_id"]


class SystemClock:
    """The process clock, as an aware UTC datetime."""

    def now(self) -> _dt.datetime:
        return _dt.datetime.now(_dt.UTC)


def monotonic() -> float:
    """Seconds on a monotonic clock, for deadlines and timings."""
    return _time.monotonic()


#: The bits a UUID4 fixes: version 4 (bits 76-79) and the RFC 4122 variant (bits 62-63).
_UUID4_CLEAR = ~((0xF << 76) | (0x3 << 62))
_UUID4_SET = (0x4 << 76) | (0x2 << 62)


def new_id() -> str:
    """A fresh random identifier: a UUID4 in hex form (32 lowercase hex digits), made from
    the same 16 bytes of ``os.urandom`` as ``uuid.uuid4`` without building a UUID object."""
    bits = int.from_bytes(_os.urandom(16), "big")
    return "%032x" % (bits & _UUID4_CLEAR | _UUID4_SET)


#: UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7 (bits 76-79), 12 bits rand_a, the
#: RFC variant (bits 62-63), 62 bits rand_b: 74 of the 80 bits of os.urandom(10).
_V7_VERSION = 0x7 << 76
_V7_VARIANT = 0x2 << 62
_RAND_B = (1 << 62) - 1


def new_invocation_id() -> str:
    """A fresh invocation id: a UUIDv7 in hex form (32 lowercase hex digits, the same shape as
    ``new_id``). Its leading 48 bits are the system clock's Unix milliseconds, so a table keyed
    by it takes each new row at the right edge of the index instead of on a random leaf (a
    64-row commit dirtied ~64 index pages with UUID4 ids); 74 bits of ``os.urandom`` per id
    keep ids distinct within a millisecond and across forks (nothing buffered)."""
    rand = int.from_bytes(_os.urandom(10), "big")
    return "%032x" % (
        (_time.time_ns() // 1_000_000) << 80 | _V7_VERSION | (rand >> 62 & 0xFFF) << 64
        | _V7_VARIANT | rand & _RAND_B)
