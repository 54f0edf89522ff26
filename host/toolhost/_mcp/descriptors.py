"""File descriptors under ``serve --http``: new sessions stop before the process runs out.

Why: every open session can hold descriptors (its workspace's directory, the connections its
client opens per request), and a process at its ``RLIMIT_NOFILE`` fails everything at once: the
accept loop cannot take a connection, a call cannot open its workspace or its store, and
asyncio logs a traceback for every accept it retries. So the front door refuses a new session
while fewer than ``reserve`` descriptors are left (the sessions already open keep that
headroom for their calls), and a refusal or an accept that still failed is logged as one line
a minute, not one a request.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
from collections.abc import Callable
from typing import Any, Final

__all__ = ["PER_SESSION", "OncePerInterval", "QuietConnectionNoise", "QuietSessionLimit",
           "quiet_out_of_descriptors", "raise_limit", "reserve", "running_short"]

#: Seconds between two log lines of one kind about running out.
LOG_INTERVAL_S = 60.0
#: Errors of an accept that ran out of something (asyncio pauses accepting for a second).
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_FD_DIR = "/proc/self/fd"


#: Descriptors an open session may come to hold at rest: its workspace generation's hold
#: and its handle's root (the connections of its requests come out of the reserve).
PER_SESSION = 2


def reserve(limit: int) -> int:
    """Descriptors kept for the calls of the sessions already open: an eighth of the
    limit, at least 64."""
    return max(64, limit // 8)


def running_short(open_sessions: int) -> int | None:
    """The descriptors left, when one more session would cut into the reserve: the sessions
    open now may each come to hold ``PER_SESSION`` (a session holds none until its first
    workspace call, so what they will need is counted, not what they hold). None when there
    is room, no limit, or no way to count (no ``/proc``).
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        # Listing the directory opens one descriptor itself, counted in the listing.
        left = soft - len(os.listdir(_FD_DIR))
    except OSError as exc:
        if exc.errno in _EXHAUSTED:
            return 0  # not even one to count with
        return None
    needed = reserve(soft) + PER_SESSION * (open_sessions + 1)
    return left if left < needed else None


def raise_limit() -> tuple[int, int] | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one, as servers that hold a descriptor per
    client do (the soft limit is often 1024 below a hard one of a million): the
    ``(before, after)`` soft limits when it changed, else None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        return None
    return soft, hard


class OncePerInterval:
    """Lets one event of a kind through every ``LOG_INTERVAL_S`` seconds, and counts the rest
    (the next line says how many were not logged)."""

    def __init__(self, clock: Callable[[], float], interval_s: float = LOG_INTERVAL_S) -> None:
        self._clock = clock
        self._interval_s = interval_s
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, kind: str) -> int | None:
        """None: not now (counted); else the number of events of this kind not logged since
        the last line."""
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return None
        self._last[kind] = now
        return self._held.pop(kind, 0)


def quiet_out_of_descriptors(loop: asyncio.AbstractEventLoop, once: OncePerInterval,
                             log: Any) -> None:
    """Replace asyncio's traceback for an accept that ran out of descriptors with one line a
    minute; every other loop error goes to the handler there was."""
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _EXHAUSTED and (
                "accept" in str(context.get("message", ""))):
            suppressed = once.allow("accept")
            if suppressed is not None:
                log.warning("http.accept.out_of_descriptors", error=errno.errorcode.get(
                    exc.errno or 0, "?"), not_logged=suppressed)
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class QuietSessionLimit(logging.Filter):
    """The SDK logs a warning for every request refused at ``max_sessions``: one a minute."""

    def __init__(self, once: OncePerInterval) -> None:
        super().__init__()
        self._once = once

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Refusing to open a new session"):
            return self._once.allow("max_sessions") is not None
        return True


class QuietConnectionNoise(logging.Filter):
    """uvicorn warns once per connection for what any client can send or cause: a request it
    cannot parse, a connection past ``TOOLHOST_HTTP_MAX_CONNECTIONS``, an upgrade request (no
    WebSocket library: D328). Each kind one line a minute, so a flood does not grow the log
    (D328)."""

    #: The start of each such warning, and its kind.
    KINDS: Final = (("Invalid HTTP request received", "invalid_request"),
                    ("Exceeded concurrency limit", "max_connections"),
                    ("Unsupported upgrade request", "upgrade"),
                    ("No supported WebSocket library", "upgrade_library"))

    def __init__(self, once: OncePerInterval) -> None:
        super().__init__()
        self._once = once

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING or not isinstance(record.msg, str):
            return True
        for start, kind in self.KINDS:
            if record.msg.startswith(start):
                held = self._once.allow(kind)
                if held:
                    record.msg = f"{record.msg} ({held} more since the last such line)"
                return held is not None
        return True
