"""``tools/call``: one call through the full pipeline, and the approval round trip around it.

When: for every ``tools/call`` the SDK dispatches. What: the call runs ``Pipeline.invoke``
under the session's run (every step: resolve, enabled, scopes, validation, policy, execution,
output checks, persistence), and its ``Outcome`` becomes the ``CallToolResult``. A call that
pauses for approval is put to the client's user when the client supports form elicitation
(pushed as ``elicitation/create`` on a 2025 session, returned as an ``InputRequiredResult`` on
a 2026-07-28 one); otherwise, or when the user makes no choice, it is answered ``isError``
with the invocation id and ``toolhost approve ID``. See ``toolhost._mcp.approvals`` for
how a repeated call finds its decided row.

Why each call gets its own cancellation: the SDK cancels a handler when its client cancels
the request or goes away. The pipeline would then be interrupted between steps, leaving a
writer's row ``running`` forever; instead the handler sets the call's own cancellation and
waits (bounded) for the pipeline to record ``tool.cancelled.run_cancelled`` on the row. A
per-call cancellation, not the run's, so one cancelled request leaves the session usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import anyio
import attrs
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolhost import Outcome, OutcomeStatus, ToolFailure
from toolhost._composition import (
    ApprovalNotRecorded,
    CancellationEvent,
    Host,
    InvocationNotFound,
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    InvocationStateError,
    PolicyAction,
    Registered,
    Run,
    escaped,
    get_logger,
    parent_context,
    trace_step,
)
from toolhost._composition import host_reasons as core_messages
from toolhost._mcp.approvals import (
    ELICITATION_KEY,
    Decision,
    approval_request,
    arguments_shown,
    decision_of,
    find_row,
    supports_form_elicitation,
)
from toolhost._mcp.config import ServeConfig
from toolhost._mcp.resources import RESOURCE_NOT_FOUND
from toolhost._mcp.results import (
    UNSERVED_REASON_CODES,
    approve_command,
    host_failure_result,
    protocol_error_for,
    to_call_tool_result,
)
from toolhost._mcp.sessions import QuestionTimer, Session, WordedCall
from toolhost._mcp.words import WORDS_KEY, WORDS_STATE_PREFIX, with_words, words_of, words_request

__all__ = ["CANCEL_GRACE_S", "ToolCalls"]

#: How long a cancelled call may take to record its cancellation before the handler gives up.
CANCEL_GRACE_S = 2.0

#: Outcomes that end a row: once handed back in a session, a replay never returns them again.
_FINAL = frozenset({OutcomeStatus.SUCCEEDED, OutcomeStatus.FAILED, OutcomeStatus.DENIED})
_T = TypeVar("_T")

Answer = types.CallToolResult | types.InputRequiredResult


class ToolCalls:
    """The ``tools/call`` logic for one server: its host, roster and configuration."""

    def __init__(self, host: Host, roster: Mapping[str, Registered], config: ServeConfig) -> None:
        self._config = config
        self._host = host
        self.serve(roster)
        self._telemetry = host.telemetry

    def serve(self, roster: Mapping[str, Registered]) -> None:
        """Serve this roster from now on (the server's, or one the gateway added to)."""
        # Which served tools pause for approval is fixed for the life of each registration:
        # the policy is read once, at startup.
        self._gated = {
            name: r for name, r in roster.items()
            if self._host.decide(r).action is PolicyAction.REQUIRE_APPROVAL
        }
        # The tools whose arguments must be the person's own words (UserWords).
        self._wordy = {name: r for name, r in roster.items() if r.tool.user_words is not None}

    async def call(self, ctx: ServerRequestContext[Any, Any], session: Session,
                   params: types.CallToolRequestParams) -> Answer:
        """Answer one ``tools/call``. Raises MCPError (-32602) for a tool not served here,
        and ``_damaged_row_error`` for a row the call names or decides that holds no record.

        The whole request is the invocation's span (an approval asked within the call is
        its child), continuing the caller's trace (``_meta.traceparent``, else the HTTP
        request's ``traceparent`` header)."""
        tracing = self._telemetry.tracing if self._telemetry is not None else None
        try:
            if tracing is None or tracing.tracer() is None:
                return await self._call(ctx, session, params)
            headers = getattr(ctx.request, "headers", None)
            with tracing.request(params.name, parent_context(ctx.meta, headers)):
                return await self._call(ctx, session, params)
        except InvocationRecordDamaged as damaged:
            raise _damaged_row_error(damaged) from None
        except InvocationNotFound as gone:
            raise _gone_row_error(str(gone.args[0]) if gone.args else "") from None

    async def _call(self, ctx: ServerRequestContext[Any, Any], session: Session,
                    params: types.CallToolRequestParams) -> Answer:
        arguments: Any = params.arguments if params.arguments is not None else {}
        run = session.run
        answering = self._asked_row(ctx, session, params)
        if answering is not None:
            # A 2026-07-28 retry carrying the answer to the approval this session asked for:
            # that row, whatever the retry's arguments (the person's words already in it).
            if answering.state is InvocationState.AWAITING_APPROVAL:
                return await self._ask(ctx, session, run, self._gated[params.name], answering,
                                       params)
            # Decided meanwhile (at the CLI, or by another request): it answers what stands.
            return self._deliver(session, self._host.recorded(answering.id))
        registered = self._gated.get(params.name)
        wordy = self._wordy.get(params.name)
        worded = None
        if wordy is not None and run.user_turn is None:
            words = await self._words(ctx, session, run, wordy, registered, params, arguments)
            if not isinstance(words, _Worded):
                return words
            arguments, run, worded = words.arguments, words.run, words.model_call
        if registered is not None:
            return await self._gated_call(ctx, session, run, registered, params, arguments,
                                          worded=worded)
        return self._answer(await self._invoke(run, params.name, arguments))

    def _answer(self, outcome: Outcome) -> types.CallToolResult:
        """The result for an outcome; a tool not served here is the protocol's -32602
        instead. A paused call's text says what becomes of the run's files: kept when every
        run's workspace is the operator's directory (``TOOLHOST_MCP_WORKSPACE``)."""
        if outcome.failure is not None and outcome.failure.reason_code in UNSERVED_REASON_CODES:
            raise protocol_error_for(outcome)
        return to_call_tool_result(outcome, workspace_kept=self._config.workspace is not None)

    # ------------------------------------------------------------------ the plain path

    async def _invoke(self, run: Run, name: str, arguments: Any, *, hold: bool = False,
                      abandoned: Callable[[Outcome], None] | None = None) -> Outcome:
        """The call through the pipeline with this request's cancellation. ``abandoned``: told
        the outcome when this request was cancelled meanwhile (nobody is answered with it),
        once the pipeline has it, however long after."""
        with _request_run(run) as call_run:
            return await _cancellable(
                self._host.invoke(name, arguments, run=call_run, hold=hold),
                call_run.cancellation.cancel, abandoned=abandoned)

    def _asked_row(self, ctx: ServerRequestContext[Any, Any], session: Session,
                   params: types.CallToolRequestParams) -> InvocationRecord | None:
        """The row a 2026-07-28 retry answers: one this session put the approval question
        for, still out, taken back by the timeout or decided (never a row the client names
        otherwise), of this tool."""
        state = params.request_state
        if (ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or state is None
                or not session.asked_about(state) or params.name not in self._gated):
            return None
        record = self._host.row(str(state))
        return record if record.tool_name == params.name else None

    def _can_ask(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether this request's client can show its user a form (and may be asked)."""
        return self._config.elicitation and supports_form_elicitation(
            ctx.session.client_capabilities)

    # ------------------------------------------------------------------ the person's words

    async def _words(self, ctx: ServerRequestContext[Any, Any], session: Session, run: Run,
                     wordy: Registered, registered: Registered | None,
                     params: types.CallToolRequestParams, arguments: Any) -> Answer | _Worded:
        """A call of a tool that needs the person's words, in a run without them (``wordy``;
        ``registered`` when it also asks for approval): its answer when it ends here, else
        the arguments and run it goes on with, the person's words in them when they gave
        some. Nobody is asked for words a call cannot use (D438): the pipeline refuses one
        its steps 1-4 refuse with its own reason, and denies one its policy cell denies."""
        unchanged = _Worded(arguments, run, None)
        admitted = self._admitted(run, params.name)
        if admitted is None:
            return unchanged
        try:
            # Prepared once: the repeat's lookup and the form's proposal both read it.
            prepared = self._host.prepare(wordy, arguments)
        except ToolFailure:  # the arguments fail the schema: refused at step 4 (invalid)
            return unchanged
        if self._host.decide(admitted).action is PolicyAction.DENY:
            return unchanged  # step 5 denies it, before the words' check (D446)
        model_call = (prepared.tool, prepared.version, prepared.digest)
        if registered is not None:
            # The same call repeated (as an answer left waiting tells the model to): the row
            # its words were recorded on, never the person asked again (D38).
            found = self._worded_row(session, model_call)
            if found is not None:
                return await self._answer_row(ctx, session, run, registered, found, params)
        try:
            asked = await self._ask_words(ctx, run, wordy, params, prepared.arguments,
                                          prepared.digest)
        except asyncio.CancelledError:
            await self._words_cancelled(run, params.name, arguments)
            raise
        if isinstance(asked, types.InputRequiredResult):
            return asked
        if isinstance(asked, _Refused):
            return self._answer(await self._host.refuse(run, params.name, arguments,
                                                        asked.reason))
        if asked is None:  # they cannot be asked here: the pipeline refuses it, needs_user
            return unchanged
        return _Worded(with_words(wordy, arguments, asked), attrs.evolve(run, user_turn=asked),
                       model_call)

    async def _ask_words(self, ctx: ServerRequestContext[Any, Any], run: Run,
                         registered: Registered, params: types.CallToolRequestParams,
                         proposed: Mapping[str, Any], digest: str) -> (
            str | _Refused | types.InputRequiredResult | None):
        """The person's text for a call of a tool that needs their words (``proposed``, and
        its ``digest``: the model's arguments, as step 4 prepares them); ``_Refused`` when
        they gave none, when the client went away, or when the run's deadline has passed;
        None when they cannot be asked. Still asked: a call its tool refuses (an unknown
        thread: only the body knows)."""
        try:
            # Step 8's check, ahead: the pipeline checks the words (step 4) before it.
            self._host.check_run_deadline(run)
        except ToolFailure as failure:
            return _Refused(failure)
        if not self._can_ask(ctx):
            return None
        log = get_logger(tool=registered.spec.name)
        state = f"{WORDS_STATE_PREFIX}{digest}"
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            responses = params.input_responses or {}
            if params.request_state == state and WORDS_KEY in responses:
                answer: Any = responses[WORDS_KEY]
            else:
                return types.InputRequiredResult(
                    input_requests={WORDS_KEY: words_request(registered, proposed)},
                    request_state=state)
        elif ctx.session.can_send_request:
            try:
                answer = await _unless_run_cancelled(ctx.session.send_request(
                    words_request(registered, proposed), types.ElicitResult,
                    request_read_timeout_seconds=self._config.elicitation_timeout_s,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id)), run)
            except _RunCancelled:
                # The server's drain is up (or the session ended) while the form is open:
                # nobody declined, so the call ends cancelled, answered before its stream
                # closes.
                log.info("mcp.words.unanswered", error="run_cancelled")
                return _CANCELLED
            except (MCPError, ValidationError) as exc:
                log.info("mcp.words.unanswered", error=type(exc).__name__)
                # The client gone (its stdio closed) is no answer from the person: the call
                # ends as one its client cancelled (``_words_cancelled``), not declined.
                return _CANCELLED if _connection_closed(exc) else _DECLINED
        else:
            return None
        text = words_of(answer)
        log.info("mcp.words.answered", given=text is not None)
        return _DECLINED if text is None else text

    async def _words_cancelled(self, run: Run, name: str, arguments: Any) -> None:
        """A words call whose request was cancelled, or whose client went, while the person
        had the form open: no row exists yet, so it is recorded here, unrun, as any cancelled
        call is (``run_cancelled``: nobody declined), with the model's arguments and no user
        turn. Shielded, so the cancellation goes on once the row is written; the grace bounds
        the waits the write awaits (a thread, the group commit), not a write that blocks the
        loop itself, as every row write of ``serve`` does under another process's lock."""
        get_logger(tool=name).info("mcp.words.unanswered", error="CancelledError")
        with anyio.move_on_after(CANCEL_GRACE_S, shield=True):
            await self._host.refuse(run, name, arguments, _CANCELLED.reason)

    def _admitted(self, run: Run, name: str) -> Registered | None:
        """The registration the pipeline runs this call with, or None when it refuses the
        call before its words matter, whatever the person would say: a tool or version the
        run cannot resolve, one not enabled for it, a scope it lacks (steps 1-3, before the
        words' check at step 4). It then refuses with its own reason and detail."""
        try:
            return self._host.admit(run, name)
        except ToolFailure:
            return None

    def _deadline_passed(self, run: Run) -> bool:
        """Whether the run's deadline has passed (``steps.check_run_deadline``): nobody is
        asked about a call that could not run."""
        return run.past_deadline(self._host.deadline_in(0))

    def _worded_row(self, session: Session, model_call: WordedCall) -> InvocationRecord | None:
        """The row this session recorded with the person's words for the same model
        arguments, the newest not yet answered in this session (``find_row``, as
        ``_gated_call`` finds one). Only this session's own entries: another session's
        matching call never reaches the words in a row of theirs."""
        answered = session.answered
        ids = [i for i in session.worded.get(model_call, ()) if i not in answered]
        # An answered row is never found again (D38): forgotten here.
        if ids:
            session.worded[model_call] = ids
        else:
            session.worded.pop(model_call, None)
        rows = []
        for invocation_id in ids:
            try:
                record = self._host.row(invocation_id)
            except (InvocationNotFound, InvocationRecordDamaged):
                # Pruned, or changed behind the store's back (D415), meanwhile: passed over,
                # as the other calls' lookup (``rows_for``: ``list``) passes it over.
                continue
            if record.run_id == session.run.id:
                rows.append(record)
        return find_row(rows, answered)

    # ------------------------------------------------------------------ the approval path

    async def _gated_call(self, ctx: ServerRequestContext[Any, Any], session: Session,
                          run: Run, registered: Registered,
                          params: types.CallToolRequestParams, arguments: Any, *,
                          worded: WordedCall | None = None) -> Answer:
        """A call whose policy cell asks for approval. ``worded``: the model's own arguments
        when the person's words replaced them; the row is remembered under them, so the same
        call repeated finds it before the person is asked again (``_worded_row``)."""
        record = None
        try:
            # Never replay past a refusal: a call the pipeline refuses at step 3 (scopes) or
            # step 4 (arguments) has no row to match, and goes through invoke to be refused.
            self._host.check_scopes(run.principal, registered)
            prepared = self._host.prepare(registered, arguments)
        except ToolFailure:
            prepared = None
        if prepared is not None:
            # A row answered ``running`` is handed back once more, to the call it told to
            # come back for it, even when another request already had its final outcome.
            record = find_row(self._host.rows_for(run.id, prepared), session.answered)
        if record is None:
            # Asked within the call, the approval is not a pause: the run keeps its workspace
            # until the person answers (or does not).
            held = self._can_ask(ctx)

            def left_waiting(outcome: Outcome) -> None:
                # The request was cancelled before anyone was asked: its call is left
                # waiting, as one cancelled while the person decides is (the run pauses), and
                # the session still finds its row, never asking for the words again (D437).
                if outcome.paused and outcome.invocation_id is not None:
                    _remember_worded(session, worded, outcome.invocation_id)
                    if held:
                        self._host.pause(session.run)
                    _log_left_waiting(get_logger(invocation_id=outcome.invocation_id,
                                                 run_id=session.run.id, tool=params.name),
                                      outcome.invocation_id,
                                      prepared.digest if prepared is not None else None)

            outcome = await self._invoke(run, params.name, arguments, hold=held,
                                         abandoned=left_waiting)
            if not outcome.paused:
                return self._deliver(session, outcome)
            record = self._host.row(str(outcome.invocation_id))
            if held:
                session.held.add(record.id)
        _remember_worded(session, worded, record.id)
        return await self._answer_row(ctx, session, run, registered, record, params)

    async def _answer_row(self, ctx: ServerRequestContext[Any, Any], session: Session,
                          run: Run, registered: Registered, record: InvocationRecord,
                          params: types.CallToolRequestParams) -> Answer:
        """A call's row found or recorded: still pending, it is asked (again, if the client
        can be asked), unless the run's deadline has passed, when no answer could run it: it
        ends then, unrun (D433); decided, its recorded outcome is handed back."""
        if record.state is InvocationState.AWAITING_APPROVAL:
            return await self._ask(ctx, session, run, registered, record, params)
        return self._deliver(session, self._host.recorded(record.id))

    def _expired(self, session: Session, invocation_id: str, log: Any) -> types.CallToolResult:
        """A call still waiting in a run whose deadline has passed: no answer could run it, so
        nobody is asked and it is not left waiting; it ends unrun (D433, D439). A store that
        refuses the write is its outage, retryable, as for a decision (D403). Its question's
        timer ends with the final outcome (``_deliver``)."""
        try:
            outcome = self._host.expire(invocation_id)
        except Exception as exc:
            log.error("mcp.expire.not_recorded", exception=type(exc).__name__, error=str(exc))
            return host_failure_result(core_messages.RECORD_STORE, invocation_id, retryable=True)
        return self._deliver(session, outcome)

    def _deliver(self, session: Session, outcome: Outcome, *,
                 approved_here: bool = False) -> types.CallToolResult:
        """Answer with an outcome; a final one is answered once per session (see approvals),
        and once more to each call answered ``running`` for it. ``approved_here``: this
        request approved the call itself (it ran it, or found it already running), so its
        answer is not one a ``running`` answer promised, and a ``running`` answer to it is
        owed to one more request."""
        invocation_id = outcome.invocation_id
        if invocation_id is not None and outcome.status in _FINAL:
            session.delivered.add(invocation_id)
            session.held.discard(invocation_id)
            # Its question, if any, is over: no answer riding a retry decides it now.
            session.settle(invocation_id)
            self._forget_question(session, invocation_id)
            if not approved_here:
                session.collected(invocation_id)
        elif invocation_id is not None and outcome.status is OutcomeStatus.RUNNING:
            session.told_running(invocation_id, answered_here=approved_here)
        return self._answer(outcome)

    async def _ask(self, ctx: ServerRequestContext[Any, Any], session: Session, run: Run,
                   registered: Registered, record: InvocationRecord,
                   params: types.CallToolRequestParams) -> Answer:
        log = get_logger(invocation_id=record.id, run_id=record.run_id, tool=record.tool_name)
        # Past the run's deadline nobody is asked about it; an answer already given is still
        # recorded as given (an approval then ends the row run_deadline_passed, D222).
        answered = (params.request_state == record.id
                    and ELICITATION_KEY in (params.input_responses or {}))
        if not answered and self._deadline_passed(run):
            return self._expired(session, record.id, log)
        # Arguments too long to show whole are never asked about here (D466): the person
        # reads them with `toolhost show` or in the inbox, and approves there.
        can_ask = self._can_ask(ctx)
        if can_ask and arguments_shown(record.arguments) is None:
            log.info("mcp.approval.not_asked", why="arguments_too_long_to_show")
            can_ask = False
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # 2026-07-28: no server-initiated requests; the question rides the result and the
            # client retries the call with the answer. An answer counts only for a question
            # this session asked (request_state names that row) and only while the client may
            # be asked at all: never a row the client names, nor an approval with elicitation
            # off. An answer after the timeout decides the row as a timely one would; the run
            # has paused meanwhile, so an approved call runs in its next workspace.
            # An answer for a question another answer is deciding right now is decided too:
            # the row's compare-and-set lets one decision land, the other reads what stands.
            responses = params.input_responses or {}
            if (can_ask and params.request_state == record.id
                    and session.asked_about(record.id) and ELICITATION_KEY in responses):
                session.settle(record.id)
                self._forget_question(session, record.id)
                decision = decision_of(responses[ELICITATION_KEY])
            elif can_ask:
                session.ask(record.id)
                self._pause_if_unanswered(session, record, log)
                # Off the loop: a describer reads its plugin's own store.
                described = await asyncio.to_thread(self._host.describe_call, record)
                return types.InputRequiredResult(
                    input_requests={ELICITATION_KEY: approval_request(
                        record, registered, described)},
                    request_state=record.id,
                )
            else:
                decision = Decision.UNDECIDED
        elif can_ask and ctx.session.can_send_request:
            try:
                decision = await self._waiting(self._elicit(ctx, run, record, registered, log))
            except BaseException:
                # The request was cancelled (or the client went) while the person decided:
                # the call is left waiting, so the run pauses, and the pause is logged as
                # every call left waiting is (nobody is answered: the request is gone).
                self._pause_held(session, record.id)
                _log_left_waiting(log, record.id, record.argument_digest)
                raise
        else:
            decision = Decision.UNDECIDED
        approver = _approver(ctx)
        try:
            if decision is Decision.APPROVE:
                log.info("mcp.approval.accepted", approver=approver)
                # Within the call: it runs in the session's run (its workspace and deadline),
                # with this request's own cancellation.
                with _request_run(run) as call_run:
                    try:
                        outcome = await _cancellable(
                            self._host.approve(record.id, approver, run=call_run),
                            call_run.cancellation.cancel)
                    except asyncio.CancelledError:
                        self._forget_cancelled(session, record.id)
                        raise
                return self._deliver(session, outcome, approved_here=True)
            if decision is Decision.DENY:
                log.info("mcp.approval.declined", approver=approver)
                try:
                    denied = self._host.deny(record.id, approver, "declined in the MCP client")
                except (InvocationStateError, InvocationRecordDamaged, InvocationNotFound):
                    raise  # the row, not the store refusing a write: no retry ends it
                except Exception as exc:  # the store refused the denial: nothing changed
                    return self._decision_not_recorded(session, record.id, exc, log)
                return self._deliver(session, denied)
        except ApprovalNotRecorded as refused:
            return self._decision_not_recorded(session, record.id, refused, log)
        except InvocationStateError:
            # The operator decided first (approve/deny at the CLI); answer with what stands.
            return self._deliver(session, self._host.recorded(record.id))
        if self._deadline_passed(run):  # the question outlived the run: nothing can run it
            return self._expired(session, record.id, log)
        self._pause_held(session, record.id)  # left waiting: now the run pauses
        _log_left_waiting(log, record.id, record.argument_digest)
        return self._deliver(session, self._host.recorded(record.id))

    def _decision_not_recorded(self, session: Session, invocation_id: str, exc: Exception,
                               log: Any) -> types.CallToolResult:
        """The store refused the person's decision: nothing ran or changed, and the call still
        awaits approval, so it is left waiting as an undecided one is (the run pauses); the
        model reads the store's outage, retryable, and the same call again asks again (D403)."""
        log.error("mcp.approval.not_recorded", exception=type(exc).__name__, error=str(exc))
        session.undecide(invocation_id)  # undecided still: the same call asks again
        self._pause_held(session, invocation_id)
        return host_failure_result(core_messages.RECORD_STORE, invocation_id, retryable=True)

    def _forget_cancelled(self, session: Session, invocation_id: str) -> None:
        """An approved call its client cancelled while it ran: a row that recorded the
        cancellation is never replayed in this session. The client ended that call itself and
        knows it; an identical call after it is a new call, asked again (D371), not the
        cancellation handed back. A row that finished within the grace keeps its one replay
        (D38): its effect happened, and running it again would repeat it."""
        try:
            record = self._host.row(invocation_id)
        except Exception:  # the record away: the replay, if any, reads it later
            return
        if record.reason_code == core_messages.RUN_CANCELLED:
            session.delivered.add(invocation_id)
            session.held.discard(invocation_id)
            session.running.pop(invocation_id, None)  # not even to calls told it was running

    async def _waiting(self, asking: Awaitable[Decision]) -> Decision:
        """The person's answer, while the call counts as waiting for an approval (the
        ``toolhost_calls_awaiting_approval`` gauge) and the wait is a span of its own."""
        if self._telemetry is None:
            return await asking
        instruments = self._telemetry.instruments
        instruments.awaiting_changed(1)
        try:
            with trace_step("approval"):
                return await asking
        finally:
            instruments.awaiting_changed(-1)

    def _pause_held(self, session: Session, invocation_id: str) -> None:
        """A call recorded while the person was asked is left waiting: the run pauses (its
        workspace is discarded), once per call."""
        if invocation_id in session.held:
            session.held.discard(invocation_id)
            self._host.pause(session.run)

    def _pause_if_unanswered(self, session: Session, record: InvocationRecord,
                             log: Any) -> None:
        """A 2026-07-28 question is out until the client retries with the answer; one not
        answered within the elicitation timeout leaves its call waiting, as an unanswered
        pushed question does, and the run pauses then. Unlike a pushed question, the person
        may still answer it: the client's retry carries the answer whenever it is given. One
        timer a question: asking it again starts it over, a decision ends it, and it pauses
        the run only for a call still waiting (an operator may have decided it meanwhile)."""
        invocation_id, digest = record.id, record.argument_digest

        def expire() -> None:
            session.timers.pop(invocation_id, None)
            if not session.expire(invocation_id):  # answered, or asked again, meanwhile
                return
            try:
                waiting = self._host.row(invocation_id).state is InvocationState.AWAITING_APPROVAL
            except Exception:  # the record away: taken as still waiting, so the run pauses
                waiting = True
            if not waiting:
                session.held.discard(invocation_id)
                return
            if invocation_id in session.held:
                log.info("mcp.approval.unanswered", error="no retry with the answer")
            self._pause_held(session, invocation_id)
            _log_left_waiting(log, invocation_id, digest)

        self._forget_question(session, invocation_id)
        session.timers[invocation_id] = QuestionTimer(asyncio.get_running_loop().call_later(
            self._config.elicitation_timeout_s, expire), expire)

    @staticmethod
    def _forget_question(session: Session, invocation_id: str) -> None:
        """The question's timer, if one runs, stopped: it was asked again or decided."""
        timer = session.timers.pop(invocation_id, None)
        if timer is not None:
            timer.handle.cancel()

    async def _elicit(self, ctx: ServerRequestContext[Any, Any], run: Run,
                      record: InvocationRecord, registered: Registered, log: Any) -> Decision:
        """Push the question (2025 sessions). No answer in time, or an error, is UNDECIDED.
        The wait ends at the run's deadline too: the answer could not be acted on after it."""
        timeout = self._config.elicitation_timeout_s
        if run.deadline is not None:
            timeout = max(0.0, min(timeout, run.deadline - self._host.deadline_in(0)))
        described = await asyncio.to_thread(self._host.describe_call, record)
        try:
            answer = await _unless_run_cancelled(ctx.session.send_request(
                approval_request(record, registered, described), types.ElicitResult,
                request_read_timeout_seconds=timeout,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            ), run)
        except _RunCancelled:
            # The server's drain is up (or the session ended) while the person decides: the
            # call is left waiting like any whose request is cancelled then, and answered so
            # (its id, `toolhost approve ID`) while its stream is still open.
            log.info("mcp.approval.unanswered", error="run_cancelled")
            return Decision.UNDECIDED
        except (MCPError, ValidationError) as exc:
            log.info("mcp.approval.unanswered", error=type(exc).__name__)
            return Decision.UNDECIDED
        return decision_of(answer)


@attrs.frozen
class _Worded:
    """A words call going on to the pipeline: its arguments and run (the person's words in
    both, when they gave some), and the model's own call (``WordedCall``) its row is
    remembered under, when their words replaced the model's."""

    arguments: Any
    run: Run
    model_call: WordedCall | None


@attrs.frozen
class _Refused:
    """A words call ended without the person's words, with this host reason or step's
    failure (recorded by ``Host.refuse``, unrun)."""

    reason: str | ToolFailure


#: The person was asked for their words and gave none.
_DECLINED = _Refused(core_messages.USER_DECLINED)
#: The request ended (cancelled, or its client gone) while the person had the form open:
#: nobody declined, so it ends as any cancelled call does.
_CANCELLED = _Refused(core_messages.RUN_CANCELLED)


class _RunCancelled(Exception):
    """The session's run was cancelled while a question to the person was out."""


async def _unless_run_cancelled(asking: Awaitable[_T], run: Run) -> _T:
    """The answer to a question put to the person, unless the session's run is cancelled
    first: a stopping server whose drain time is up (``Sessions.cancel``), or the session
    ending. Then the question is withdrawn (its wait cancelled) and ``_RunCancelled`` raised,
    so the call still answers before uvicorn closes its stream (D238, D240); before, it
    waited out the elicitation timeout and was cut off unanswered. The question is awaited in
    this request's own task, so its end (an answer, the client's error) and this request's
    own cancellation reach it in the order they always did."""
    loop = asyncio.get_running_loop()
    with anyio.CancelScope() as scope:
        def stop() -> None:  # any thread may cancel a run
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits now
                loop.call_soon_threadsafe(scope.cancel)

        remove = run.cancellation.add_callback(stop)
        try:
            return await asking
        finally:
            remove()
    raise _RunCancelled  # reached only when ``stop`` cancelled the scope


def _log_left_waiting(log: Any, invocation_id: str, digest: str | None) -> None:
    """The pause of a call left waiting, on stderr (mcp.md "Approvals" step 2): whenever a
    call is left waiting, also when nobody is answered (its request cancelled, its client
    gone), so the operator's log names every call that waits for them."""
    log.warning("mcp.awaiting_approval", approve=approve_command(invocation_id), digest=digest)


def _connection_closed(exc: Exception) -> bool:
    """Whether the question failed because the client's connection closed (the SDK's
    ``CONNECTION_CLOSED``, which it answers every request still out with)."""
    return (isinstance(exc, MCPError) and exc.error.code == types.CONNECTION_CLOSED
            and exc.error.message == "Connection closed")


@contextlib.contextmanager
def _request_run(run: Run) -> Iterator[Run]:
    """The session's run for one request: its own cancellation, set when the request is
    cancelled and when the session's run is (a stopping server's)."""
    call = CancellationEvent()
    remove = run.cancellation.add_callback(call.cancel)
    try:
        yield attrs.evolve(run, cancellation=call)
    finally:
        remove()


def _remember_worded(session: Session, worded: WordedCall | None, invocation_id: str) -> None:
    """The row recorded with the person's words, under the model's own call (``worded``),
    so the same call repeated finds it (``ToolCalls._worded_row``)."""
    if worded is not None and invocation_id not in session.worded.get(worded, ()):
        session.worded.setdefault(worded, []).append(invocation_id)


def _damaged_row_error(damaged: InvocationRecordDamaged) -> MCPError:
    """The answer to a call whose row was changed behind the store's back (D415): the line
    the CLI prints for it (toolhost's own words, the id escaped: never the reader's error),
    with the code for a record not found, as the CLI exits with it. The row holds no record
    to answer from; one line in the log says which, and no traceback."""
    get_logger(invocation_id=damaged.id).warning("mcp.call.record_damaged", field=damaged.field)
    return MCPError(code=RESOURCE_NOT_FOUND, message=str(damaged),
                    data={"invocationId": damaged.id, "field": damaged.field})


def _gone_row_error(invocation_id: str) -> MCPError:
    """The answer to a call whose row left the record while it was asked (deleted by hand,
    an older backup restored): toolhost never deletes one, so it is the record's state, not
    an outage a retry ends; the damaged row's code (D476), one log line, no traceback."""
    get_logger(invocation_id=invocation_id).warning("mcp.call.record_gone")
    return MCPError(code=RESOURCE_NOT_FOUND,
                    message=f"invocation {escaped(invocation_id)} is not in the record: its "
                    "row was removed outside toolhost",
                    data={"invocationId": invocation_id})


def _approver(ctx: ServerRequestContext[Any, Any]) -> str:
    """Who approved, as recorded on the row: the client's self-reported name."""
    client = ctx.session.client_params
    name = client.client_info.name if client is not None else None
    return f"mcp-client:{name}" if name else "mcp-client"


async def _cancellable(work: Awaitable[_T], cancel: Callable[[], None], *,
                       grace: float = CANCEL_GRACE_S,
                       abandoned: Callable[[_T], None] | None = None) -> _T:
    """Await ``work`` as its own task; if this handler is cancelled, call ``cancel`` and give
    the work ``grace`` seconds (shielded) to finish recording, then re-raise. ``abandoned``
    gets the work's result then, or when it comes later (the work goes on past the grace)."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieve)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait({task}, timeout=grace)
        if abandoned is not None:
            if task.done():
                _finished_with(task, abandoned)
            else:
                task.add_done_callback(functools.partial(_finished_with, then=abandoned))
        raise


def _finished_with(task: asyncio.Future[_T], then: Callable[[_T], None]) -> None:
    """``then`` told the task's result, when it has one (not cancelled, not failed)."""
    if not task.cancelled() and task.exception() is None:
        then(task.result())


def _retrieve(task: asyncio.Future[Any]) -> None:
    # A task abandoned by a cancelled handler is still observed, so asyncio never reports
    # "exception was never retrieved" on stderr at exit.
    if not task.cancelled():
        task.exception()
