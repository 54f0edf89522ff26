"""Runs: who an invocation acts for, which tools it may call, and until when.

A run carries the principal and granted scopes, the enabled tools (None: the default roster),
version pins, a deadline on the monotonic clock, and a cancellation the pipeline forwards to
the tool that is running. A ``ToolCall`` is one call a model asks for within a run. A
``RunOutcome`` is what a finished run leaves the owner: the files attached to its reply.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from toolhost._model.artifacts import ArtifactRef
from toolhost._model.context import Principal

__all__ = ["MAX_DEADLINE_S", "CancellationEvent", "Run", "RunOutcome", "ToolCall",
           "valid_run_id"]

# A run id names the run's fresh workspace directory and is quoted in operator commands:
# letters, digits and three punctuation marks, never a path separator or a leading dot.
#: The longest run deadline, in seconds from now (30 days): a run paused for an approval may
#: wait out a holiday, and a deadline must stay a date (1e12 seconds is past the year 9999).
#: ``toolhost call --timeout`` and ``TOOLHOST_MCP_RUN_TIMEOUT_S`` are held to it (D340).
MAX_DEADLINE_S = 30 * 24 * 3600

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def valid_run_id(value: object) -> bool:
    """Whether ``value`` may be a run (or conversation) id given from outside."""
    return isinstance(value, str) and _RUN_ID.fullmatch(value) is not None


class CancellationEvent:
    """A one-way flag that can be set from any thread, with callbacks for waiters: the host's
    implementation of the public ``Cancellation`` protocol, plus ``cancel``.

    A run has one; each call gets its own, set when the run's is and when the call's deadline
    passes, so a sync body blocked in ``wait`` wakes for either.
    """

    def __init__(self) -> None:
        # The threading.Event is made only when someone waits (most calls never do: ~1.5 µs
        # a call); ``_cancelled`` is the flag, written under ``_lock``, read without it.
        self._cancelled = False
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True if cancelled."""
        event = self._event
        if event is None:
            with self._lock:
                if self._cancelled:
                    return True
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
        return event.wait(timeout)

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on cancellation (at once if already cancelled); returns a remover."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        callback()
        return lambda: None

    def _remove(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


@attrs.frozen
class ToolCall:
    """One call the model made in a step: a tool name, its arguments, and an optional exact
    version (None: the run's pin, else the latest active version)."""

    name: str
    arguments: Any
    version: str | None = None


@attrs.frozen(kw_only=True)
class Run:
    """One agent run as the pipeline sees it."""

    id: str
    principal: Principal
    #: Tool names this run may call; None means the default roster.
    enabled_tools: frozenset[str] | None = None
    #: name -> exact version, for chats pinned to an older contract.
    pins: Mapping[str, str] = attrs.field(factory=dict)
    #: Monotonic instant (``toolhost._adapters.system_clock.monotonic``) after which nothing runs.
    deadline: float | None = None
    #: The same instant on the Clock (aware UTC), recorded on the run's rows: a call approved in
    #: another process, or after a restart, is bounded by it too (an approval cannot outlive
    #: its run).
    deadline_at: dt.datetime | None = None
    cancellation: CancellationEvent = attrs.field(factory=CancellationEvent, eq=False)
    conversation_id: str | None = None
    user_turn: str | None = None
    #: The run's workspace (a ``RunWorkspace`` for a run a host started, or any handle with
    #: ``discard``); None only for hand-built runs.
    workspace: Any = attrs.field(default=None, eq=False)

    def past_deadline(self, now: float) -> bool:
        """Whether nothing more may run in it at the monotonic instant ``now``: its deadline
        has passed (D433). A cancelled run's calls end as cancelled instead, so it is not."""
        return (self.deadline is not None and now >= self.deadline
                and not self.cancellation.cancelled)


@attrs.frozen(kw_only=True)
class RunOutcome:
    """What a finished run leaves its owner (``Host.end_run``): every file the run exported or
    generated, attached to its final reply (D90), in the order the run made them."""

    run_id: str
    attachments: tuple[ArtifactRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id,
                "attachments": [attachment_json(ref) for ref in self.attachments]}


def attachment_json(ref: ArtifactRef) -> dict[str, Any]:
    """An attachment as JSON: the ref's five fields, as a tool result carries them."""
    return {"id": ref.id, "name": ref.name, "media_type": ref.media_type,
            "byte_count": ref.byte_count, "checksum": ref.checksum}
