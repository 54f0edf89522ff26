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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import attrs
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolhost._composition import Host
from toolhost._mcp.approvals import (
    ELICITATION_KEY,
    Decision,
    approval_request,
    decision_of,
    find_row,
    supports_form_elicitation,
)
from toolhost._mcp.config import ServeConfig
from toolhost._mcp.results import (
    UNSERVED_REASON_CODES,
    approve_command,
    protocol_error_for,
    to_call_tool_result,
)
from toolhost._mcp.sessions import Session
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.outcome import Outcome, OutcomeStatus, ToolFailure
from toolhost._model.runs import CancellationEvent, Run
from toolhost._pipeline.log import get_logger
from toolhost._pipeline.pipeline import InvocationStateError
from toolhost._pipeline.policy import PolicyAction
from toolhost._registration.refusals import Registered

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
        self._pipeline = host.pipeline
        self._config = config
        # Which served tools pause for approval is fixed for the life of the process: the
        # policy is read once, at startup.
        self._gated = {
            name: r for name, r in roster.items()
            if self._pipeline.decide(r).action is PolicyAction.REQUIRE_APPROVAL
        }

    async def call(self, ctx: ServerRequestContext[Any, Any], session: Session,
                   params: types.CallToolRequestParams) -> Answer:
        """Answer one ``tools/call``. Raises MCPError (-32602) for a tool not served here."""
        arguments: Any = params.arguments if params.arguments is not None else {}
        registered = self._gated.get(params.name)
        if registered is not None:
            return await self._gated_call(ctx, session, registered, params, arguments)
        return _answer(await self._invoke(session.run, params.name, arguments))

    # ------------------------------------------------------------------ the plain path

    async def _invoke(self, run: Run, name: str, arguments: Any) -> Outcome:
        call_run = attrs.evolve(run, cancellation=CancellationEvent())
        return await _cancellable(
            self._pipeline.invoke(call_run, name, arguments), call_run.cancellation.cancel)

    # ------------------------------------------------------------------ the approval path

    async def _gated_call(self, ctx: ServerRequestContext[Any, Any], session: Session,
                          registered: Registered, params: types.CallToolRequestParams,
                          arguments: Any) -> Answer:
        record = None
        try:
            # Never replay past a refusal: a call the pipeline refuses at step 3 (scopes) or
            # step 4 (arguments) has no row to match, and goes through invoke to be refused.
            self._pipeline.check_scopes(session.run.principal, registered)
            prepared = self._pipeline.prepare(registered, arguments)
        except ToolFailure:
            prepared = None
        if prepared is not None:
            record = find_row(self._pipeline.rows_for(session.run.id, prepared), session.delivered)
        if record is None:
            outcome = await self._invoke(session.run, params.name, arguments)
            if not outcome.paused:
                return self._deliver(session, outcome)
            record = self._pipeline.row(str(outcome.invocation_id))
        if record.state is InvocationState.AWAITING_APPROVAL:
            return await self._ask(ctx, session, registered, record, params)
        return self._deliver(session, self._pipeline.recorded(record.id))

    def _deliver(self, session: Session, outcome: Outcome) -> types.CallToolResult:
        """Answer with an outcome; a final one is answered once per session (see approvals)."""
        if outcome.invocation_id is not None and outcome.status in _FINAL:
            session.delivered.add(outcome.invocation_id)
        return _answer(outcome)

    async def _ask(self, ctx: ServerRequestContext[Any, Any], session: Session,
                   registered: Registered, record: InvocationRecord,
                   params: types.CallToolRequestParams) -> Answer:
        log = get_logger(invocation_id=record.id, run_id=record.run_id, tool=record.tool_name)
        capabilities = ctx.session.client_capabilities
        can_ask = self._config.elicitation and supports_form_elicitation(capabilities)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # 2026-07-28: no server-initiated requests; the question rides the result and the
            # client retries the call with the answer. request_state binds the answer to the
            # row found by digest in this session's run, never to a row the client names.
            responses = params.input_responses or {}
            if params.request_state == record.id and ELICITATION_KEY in responses:
                decision = decision_of(responses[ELICITATION_KEY])
            elif can_ask:
                return types.InputRequiredResult(
                    input_requests={ELICITATION_KEY: approval_request(record, registered)},
                    request_state=record.id,
                )
            else:
                decision = Decision.UNDECIDED
        elif can_ask and ctx.session.can_send_request:
            decision = await self._elicit(ctx, record, registered, log)
        else:
            decision = Decision.UNDECIDED
        approver = _approver(ctx)
        try:
            if decision is Decision.APPROVE:
                log.info("mcp.approval.accepted", approver=approver)
                cancellation = CancellationEvent()
                outcome = await _cancellable(
                    self._pipeline.approve(record.id, approver, cancellation=cancellation),
                    cancellation.cancel)
                return self._deliver(session, outcome)
            if decision is Decision.DENY:
                log.info("mcp.approval.declined", approver=approver)
                return self._deliver(session, self._pipeline.deny(
                    record.id, approver, "declined in the MCP client"))
        except InvocationStateError:
            # The operator decided first (approve/deny at the CLI); answer with what stands.
            return self._deliver(session, self._pipeline.recorded(record.id))
        log.warning("mcp.awaiting_approval", approve=approve_command(record.id),
                    digest=record.argument_digest)
        return self._deliver(session, self._pipeline.recorded(record.id))

    async def _elicit(self, ctx: ServerRequestContext[Any, Any], record: InvocationRecord,
                      registered: Registered, log: Any) -> Decision:
        """Push the question (2025 sessions). No answer in time, or an error, is UNDECIDED."""
        try:
            answer = await ctx.session.send_request(
                approval_request(record, registered), types.ElicitResult,
                request_read_timeout_seconds=self._config.elicitation_timeout_s,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except (MCPError, ValidationError) as exc:
            log.info("mcp.approval.unanswered", error=type(exc).__name__)
            return Decision.UNDECIDED
        return decision_of(answer)


def _answer(outcome: Outcome) -> types.CallToolResult:
    """The result for an outcome; a tool not served here is the protocol's -32602 instead."""
    if outcome.failure is not None and outcome.failure.reason_code in UNSERVED_REASON_CODES:
        raise protocol_error_for(outcome)
    return to_call_tool_result(outcome)


def _approver(ctx: ServerRequestContext[Any, Any]) -> str:
    """Who approved, as recorded on the row: the client's self-reported name."""
    client = ctx.session.client_params
    name = client.client_info.name if client is not None else None
    return f"mcp-client:{name}" if name else "mcp-client"


async def _cancellable(work: Awaitable[_T], cancel: Callable[[], None], *,
                       grace: float = CANCEL_GRACE_S) -> _T:
    """Await ``work`` as its own task; if this handler is cancelled, call ``cancel`` and give
    the work ``grace`` seconds (shielded) to finish recording, then re-raise."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieve)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait({task}, timeout=grace)
        raise


def _retrieve(task: asyncio.Future[Any]) -> None:
    # A task abandoned by a cancelled handler is still observed, so asyncio never reports
    # "exception was never retrieved" on stderr at exit.
    if not task.cancelled():
        task.exception()
