"""Pipeline step 8 (and 9): run the tool under its deadline, with its own cancellation.

Each call has a cancellation of its own (``context.cancellation``), set when the run's is and
when the call's deadline passes. An async tool's first step runs inline (most finish there,
with no task or timer to pay for); one that suspends goes on as a task, cancelled at its next
``await``. Sync tools run on daemon worker threads: Python cannot interrupt one, so the call's
cancellation is the signal it gets (a body blocked in ``cancellation.wait`` wakes at once) and
the pipeline stops waiting for it; its late result is discarded, and a daemon thread means an
abandoned tool never holds the process open at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import queue
import threading
import types
from collections.abc import Callable, Coroutine, Generator, Mapping
from typing import Any

from toolhost._model.context import ToolCallable, ToolExecutionContext
from toolhost._model.runs import CancellationEvent

__all__ = ["Cancelled", "DeadlineExceeded", "run_tool"]

#: Upper bound on worker threads; past it calls queue. Abandoned (hung) sync tools hold a
#: thread each, so the bound also caps what a misbehaving tool can take from the process.
MAX_WORKERS = 64


class DeadlineExceeded(Exception):
    """The tool did not finish before min(timeout_s, run deadline)."""


class Cancelled(Exception):
    """The run was cancelled while the tool ran."""


class _Workers:
    """A tiny pool of daemon threads that grows on demand up to MAX_WORKERS."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Callable[..., None]]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            elif self._threads < MAX_WORKERS:
                self._threads += 1
                threading.Thread(target=self._work, name="toolhost-worker", daemon=True).start()
        self._queue.put((fn, done))

    def _work(self) -> None:
        while True:
            fn, done = self._queue.get()
            try:
                result = fn()
            except BaseException as exc:  # handed to the waiting call, never lost here
                done(None, exc)
            else:
                done(result, None)
            with self._lock:
                self._idle += 1


_workers = _Workers()


def _is_async(tool: ToolCallable) -> bool:
    return inspect.iscoroutinefunction(tool) or inspect.iscoroutinefunction(
        type(tool).__call__
    )


def _start_sync(
    loop: asyncio.AbstractEventLoop, tool: ToolCallable, arguments: Mapping[str, Any],
    context: ToolExecutionContext,
) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if future.done():
            return  # abandoned: the late result is discarded
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def done(result: Any, exc: BaseException | None) -> None:
        # A closed loop means nobody is waiting for this result any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, exc)

    _workers.submit(lambda: tool(arguments, context), done)
    return future


async def run_tool(
    tool: ToolCallable,
    arguments: Mapping[str, Any],
    context: ToolExecutionContext,
    *,
    timeout: float,
    call: CancellationEvent,
    run: CancellationEvent,
) -> Any:
    """The tool's return value; its exception; DeadlineExceeded; or Cancelled.

    ``call`` is the cancellation the tool sees in its context; it is set here when ``run``
    is, and when ``timeout`` passes, before this returns.
    """
    unlink = run.add_callback(call.cancel)
    try:
        if run.cancelled:
            raise Cancelled
        if timeout <= 0:
            call.cancel()
            raise DeadlineExceeded
        return await _wait_for_tool(tool, arguments, context, timeout, call, run)
    finally:
        unlink()


async def _wait_for_tool(
    tool: ToolCallable,
    arguments: Mapping[str, Any],
    context: ToolExecutionContext,
    timeout: float,
    call: CancellationEvent,
    run: CancellationEvent,
) -> Any:
    loop = asyncio.get_running_loop()
    if _is_async(tool):
        body: Any = tool(arguments, context)  # a coroutine: the tool is async
        # The body's first step runs here, in a context of its own as a task's would: most
        # async bodies finish without suspending, and then need no task, timer or waiter.
        own = contextvars.copy_context()
        try:
            suspended = own.run(body.send, None)
        except StopIteration as finished:
            return await _finished(finished.value, call, run, timeout)
        except Exception:
            if call.cancelled:  # as below: a body that failed after its cancellation
                raise Cancelled if run.cancelled else DeadlineExceeded from None
            raise
        work: asyncio.Future[Any] = loop.create_task(_rest(body, suspended), context=own)
    else:
        work = _start_sync(loop, tool, arguments, context)
    cancelled: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not cancelled.done():
            cancelled.set_result(None)

    def wake_soon() -> None:
        loop.call_soon_threadsafe(wake)

    remove = call.add_callback(wake_soon)
    try:
        done, _ = await asyncio.wait(
            {work, cancelled}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        remove()
        if not cancelled.done():
            cancelled.cancel()
    # A body that finished because it saw its cancellation (a sync body woken from
    # ``cancellation.wait``) finished cancelled: its result is discarded like a late one.
    if work in done and not call.cancelled:
        return await _finished(work.result(), call, run, timeout)
    # Timed out or cancelled: the body is told first, so a sync body that waits on its
    # cancellation (or kills the processes it started) stops, rather than running on unseen.
    call.cancel()
    work.cancel()
    if isinstance(work, asyncio.Task):
        # Give a cancelled async tool a moment to run its cleanup, bounded.
        await asyncio.wait({work}, timeout=1.0)
    raise Cancelled if run.cancelled else DeadlineExceeded


async def _finished(result: Any, call: CancellationEvent, run: CancellationEvent,
                    timeout: float) -> Any:
    """The body's result; a cancellation that came while it ran discards it, like a late one."""
    if call.cancelled:
        raise Cancelled if run.cancelled else DeadlineExceeded
    if inspect.isawaitable(result):  # a sync callable that returned a coroutine
        result = await asyncio.wait_for(result, timeout)
    return result


async def _rest(body: Coroutine[Any, Any, Any], suspended: Any) -> Any:
    return await _resume(body, suspended)


@types.coroutine
def _resume(body: Coroutine[Any, Any, Any], suspended: Any) -> Generator[Any, Any, Any]:
    """The rest of a body whose first step suspended on ``suspended``: what ``await body``
    would do from there (values and exceptions, cancellation's included, passed through)."""
    while True:
        try:
            sent = yield suspended
        except GeneratorExit:
            body.close()
            raise
        except BaseException as exc:
            try:
                suspended = body.throw(exc)
            except StopIteration as finished:
                return finished.value
        else:
            try:
                suspended = body.send(sent)
            except StopIteration as finished:
                return finished.value
