"""The Clock port.

``now()`` returns an aware datetime whose tzinfo is UTC: a naive one would smuggle the
process's local zone in through a port built to keep ambient state out. The contract suite
(``toolhost.testing.ClockContract``) asserts it for every implementation.
"""

from __future__ import annotations

import datetime as _dt
from typing import Protocol, runtime_checkable

__all__ = [
    "Clock",
]

# The real clock lives in the determinism module, the one place allowed to read ambient time.


@runtime_checkable
class Clock(Protocol):
    def now(self) -> _dt.datetime:
        """The current instant, aware, in UTC."""
        ...

