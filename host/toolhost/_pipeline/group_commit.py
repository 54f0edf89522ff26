"""Group commit: concurrent calls' row writes committed together, each call still durable.

A call's outcome is returned only once its row is committed, as before; what changes is how
many rows one commit carries. While other calls are in flight (``Pipeline`` counts them in
``calls``) or other work is ready to run on the loop (its ready queue: callers whose calls
never suspend run one whole call at a time, the others' next steps waiting there), a write
is queued instead of committed at once. The first write queued schedules a flush for the
loop's next pass (``call_soon``), and the flush runs the whole queue in one transaction of
the store (``GroupCommitStore.transaction``), in queue order, so each write sees the ones
before it and a compare-and-set (``settle``, ``transition``) returns its own answer; then
each waiting call is woken with its own result. A call alone (nothing else in flight,
nothing else ready) writes at once, as before: there is nothing to group it with. (The ready
queue is asyncio's private ``_ready``; a loop without one, uvloop's, groups by ``calls``
alone.)

A batch that fails (one write raised, or the COMMIT did) was rolled back whole, and every
write in it is then made again alone, in the same order: one bad write fails only its own
call, with the exception it would have had alone, and no write is lost or made twice.

The await is the one new suspension point on the durable path. A queued write is made
whether or not its caller is still waiting (the flush takes the queue as it is), and a caller
cancelled meanwhile still waits for it, through the next pass: ``write`` then raises
``WriteCancelled`` carrying the write's own result, so the caller decides what the
cancellation means for a row that is now written (see ``Pipeline``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["GroupCommit", "WriteCancelled"]

T = TypeVar("T")


class _Queued(Generic[T]):
    """One write waiting for the flush, and what it came to."""

    __slots__ = ("error", "result", "waiter", "write", "written")

    def __init__(self, write: Callable[[], T], waiter: asyncio.Future[None]) -> None:
        self.write = write
        self.waiter = waiter
        self.written = False
        self.result: Any = None
        self.error: Exception | None = None

    def settle(self, result: Any, error: Exception | None) -> None:
        self.result, self.error, self.written = result, error, True
        if not self.waiter.done():  # cancelled: its caller waits on a new one, or is gone
            self.waiter.set_result(None)

    def value(self) -> T:
        """The write's result, or its exception raised."""
        if self.error is not None:
            raise self.error
        result: T = self.result
        return result


class WriteCancelled(asyncio.CancelledError):
    """The caller was cancelled while its write was queued. The write was made regardless
    (committed, or failed as it would have alone): ``value()`` is its result, or raises its
    exception."""

    def __init__(self, queued: _Queued[Any]) -> None:
        super().__init__()
        self._queued = queued

    def value(self) -> Any:
        return self._queued.value()


class _Batch:
    """The writes one flush will make, on the loop that will run it."""

    __slots__ = ("loop", "writes")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.writes: list[_Queued[Any]] = []


class _PerThread(threading.local):
    #: Calls in flight on this thread's loop (``Pipeline`` counts them).
    calls = 0
    #: The writes waiting for the flush scheduled on this thread's loop, if any.
    batch: _Batch | None = None


class GroupCommit:
    """The write queue of one pipeline's store (see the module's docstring).

    Per thread: a host may run calls on several loops at once (``invoke_sync`` on threads of
    its own), and a loop's writes are grouped and woken on that loop only.
    """

    def __init__(self, store: Callable[[], Any]) -> None:
        #: The store as it is now (a test or a bench may swap it after the pipeline is made).
        self._store = store
        self._local = _PerThread()

    def enter(self) -> None:
        """A call started on this thread's loop."""
        self._local.calls += 1

    def leave(self) -> None:
        """A call ended."""
        self._local.calls -= 1

    async def write(self, write: Callable[[], T]) -> T:
        """``write()``'s result once it is committed (its exception, if it fails alone).

        :raises WriteCancelled: the caller was cancelled while the write was queued; raised
            only after the write was made, with its result.
        """
        local = self._local
        loop = asyncio.get_running_loop()
        if (local.calls <= 1 and not getattr(loop, "_ready", None)) or getattr(
                self._store(), "transaction", None) is None:
            return write()  # alone, or a store that commits each write alone
        queued = _Queued(write, loop.create_future())
        batch = local.batch
        if batch is None or batch.loop is not loop:  # (a loop stopped with its flush unrun)
            batch = local.batch = _Batch(loop)
            loop.call_soon(self._flush, batch)
        batch.writes.append(queued)
        try:
            await queued.waiter
        except asyncio.CancelledError:
            # The flush is already scheduled and takes this write with the rest: wait for it
            # (a pass of the loop), however often cancelled meanwhile, then say so.
            while not queued.written:
                queued.waiter = loop.create_future()
                try:
                    await queued.waiter
                except asyncio.CancelledError:
                    continue
            raise WriteCancelled(queued) from None
        return queued.value()

    def _flush(self, batch: _Batch) -> None:
        if self._local.batch is batch:
            self._local.batch = None
        writes = batch.writes
        try:
            self._make(writes)
        finally:
            # KeyboardInterrupt and the like (in the batch or in its replay) end the flush
            # early: every write it did not finish fails, so that nobody waits for ever
            # (``write`` waits for its write however often it is cancelled).
            for queued in writes:
                if not queued.written:
                    queued.settle(None, RuntimeError("the batch was interrupted"))

    def _make(self, writes: list[_Queued[Any]]) -> None:
        transaction = getattr(self._store(), "transaction", None)
        if transaction is None:  # the store was swapped for one without: each alone
            self._one_by_one(writes)
            return
        results: list[Any] = []
        try:
            with transaction():
                for queued in writes:
                    results.append(queued.write())
        except Exception:
            # Rolled back whole: each write again, alone, with its own result or exception.
            self._one_by_one(writes)
            return
        for queued, result in zip(writes, results, strict=True):
            queued.settle(result, None)

    @staticmethod
    def _one_by_one(writes: list[_Queued[Any]]) -> None:
        for queued in writes:
            try:
                result = queued.write()
            except Exception as exc:
                queued.settle(None, exc)
            else:
                queued.settle(result, None)
