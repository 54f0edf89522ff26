"""One run per MCP session: the principal, the served roster, a workspace, and what was said.

When: a session's first ``tools/call`` starts its run; ``close`` ends every run when the
server stops. What a session is: on stdio, the process (one client per process); on
streamable HTTP, the transport session the ``mcp-session-id`` header names; requests without
one (2026-07-28 clients, which have no sessions) share one server-wide run. Why one run per
session: the run is what the pipeline scopes a workspace, a principal and the invocation rows
to, and an MCP session is the nearest thing the protocol has to an agent run. Each run is
live on the host while its session lasts: its workspace is made on first use (or is the
operator's directory, TOOLHOST_MCP_WORKSPACE), kept through approvals answered in the call,
discarded when a call is left waiting (a pause: the next call, or the approved one wherever it
runs, starts the run's next workspace), and ended with the session. Its pins and deadline are
the server's (``--pin``, TOOLHOST_MCP_RUN_TIMEOUT_S).

When an HTTP session ends: the client's DELETE, the SDK's idle timeout
(TOOLHOST_HTTP_SESSION_IDLE_S), or the server stopping. The SDK then cancels the session's
requests in flight (each call records its cancellation, ``calls``) and unwinds the
connection's exit stack, where ``SessionEnds`` put ``Sessions.ended``: the run ends, its
workspace is discarded and its descriptor closed, and the server forgets the session.

An operator's directory is opened again by name for each session's run: it is pinned and
claimed for the server's life (``served_directory``), and a session whose run would start
somewhere else than the directory the server started with is refused with
``WORKSPACE_REFUSED`` (a JSON-RPC error: nothing ran, nothing was recorded), the server and
its other sessions going on.
"""

from __future__ import annotations

import asyncio
import collections
import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from toolhost import Principal
from toolhost._composition import Host, Run, get_logger
from toolhost._mcp.http_front import CALLER_KEY, OPENING_KEY
from toolhost._mcp.served_directory import ServedDirectory

__all__ = ["WORKSPACE_REFUSED", "Question", "Session", "SessionEnds", "Sessions", "WordedCall",
           "session_key"]

SESSION_HEADER = "mcp-session-id"

#: What the client reads when its session's run cannot start in the server's directory
#: (``ServedDirectory.refusal``): static; the operator's log says what changed, once.
WORKSPACE_REFUSED = ("The directory this server serves as the workspace is no longer the one "
                     "it was started with, or can no longer be used safely, so no run starts "
                     "in this session. Ask the server's operator: its log says what changed.")

#: A call as the model made it, before the person's words replaced its arguments: the tool,
#: version and digest of the model's arguments as step 4 prepares them.
WordedCall = tuple[str, str, str]


class Question(enum.Enum):
    """Where a 2026-07-28 approval question this session put stands."""

    #: Asked; the client's retry with the answer has not come.
    OUT = "out"
    #: The elicitation timeout took it back (the call was left waiting, the run paused): an
    #: answer that arrives late still decides its row, once.
    EXPIRED = "expired"
    #: An answer decided it (or is deciding it), or its call ended: a retry still naming it
    #: (the answer to a second asking, an answer sent again) answers with what stands, never
    #: a new row or a second decision.
    DECIDED = "decided"


@attrs.frozen
class QuestionTimer:
    """A 2026-07-28 question's elicitation timeout: the timer, and what it does when it fires
    (run at once when the session ends first)."""

    handle: asyncio.TimerHandle
    expire: Callable[[], None]


@attrs.define(eq=False)
class Session:
    """A session's run, and the recorded outcomes already handed back in it."""

    key: str | None
    run: Run
    #: Invocation ids whose final recorded outcome this session has returned once (replays).
    delivered: set[str] = attrs.field(factory=set)
    #: Calls recorded awaiting approval while the person is asked within the call: the run
    #: pauses only if they leave it waiting.
    held: set[str] = attrs.field(factory=set)
    #: The approval questions this session put to a 2026-07-28 client, by row, and where
    #: each stands (``Question``): the only rows a retry may name.
    questions: dict[str, Question] = attrs.field(factory=dict)
    #: Rows this session answered ``running`` ("call this tool again ... to get it"), with
    #: how many requests are owed the final outcome: each further identical call collects it
    #: once, even one already handed back.
    running: collections.Counter[str] = attrs.field(factory=collections.Counter)
    #: Rows recorded with the person's words in place of the model's (``Tool.user_words``),
    #: by the model's own arguments (``WordedCall``), oldest first: the same call repeated
    #: finds its row before the person is asked again. This session's alone, so no other
    #: session's call is ever matched to the words in them.
    worded: dict[WordedCall, list[str]] = attrs.field(factory=dict)
    #: The elicitation timeout's timer of each 2026-07-28 question still out, by row: one a
    #: question, stopped when it is asked again or decided.
    timers: dict[str, QuestionTimer] = attrs.field(factory=dict)

    @property
    def answered(self) -> set[str]:
        """Rows a repeated call no longer finds (D38): those handed back, less those still
        owed to a request answered ``running``."""
        return self.delivered - self.running.keys()

    def asked_about(self, invocation_id: str) -> bool:
        """Whether this session put the approval question for this row (still out, taken
        back by the timeout, or decided): the only rows a 2026-07-28 retry may name."""
        return invocation_id in self.questions

    def ask(self, invocation_id: str) -> None:
        """The row's question is put (again): out until an answer or the timeout."""
        self.questions[invocation_id] = Question.OUT

    def expire(self, invocation_id: str) -> bool:
        """The elicitation timeout took the row's question back, if it was still out (then
        True): an answer that arrives late still decides the row."""
        if self.questions.get(invocation_id) is not Question.OUT:
            return False
        self.questions[invocation_id] = Question.EXPIRED
        return True

    def settle(self, invocation_id: str) -> None:
        """The row's question, if this session put one, is decided: no answer riding a retry
        decides it again, and one still naming it answers with what stands."""
        if self.questions.get(invocation_id) in (Question.OUT, Question.EXPIRED):
            self.questions[invocation_id] = Question.DECIDED

    def undecide(self, invocation_id: str) -> None:
        """The decision of the row's question was not recorded: it is no question of this
        session's any more, and the same call asks again (D403)."""
        if self.questions.get(invocation_id) is Question.DECIDED:
            del self.questions[invocation_id]

    def told_running(self, invocation_id: str, *, answered_here: bool) -> None:
        """A request was answered ``running`` for this row. ``answered_here``: it was asked
        and approved within itself, so it is another request owed the outcome; any other
        (found the row running) may be a request told so before calling again, and is owed
        it at least once: never counted twice, so no later deliberate call is answered
        with this row's outcome instead of being a new call."""
        if answered_here:
            self.running[invocation_id] += 1
        else:
            self.running[invocation_id] = max(self.running[invocation_id], 1)

    def take_back_questions(self) -> None:
        """The session or its server is ending: every 2026-07-28 question still out is taken
        back now, as its timeout would (no retry can bring its answer any more), so each call
        is left waiting and logged (D573)."""
        for timer in list(self.timers.values()):
            timer.handle.cancel()
            timer.expire()

    def collected(self, invocation_id: str) -> None:
        """A request owed this row's final outcome has had it."""
        left = self.running.pop(invocation_id, 0) - 1
        if left > 0:
            self.running[invocation_id] = left


def session_key(request: Any, protocol_version: str | None = None) -> str | None:
    """The transport session of a request: the HTTP ``mcp-session-id`` header, else None.

    A 2026-07-28 request has no session: the SDK never checks the header on it, so a client
    could name another session's id there and be handed that session's run (its files and
    its pending calls). Such a request is always the server-wide sessionless run.
    """
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    value = headers.get(SESSION_HEADER)
    return value or None


class Sessions:
    """The runs of every session this server has seen, created on first use."""

    def __init__(self, host: Host, principal: Principal, enabled: Iterable[str] | None, *,
                 workspace: Path | None = None, pins: Mapping[str, str] | None = None,
                 run_timeout_s: float | None = None) -> None:
        self._host = host
        self._principal = principal
        #: The operator's directory, pinned and claimed until ``close`` (ConfigError now if
        #: it no longer passes the start's check).
        self._served = ServedDirectory(host, workspace) if workspace is not None else None
        #: Each refusal of the served directory the operator was told (once each).
        self._refusals_said: set[str] = set()
        #: The served roster's names; None: the default roster, as the registry has it at
        #: each call (a server whose roster follows the gateway, ``roster.ServedRoster``).
        self._enabled = frozenset(enabled) if enabled is not None else None
        self._workspace = workspace
        self._pins = dict(pins or {})
        self._run_timeout_s = run_timeout_s
        self._sessions: dict[tuple[str, str, str | None], Session] = {}
        #: What else ends with a transport session (its route among several hosts).
        self.on_end: list[Callable[[str], Awaitable[None]]] = []
        #: Transport sessions open now (``SessionEnds`` tells), each with the principal that
        #: opened it: for the descriptor budget and each principal's bound.
        self._open: dict[str, str] = {}
        self._open_by: collections.Counter[str] = collections.Counter()
        #: Ends the runs of sessions that ended, one at a time (they take the workspace
        #: registry's lock in turn anyway).
        self._ending = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolhost-end")
        self._hooks: set[asyncio.Task[None]] = set()

    def of(self, ctx: Any) -> Session:
        """The session a request belongs to (``session_key``), for the principal its bearer
        token names (over HTTP with authentication), else the server's principal."""
        scope = getattr(ctx.request, "scope", None) or {}
        caller = scope.get(CALLER_KEY)
        key = session_key(ctx.request, ctx.protocol_version)
        # A 2026-07-28 request over HTTP: the server-wide run has no session to end with.
        sessionless = (key is None and ctx.request is not None
                       and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS)
        if caller is None:
            return self.get(key, renew=sessionless)
        return self.get(key, caller.principal, caller.fingerprint, renew=sessionless)

    def get(self, key: str | None, principal: Principal | None = None,
            credential: str = "", *, renew: bool = False) -> Session:
        """The run of session ``key`` for ``principal`` (default: the server's) and the kind
        of credential it came with (``Caller.fingerprint``: how it authenticated, its scopes):
        two principals, or two tokens of one principal with different scopes, never share a
        run, not even the sessionless one.

        ``renew``: a run past its deadline (TOOLHOST_MCP_RUN_TIMEOUT_S) is ended and a new
        one started. For the sessionless run: a session's run ends with its session, and the
        client opens another, but no client can end the sessionless one, which would
        otherwise answer every call past its deadline until the server restarts."""
        principal = principal if principal is not None else self._principal
        session = self._sessions.get((principal.id, credential, key))
        if session is not None and renew and self._expired(session.run):
            del self._sessions[(principal.id, credential, key)]
            session.run.cancellation.cancel()
            self._ending.submit(self._end, session.run)
            session = None
        if session is None:
            self._check_served()
            # The run's enabled tools are exactly the served roster, so step 2 of the pipeline
            # and tools/list agree by construction.
            run = self._host.start_run(principal=principal, enabled_tools=self._enabled,
                                       conversation_id=key, workspace=self._workspace,
                                       pins=self._pins, timeout_s=self._run_timeout_s)
            session = self._sessions[(principal.id, credential, key)] = Session(key, run)
            get_logger(run_id=run.id).info("mcp.session.started", session=key,
                                           principal=principal.id)
        return session

    def _check_served(self) -> None:
        """A new run may start in the operator's directory: its name still leads to the
        directory the server started with, which still passes the start's check.

        :raises MCPError: it does not (``WORKSPACE_REFUSED``); the operator is told why once."""
        refusal = self._served.refusal() if self._served is not None else None
        if refusal is None:
            return
        if refusal not in self._refusals_said:
            self._refusals_said.add(refusal)
            get_logger().warning("mcp.session.workspace_refused", problem=refusal)
        raise MCPError(code=INTERNAL_ERROR, message=WORKSPACE_REFUSED)

    def _expired(self, run: Run) -> bool:
        return run.deadline is not None and self._host.deadline_in(0) >= run.deadline

    @property
    def open_count(self) -> int:
        """Transport sessions open now (opened, not yet ended), with a run or not."""
        return len(self._open)

    def open_of(self, principal_id: str) -> int:
        """Transport sessions ``principal_id`` opened that are open now."""
        return self._open_by[principal_id]

    def opened(self, key: str, principal_id: str = "") -> bool:
        """Transport session ``key`` is open, opened by ``principal_id`` (an authenticated
        request's; "" without authentication); False when it was already."""
        if key in self._open:
            return False
        self._open[key] = principal_id
        self._open_by[principal_id] += 1
        return True

    def ended(self, key: str) -> None:
        """Transport session ``key`` is over (the client's DELETE, idleness, the server
        stopping): every run it had is told to stop and handed to this server's own worker
        to end (its workspace removed: disk work, off the loop), and the session is forgotten
        here and by the ``on_end`` hooks. Returns at once: the SDK gives a session's cleanup
        5 s and its thread pool is shared, so a burst of endings (every session at a stop)
        must not wait for either; ``close`` waits for the worker."""
        principal_id = self._open.pop(key, None)
        if principal_id is not None:
            self._open_by[principal_id] -= 1
            if not self._open_by[principal_id]:
                del self._open_by[principal_id]
        ending = [self._sessions.pop(k) for k in [k for k in self._sessions if k[2] == key]]
        for session in ending:
            session.take_back_questions()  # on the loop, before its run's end is under way
        runs = [session.run for session in ending]
        for run in runs:
            run.cancellation.cancel()  # a tool body still running is told to stop
            self._ending.submit(self._end, run)
        if self.on_end:
            loop = asyncio.get_running_loop()
            for hook in self.on_end:
                task = loop.create_task(self._quietly(hook, key))
                self._hooks.add(task)
                task.add_done_callback(self._hooks.discard)

    @staticmethod
    async def _quietly(hook: Callable[[str], Awaitable[None]], key: str) -> None:
        try:
            await hook(key)
        except Exception as exc:  # a table away: the route's host retires it later
            get_logger().warning("mcp.session.end_hook_failed", error=type(exc).__name__)

    def _end(self, run: Run) -> None:
        try:
            self._host.release_run(run)
        except Exception as exc:  # the next run must not inherit this one's failure
            get_logger(run_id=run.id).warning("mcp.session.end_failed",
                                              error=type(exc).__name__)
        else:
            get_logger(run_id=run.id).info("mcp.session.ended", session=run.conversation_id)

    def cancel(self) -> None:
        """Cancel every run's calls in flight (a stopping server whose drain time is up):
        each records its cancellation and answers it. A call whose person has a form open
        stops waiting for them and answers too: an approval is left waiting (its id, for
        ``toolhost approve``), the person's words end cancelled (``calls``)."""
        for session in list(self._sessions.values()):
            session.take_back_questions()
            session.run.cancellation.cancel()

    def close(self) -> None:
        """End every run: the endings under way finish, then the rest end here (fresh
        workspaces are discarded, an operator's directory is kept)."""
        self._ending.shutdown(wait=True)
        sessions, self._sessions = self._sessions, {}
        self._open.clear()
        self._open_by.clear()
        for session in sessions.values():
            session.take_back_questions()
            session.run.cancellation.cancel()
            self._end(session.run)
        if self._served is not None:
            self._served.close()  # no run of this server is live any more


class SessionEnds:
    """Server middleware: on a session's first request (its ``initialize``), ``Sessions.ended``
    goes onto the connection's exit stack, which the SDK unwinds when the transport session
    ends, however it ends. A 2026-07-28 request has a connection of its own each time and no
    session: nothing to watch (and its header never names a session to end)."""

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        # The SDK's Connection (documented: "push cleanup from handlers or middleware") is
        # not on this context type yet, only on the session it holds (the SDK's TODO L54).
        connection = getattr(ctx.session, "_connection", None)
        key = getattr(connection, "session_id", None)
        scope = getattr(ctx.request, "scope", None) or {}
        caller = scope.get(CALLER_KEY)
        if (connection is not None and key is not None
                and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS):
            if self._sessions.opened(key, caller.principal.id if caller else ""):
                connection.exit_stack.callback(self._sessions.ended, key)
            # Counted as open now: no longer as an initialize on its way (FrontDoor).
            opening = scope.get(OPENING_KEY)
            if opening is not None:
                opening.became_open()
        return await call_next(ctx)
