"""Pipeline step 8 (and 9): run the tool under its deadline, with its own cancellation.

Each call has a cancellation of its own (``context.cancellation``), set when the run's is and
when the call's deadline passes. An async tool runs inline, in the pipeline's own task (most
finish in their first step, with no task or timer to pay for); one that suspends goes on in
that same task, cancelled at its next ``await``. Sync tools run on daemon worker threads: Python cannot interrupt one, so the call's
cancellation is the signal it gets (a body blocked in ``cancellation.wait`` wakes at once) and
the pipeline stops waiting for it; its late result is discarded, and a daemon thread means an
abandoned tool never holds the process open at exit.

Whatever a body raises is its own failure, a BaseException that is not an Exception included
(``sys.exit`` in a CLI library a plugin wraps, a library's own unwinding, a CancelledError
nobody sent): it comes out of ``run_tool`` as ``BodyAborted``, an Exception, so it never
unwinds the pipeline past the row it must finish, nor the event loop. The pipeline's own
cancellation of its task still goes on as CancelledError.

An async body that holds the loop (``time.sleep``, a CPU loop) cannot be pre-empted, and no
timer fires meanwhile: what it hands back after the call's deadline is refused as late, the
call's timeout, as a sync body's late result is.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import inspect
import queue
import threading
import types
from collections.abc import Callable, Coroutine, Generator, Mapping
from typing import Any, TypeVar

from toolhost._model.context import ToolCallable, ToolExecutionContext
from toolhost._model.errors import ToolhostError
from toolhost._model.outcome import ToolOutput
from toolhost._model.runs import CancellationEvent

__all__ = ["BodyAborted", "Cancelled", "DeadlineExceeded", "abandoned", "run_sync", "run_tool"]

_T = TypeVar("_T")

#: Upper bound on worker threads; past it calls queue. Abandoned (hung) sync tools hold a
#: thread each, so the bound also caps what a misbehaving tool can take from the process.
MAX_WORKERS = 64


class DeadlineExceeded(Exception):
    """The tool did not finish before min(timeout_s, run deadline)."""


class Cancelled(Exception):
    """The run was cancelled while the tool ran."""


class BodyAborted(ToolhostError):
    """The body raised ``raised``, a BaseException that is not an Exception (or a sync body's
    StopIteration, which no Future takes): the tool's failure (a ToolhostError as
    ``ToolFailure`` is), which step 8 renders.

    ``interrupt``: it is a KeyboardInterrupt raised on the main thread, where Python delivers
    the operator's Ctrl-C (the loop runs there), so it may be the operator's rather than the
    body's: the pipeline finishes the row, then raises it again. On any other thread no
    signal is delivered, and it is the body's alone."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(f"{type(raised).__name__}: {raised}")
        self.raised = raised
        self.interrupt = (isinstance(raised, KeyboardInterrupt)
                          and threading.current_thread() is threading.main_thread())


def _body_step(own: contextvars.Context, step: Callable[[Any], Any], value: Any) -> Any:
    """One step of an async body (``send`` or ``throw``) in its own context: what it yields,
    or raises; a BaseException that is not an Exception comes out as ``BodyAborted`` (a
    CancelledError stays one: whether the task was sent it is the caller's to judge)."""
    try:
        return own.run(step, value)
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise BodyAborted(exc) from exc


def _stopped(exc: Exception, call: CancellationEvent) -> bool:
    """Whether the body's failure came after its call's cancellation, and so was its way of
    stopping: the call ends as cancelled or timed out. A possible Ctrl-C never is."""
    return call.cancelled and not (isinstance(exc, BodyAborted) and exc.interrupt)


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


class _OnWorkers(concurrent.futures.ThreadPoolExecutor):
    """The daemon workers as an event loop's default executor (``asyncio.to_thread``): its
    shutdown waits for nothing, so a thread a call stopped waiting for never holds the loop's
    end, nor the process's. (A ThreadPoolExecutor by type, as asyncio requires, whose own
    threads never start: every submission goes to the workers.)"""

    def submit(self, fn: Callable[..., _T], /, *args: Any,
               **kwargs: Any) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def done(result: Any, error: BaseException | None) -> None:
            if isinstance(error, _Skipped):
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        def work() -> Any:
            if not future.set_running_or_notify_cancel():
                raise _Skipped
            return fn(*args, **kwargs)

        _workers.submit(work, done)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # the workers are the process's, and a stuck one is abandoned, not awaited


class _Skipped(Exception):
    """Work whose caller gave up before it began (a cancelled future, a call that ended):
    nothing to run or answer."""


def run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(coroutine)`` for the host's synchronous entries (the CLI's call, approve
    and recover): what a tool hands to ``asyncio.to_thread`` runs on the daemon workers.
    ``asyncio.run`` waits at its end for its default executor's threads, so a read a tool
    made there, stuck past the call's deadline, held the command as long (a media reference
    read: the 1 s deadline's outcome came after 6 s)."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(_OnWorkers())
        return runner.run(coroutine)

#: Sync bodies the pipeline stopped waiting for that still hold a worker thread, by the
#: principal whose call it was: what one person's hung calls take from everyone (a server
#: counts them against that person's cap on calls).
_abandoned: collections.Counter[str] = collections.Counter()
_abandoned_lock = threading.Lock()


def abandoned(principal_id: str) -> int:
    """How many of ``principal_id``'s sync bodies were abandoned and still run."""
    return _abandoned[principal_id]


def _is_async(tool: ToolCallable) -> bool:
    # A plain ``async def`` (most async bodies) answers from its code's flag at once, as
    # ``iscoroutinefunction`` would, without its unwrapping of methods and partials (~1 µs).
    if type(tool) is types.FunctionType and tool.__code__.co_flags & inspect.CO_COROUTINE:
        return True
    return inspect.iscoroutinefunction(tool) or inspect.iscoroutinefunction(
        type(tool).__call__
    )


class _SyncBody:
    """One sync body on a worker thread: whether it has ended, and whether the call stopped
    waiting for it first (then it is counted in ``_abandoned`` until it ends)."""

    def __init__(self, principal_id: str) -> None:
        self.principal_id = principal_id
        self.ended = False
        self.abandoned = False

    def abandon(self) -> None:
        with _abandoned_lock:
            if not self.ended and not self.abandoned:
                self.abandoned = True
                _abandoned[self.principal_id] += 1

    def end(self) -> None:
        with _abandoned_lock:
            self.ended = True
            if self.abandoned:
                _abandoned[self.principal_id] -= 1
                if not _abandoned[self.principal_id]:
                    del _abandoned[self.principal_id]


def _start_sync(
    loop: asyncio.AbstractEventLoop, tool: ToolCallable, arguments: Mapping[str, Any],
    context: ToolExecutionContext,
) -> tuple[asyncio.Future[Any], _SyncBody]:
    future: asyncio.Future[Any] = loop.create_future()
    body = _SyncBody(context.principal.id)

    def settle(result: Any, exc: BaseException | None) -> None:
        if future.done():
            return  # abandoned: the late result is discarded
        if isinstance(exc, _Skipped):
            future.cancel()  # never ran: the call's own cancellation says why
        elif exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def done(result: Any, exc: BaseException | None) -> None:
        body.end()
        # A closed loop means nobody is waiting for this result any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, exc)

    def work() -> Any:
        # Queued behind busy workers, a call can end (its deadline, its run cancelled) before
        # a thread takes it up: its row says so already, and its body must not run after all.
        if context.cancellation.cancelled:
            raise _Skipped
        try:
            return tool(arguments, context)
        except StopIteration as exc:
            # A Future refuses it (TypeError in the loop's callback): the call waited out its
            # deadline and read as a timeout. Wrapped, it is the body's failure like any other.
            raise BodyAborted(exc) from exc
        except Exception:
            raise
        except BaseException as exc:  # on a worker thread: never a signal, the body's own
            raise BodyAborted(exc) from exc

    _workers.submit(work, done)
    return future, body


async def run_tool(
    tool: ToolCallable,
    arguments: Mapping[str, Any],
    context: ToolExecutionContext,
    *,
    timeout: float,
    call: CancellationEvent,
    run: CancellationEvent,
    monotonic: Callable[[], float],
) -> Any:
    """The tool's return value; its exception; DeadlineExceeded; or Cancelled.

    ``call`` is the cancellation the tool sees in its context; it is set here when ``run``
    is, and when ``timeout`` passes, before this returns. ``monotonic`` is the host's clock
    (the composition root's), which an async body's late outcome is measured on.
    """
    unlink = run.add_callback(call.cancel)
    try:
        if run.cancelled:
            raise Cancelled
        if timeout <= 0:
            call.cancel()
            raise DeadlineExceeded
        return await _wait_for_tool(tool, arguments, context, timeout, call, run, monotonic)
    finally:
        unlink()


async def _wait_for_tool(
    tool: ToolCallable,
    arguments: Mapping[str, Any],
    context: ToolExecutionContext,
    timeout: float,
    call: CancellationEvent,
    run: CancellationEvent,
    monotonic: Callable[[], float],
) -> Any:
    loop = asyncio.get_running_loop()
    end = monotonic() + timeout  # the call's deadline on the host's clock
    if _is_async(tool):
        body: Any = tool(arguments, context)  # a coroutine: the tool is async
        # The body's first step runs here, in a context of its own as a task's would: most
        # async bodies finish without suspending, and then need no task, timer or waiter.
        own = contextvars.copy_context()
        try:
            try:
                suspended = _body_step(own, body.send, None)
            finally:
                _expire(call, end, monotonic)  # a first step that held the loop past it
        except StopIteration as finished:
            return await _finished(finished.value, call, run, end, monotonic)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if _raised_by_body(task, call):
                raise Cancelled if run.cancelled else DeadlineExceeded from None
            if task is None or task.cancelling():
                raise  # the pipeline's own task was cancelled: not the body's to end
            raise BodyAborted(exc) from exc  # nobody sent it: the body's own
        except Exception as exc:
            if _stopped(exc, call):  # as below: a body that failed after its cancellation
                raise Cancelled if run.cancelled else DeadlineExceeded from None
            raise
        result = await _continue_here(body, suspended, own, end, call, run, monotonic)
        _expire(call, end, monotonic)  # its last step ran on this loop: past the end, late
        return await _finished(result, call, run, end, monotonic)
    work, sync_body = _start_sync(loop, tool, arguments, context)
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
    except BaseException:  # this task cancelled: the body runs on, told and counted
        call.cancel()
        sync_body.abandon()
        raise
    finally:
        remove()
        if not cancelled.done():
            cancelled.cancel()
    # A body that finished because it saw its cancellation (a sync body woken from
    # ``cancellation.wait``) finished cancelled: its result is discarded like a late one.
    if work in done and not call.cancelled:
        return await _finished(work.result(), call, run, end, monotonic)
    # Timed out or cancelled: the body is told first, so a sync body that waits on its
    # cancellation (or kills the processes it started) stops, rather than running on unseen.
    call.cancel()
    work.cancel()
    sync_body.abandon()
    raise Cancelled if run.cancelled else DeadlineExceeded


def _expire(call: CancellationEvent, end: float, monotonic: Callable[[], float]) -> None:
    """Cancel the call if the loop's clock is past its deadline ``end``: the timer's work, for
    a body that held the loop so the timer could not run. Whatever the body then hands back
    ends the call as its timeout, as a late sync body's result does (D56)."""
    if monotonic() >= end:
        call.cancel()


async def _finished(result: Any, call: CancellationEvent, run: CancellationEvent,
                    end: float, monotonic: Callable[[], float]) -> Any:
    """The body's result; a cancellation that came while it ran discards it, like a late one.
    A sync body's result is not asked the loop's clock: it finished on its worker, and the
    loop may have been held meanwhile by another call's body, not this one's (D541)."""
    if call.cancelled:
        raise Cancelled if run.cancelled else DeadlineExceeded
    # A sync callable that returned a coroutine. (A ToolOutput itself, what nearly every body
    # returns, is no awaitable: not asked the ABC's ``isinstance``, ~0.4 µs.)
    if type(result) is not ToolOutput and inspect.isawaitable(result):
        try:
            result = await asyncio.wait_for(_awaited(result), end - monotonic())
        except asyncio.CancelledError as exc:
            # As for an async body: the host's only when it was sent (this task cancelled,
            # or the call's own cancellation); one the coroutine raised itself is its failure.
            task = asyncio.current_task()
            if call.cancelled or task is None or task.cancelling():
                raise
            raise BodyAborted(exc) from exc
    return result


async def _awaited(awaitable: Any) -> Any:
    """``await awaitable`` in the task ``wait_for`` makes, its BaseException the body's failure
    (asyncio would raise a SystemExit from a task out of the event loop itself). GeneratorExit
    is how a coroutine is closed (an abandoned one, at shutdown), never a failure."""
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:
        raise BodyAborted(exc) from exc


def _raised_by_body(task: asyncio.Task[Any] | None, call: CancellationEvent) -> bool:
    """A CancelledError the body raised itself on seeing its call's cancellation (set from
    another thread after the body's last ``await``), not one the task was sent: the call's
    cancellation, like a body's failure after it."""
    return call.cancelled and (task is None or task.cancelling() == 0)


#: How long a cancelled async body has for its cleanup before the pipeline stops driving it.
CLEANUP_GRACE_S = 1.0


class _Driver:
    """Drives the rest of a suspended async body in the pipeline's own task.

    The body stays in the task it started in: httpx (over anyio) enters a cancel scope in a
    body's first ``await`` and must leave it in the same task, so a body is never moved to a
    task of its own. The call's cancellation (its deadline, or the run's) cancels this task
    once; a body still running ``CLEANUP_GRACE_S`` later is closed and no longer driven.
    """

    def __init__(self, body: Coroutine[Any, Any, Any], own: contextvars.Context) -> None:
        self.body = body
        self.own = own
        self.task = asyncio.current_task()
        self.finished = False
        self.cancelled_here = False
        self.abandon = False
        #: How many times this driver cancelled the task: each is taken back when it ends.
        self.requests = 0
        self.grace: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        # In the loop's thread (scheduled with call_soon_threadsafe by the call's callback).
        if self.finished or self.cancelled_here or self.task is None:
            return
        self.cancelled_here = True
        self.requests += 1
        self.task.cancel()
        self.grace = asyncio.get_running_loop().call_later(CLEANUP_GRACE_S, self.give_up)

    def give_up(self) -> None:
        if not self.finished and self.task is not None:
            self.abandon = True
            self.requests += 1
            self.task.cancel()

    def end(self) -> None:
        """The body is done (or left behind): the cancellations it was sent are spent, and the
        pipeline's task goes on uncancelled."""
        self.finished = True
        if self.grace is not None:
            self.grace.cancel()
        if self.task is not None:
            for _ in range(self.requests):
                self.task.uncancel()

    @types.coroutine
    def resume(self, suspended: Any) -> Generator[Any, Any, Any]:
        """What ``await body`` would do from ``suspended`` on (values and exceptions,
        cancellation's included, passed through), each step in the body's own context."""
        body, own = self.body, self.own
        while True:
            try:
                sent = yield suspended
            except GeneratorExit:
                body.close()
                raise
            except BaseException as exc:
                if self.abandon:
                    with contextlib.suppress(BaseException):
                        body.close()  # a body that ignores its cancellation is left behind
                    raise
                try:
                    suspended = _body_step(own, body.throw, exc)
                except StopIteration as finished:
                    return finished.value
            else:
                try:
                    suspended = _body_step(own, body.send, sent)
                except StopIteration as finished:
                    return finished.value


async def _continue_here(
    body: Coroutine[Any, Any, Any],
    suspended: Any,
    own: contextvars.Context,
    end: float,
    call: CancellationEvent,
    run: CancellationEvent,
    monotonic: Callable[[], float],
) -> Any:
    """The rest of an async body that suspended in its first step, in this same task, under
    the call's deadline ``end`` (the host's ``monotonic`` clock) and cancellation: its result (which the
    caller discards if the call was cancelled meanwhile, or came late), DeadlineExceeded or
    Cancelled."""
    loop = asyncio.get_running_loop()
    driver = _Driver(body, own)

    def cancel_soon() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to stop
            loop.call_soon_threadsafe(driver.cancel)

    remove = call.add_callback(cancel_soon)
    # At the deadline itself, not ``timeout`` after the first step: that step may have held
    # the loop for most of it.
    deadline = loop.call_later(end - monotonic(), call.cancel)
    try:
        return await driver.resume(suspended)
    except asyncio.CancelledError as exc:
        _expire(call, end, monotonic)  # one the body raised itself, after holding the loop
        if driver.cancelled_here or _raised_by_body(driver.task, call):
            raise Cancelled if run.cancelled else DeadlineExceeded from None
        if driver.task is None or driver.task.cancelling():
            raise  # the pipeline's own task was cancelled from outside: not ours to keep
        raise BodyAborted(exc) from exc  # nobody sent it: the body's own
    except Exception as exc:
        _expire(call, end, monotonic)  # a failure after the deadline is as late as a result
        if _stopped(exc, call):  # a body that failed after its cancellation
            raise Cancelled if run.cancelled else DeadlineExceeded from None
        raise
    finally:
        deadline.cancel()
        remove()
        driver.end()
