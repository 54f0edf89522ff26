"""Progress a tool body reports (``context.progress``): checked, rate-limited, handed on.

Who listens is the caller's business, not the pipeline's: the MCP server for a request that
carried ``_meta.progressToken``, ``toolhost call`` when stderr is a terminal. The caller names
its listener for the calls it makes with ``reporting(sink)`` (a context variable, so it
reaches ``Pipeline.context_for`` through ``invoke`` and ``approve`` and the task a caller
wraps them in, with no parameter threaded through every step); ``reporter_for`` then gives
each call a ``ProgressReporter`` of its own over that sink. A call nobody listens to keeps the
context's no-op default: nothing is checked, nothing is paid for.

What a reporter lets through (the decision, with its reasons, is in the docs' decisions):

- an update whose arguments are wrong (``done`` not a finite number >= 0, a ``bool``, ``total``
  not None or a finite number >= ``done``, ``message`` not None or a string) is dropped, never
  raised into the body: a progress line is advice, and a long call that ran must not fail on
  it. The first such update of a call is logged (``tool.progress_invalid``) for its author;
- ``done`` must increase (MCP: "progress MUST increase with each notification"): an update no
  further than the last one sent is dropped (one that went backwards is also logged);
- at most one update per ``MIN_INTERVAL_S``; one that comes sooner is dropped, except the
  completing one (``total`` known and ``done == total``), which always goes, so a listener
  sees the end;
- a message is cut to ``MAX_MESSAGE`` characters and its control characters become spaces
  (it may reach a terminal, and a plugin may put a file name in it).

Nothing of it is recorded on the invocation row: progress is for whoever watches the call.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard

import attrs

from toolhost._model.printable import one_line
from toolhost._pipeline.log import get_logger

__all__ = [
    "MAX_MESSAGE",
    "MIN_INTERVAL_S",
    "Progress",
    "ProgressReporter",
    "ProgressSink",
    "checked",
    "reporter_for",
    "reporting",
]

#: The least time between two updates of one call that are both sent (the completing one
#: excepted): ten a second is smooth on a terminal and cheap for a client.
MIN_INTERVAL_S = 0.1
#: The longest message sent, in characters: one line of status, not a log.
MAX_MESSAGE = 200


@attrs.frozen
class Progress:
    """One update as it is handed on: how far (``done``), out of how much (``total``, None
    when unknown), and a short line saying what (``message``)."""

    done: float
    total: float | None = None
    message: str | None = None

    @property
    def complete(self) -> bool:
        return self.total is not None and self.done >= self.total


#: Where a call's updates go. Called on whatever thread the body reports from (a worker
#: thread for a sync body, the event loop's for an async one): it must not block.
ProgressSink = Callable[[Progress], None]

_SINK: contextvars.ContextVar[ProgressSink | None] = contextvars.ContextVar(
    "toolhost_progress_sink", default=None)


@contextlib.contextmanager
def reporting(sink: ProgressSink) -> Iterator[None]:
    """The calls made inside this block (and in tasks started from it) report to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def reporter_for(monotonic: Callable[[], float], **log_fields: Any) -> ProgressReporter | None:
    """A reporter for one call over the sink ``reporting`` set, or None when nobody listens.
    ``log_fields`` (the run id) go on the lines it logs."""
    sink = _SINK.get()
    return None if sink is None else ProgressReporter(sink, monotonic, log_fields=log_fields)


def _number(value: object) -> TypeGuard[float]:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def checked(done: object, total: object = None, message: object = None) -> Progress | str:
    """The update these arguments make, or what is wrong with them (for the log)."""
    if not _number(done):
        return f"done is {type(done).__name__}, not a finite number"
    if done < 0:
        return "done is negative"
    if total is not None:
        if not _number(total):
            return f"total is {type(total).__name__}, not a finite number or None"
        if total < done:
            return "done is more than total"
    if message is not None and not isinstance(message, str):
        return f"message is {type(message).__name__}, not a string or None"
    return Progress(float(done), None if total is None else float(total),
                    None if message is None else one_line(message, MAX_MESSAGE))


class ProgressReporter:
    """One call's progress: ``reporter(done, total, message)`` from any thread, checked and
    rate-limited (see the module), then handed to the sink. Never raises into the body."""

    def __init__(self, sink: ProgressSink, monotonic: Callable[[], float], *,
                 min_interval: float = MIN_INTERVAL_S,
                 log_fields: dict[str, Any] | None = None) -> None:
        self._sink = sink
        self._log_fields = log_fields or {}
        self._monotonic = monotonic
        self._min_interval = min_interval
        self._lock = threading.Lock()
        self._last_done: float | None = None
        self._last_at: float | None = None
        #: The log events this call has written: each once, so a body that reports in a
        #: loop cannot flood the log.
        self._said: set[str] = set()

    def __call__(self, done: object, total: object = None, message: object = None) -> None:
        update = checked(done, total, message)
        with self._lock:
            if isinstance(update, str):
                self._invalid(update)
                return
            if self._last_done is not None and update.done <= self._last_done:
                if update.done < self._last_done:
                    self._invalid("done went backwards")
                return
            now = self._monotonic()
            if (self._last_at is not None and now - self._last_at < self._min_interval
                    and not update.complete):
                return
            self._last_done, self._last_at = update.done, now
            # Under the lock: two threads of one body hand their updates on in order.
            try:
                self._sink(update)
            except Exception as exc:  # a listener's fault is never the tool's
                self._once("tool.progress_not_sent", error=type(exc).__name__)

    def _invalid(self, problem: str) -> None:
        self._once("tool.progress_invalid", problem=problem)

    def _once(self, event: str, **fields: Any) -> None:
        if event not in self._said:
            self._said.add(event)
            get_logger(**self._log_fields).warning(event, **fields)
