"""The execution pipeline: every call runs through these thirteen steps, each a named call.

Numbered once, here, so "step N" means one thing in the code, docs/decisions.md and
docs/architecture.md:

 1 resolve (name, version)                  ``steps.resolve``
 2 enabled for this run                     ``steps.check_enabled``
 3 scopes                                   ``steps.check_scopes``
 4 validate arguments, defaults, digest;    ``steps.prepare``, ``steps.check_user_words``
   the person's words need a user turn
 5 policy decision; a deny cell denies      ``steps.decide_policy``, ``Pipeline._deny_by_policy``
 6 require approval: persist; unless the    ``Pipeline._pause``, ``Pipeline.pause``
   caller asks within the call (``hold``),
   pause: discard the run's workspace; past
   the run's deadline, end as step 8 does
 7 (resume) the tool is registered, policy  ``Approvals.resume`` (``approve``):
   still allows it, the run's deadline has  ``steps.bind_approval``
   not passed, the approval binds the       ``Approvals.denial`` (``deny``)
   digest (an operator's denial ends it)    (toolhost._pipeline.approvals)
 8 execute under min(timeout_s, run         ``steps.check_run_deadline``,
   deadline), cancellable; never once the   ``steps.build_tool``, ``steps.execute``
   run's deadline has passed
 9 WorkspaceEscape -> ToolValidationError   ``steps.workspace_escape``
   WorkspaceUnavailable -> retryable failure ``steps.workspace_unavailable``
10 validate output against output_schema    ``steps.validate_output``
11 clamp trust to the lower of spec/result  ``steps.clamp_trust``
12 excerpt and artifactize, or too large    ``steps.limit_output_off_loop``
13 persist the outcome on the row           ``Pipeline._persist`` (and its three callers)

``Pipeline.invoke`` is the list of steps 1 to 6 and 8 to 13; ``Pipeline.approve`` resumes a
paused row at step 7 (``toolhost._pipeline.approvals``) and runs the same steps 8 to 13. The steps that need no store are
functions in ``toolhost._pipeline.steps``; the ones that write the row are methods here.

A step that ends the invocation raises ``ToolFailure`` (the public exception) with the reason
to render; the pipeline persists exactly one row per invocation and returns an ``Outcome``.
Callers outside the pipeline (the MCP server) use its public methods (``prepare``,
``check_scopes``, ``decide``, ``row``, ``rows_for``), never its steps' internals.

A row that goes ``running`` records its owner, this process (``InvocationStore.owner``).
``Pipeline.recover`` settles the ``running`` rows whose owner is gone (killed mid-call): the
rules are ``toolhost._pipeline.recovery``'s. Approvals and recovery take rows to ``running``
outside ``invoke`` and run them through the same steps 8 to 13 (``run_resumed``).

Every row write of a call (step 13's, a writing call's ``running`` row, a refusal's, a
pause's) waits for its commit; while other calls are in flight their writes are committed
together, one transaction a pass of the loop (``toolhost._pipeline.group_commit``), and a call
alone writes at once. A call cancelled while its write is queued still has it written: a
``running`` row then ends failed (``tool.cancelled.run_cancelled``) without the body running,
and the caller is told CancelledError; an outcome's row is answered as written.

The invocation store failing (a database that became unwritable) never escapes ``invoke``:
before anything ran, the call ends ``tool.upstream_unavailable.record_store`` (nothing
recorded, nothing changed, retryable); after a writing call ran, the result that could not be
recorded ends it ``tool.internal.interrupted``, and the row is finished as such if the store
takes that write, else left ``running`` for ``recover`` once this process is gone.

Nor does anything a tool body raises: a BaseException that is not an Exception (``sys.exit``
in a library it wraps, a library's own unwinding) ends the call ``tool.internal.unexpected``
like any other exception. A KeyboardInterrupt on the main thread, which may be the operator's
Ctrl-C, alone goes on, once the call's row is finished (``steps.Interrupted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from toolhost._model import host_reasons as core_messages
from toolhost._model.context import (
    Principal,
    ToolCallable,
    ToolExecutionContext,
    no_progress,
)
from toolhost._model.digest import canonical_json
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.nesting import nests_deeper
from toolhost._model.outcome import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    ToolFailureKind,
    failure_kind_of,
)
from toolhost._model.runs import CancellationEvent, Run, ToolCall
from toolhost._model.settings import StoreUnavailable
from toolhost._model.spec import Idempotency, Trust
from toolhost._model.workspace import (
    NO_WORKSPACE,
    CallEnded,
    CallScope,
    WorkspaceEscape,
    WorkspaceUnavailable,
    call_workspace,
    run_check,
)
from toolhost._pipeline import progress, steps
from toolhost._pipeline.approvals import Approvals, Resumed
from toolhost._pipeline.artifacts import CallArtifactWriter, RunArtifactWriter
from toolhost._pipeline.execution import abandoned
from toolhost._pipeline.group_commit import GroupCommit, WriteCancelled
from toolhost._pipeline.log import get_logger
from toolhost._pipeline.policy import Policy, PolicyAction, PolicyDecision
from toolhost._pipeline.recovery import Recovered, Recovery
from toolhost._pipeline.telemetry import Telemetry
from toolhost._pipeline.tracing import step as trace_step
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._ports.invocations import InvocationStore
from toolhost._ports.tool_artifacts import ArtifactWriter
from toolhost._ports.workspace import Workspace
from toolhost._registration.refusals import Registered
from toolhost._registration.registry import Registry

__all__ = ["Pipeline"]

#: What ``Pipeline.observed`` hands back: an ``Outcome``, or a ``Resumed``.
_R = TypeVar("_R", Outcome, Resumed)
#: A step nobody traces.
_NO_STEP = contextlib.nullcontext()


_STATUS = {
    InvocationState.AWAITING_APPROVAL: OutcomeStatus.AWAITING_APPROVAL,
    InvocationState.APPROVED: OutcomeStatus.RUNNING,
    InvocationState.RUNNING: OutcomeStatus.RUNNING,
    InvocationState.DENIED: OutcomeStatus.DENIED,
    InvocationState.SUCCEEDED: OutcomeStatus.SUCCEEDED,
    InvocationState.FAILED: OutcomeStatus.FAILED,
}

#: What an outcome of these states reads, whatever its row holds: one table, not one a call.
_STATUS_TEXT = {
    OutcomeStatus.AWAITING_APPROVAL: core_messages.AWAITING_APPROVAL_TEXT,
    OutcomeStatus.DENIED: core_messages.DENIED_TEXT,
    OutcomeStatus.RUNNING: core_messages.RUNNING_TEXT,
}
#: A row's ``output_trust`` text to its member, without the enum's own lookup (anything else
#: still goes to ``Trust(...)``, which raises as it did).
_TRUST_OF = {trust.value: trust for trust in Trust}


class Pipeline:
    """Runs invocations against one registry, message table, policy and pair of stores."""

    def __init__(
        self,
        *,
        registry: Registry,
        messages: Mapping[str, str],
        build: Callable[[Registered], ToolCallable],
        policy: Policy,
        invocations: InvocationStore,
        artifacts: ArtifactStore,
        clock: Clock,
        new_id: Callable[[], str],
        monotonic: Callable[[], float],
        workspace_for: Callable[[InvocationRecord], Any] | None = None,
        telemetry: Telemetry | None = None,
        withdrawn: Callable[[str], ToolFailure | None] | None = None,
    ) -> None:
        self.registry = registry
        #: What a registered tool taken out of service since fails every call with (a
        #: gateway tool its upstream changed), or None while it serves (D452).
        self._withdrawn = withdrawn
        #: Spans and metrics of its calls (``toolhost._pipeline.telemetry``); None: neither.
        self.telemetry = telemetry
        self.messages = messages
        self.policy = policy
        self.invocations = invocations
        self.artifacts = artifacts
        self.clock = clock
        self._build = build
        self._workspace_for = workspace_for
        # Ids and monotonic time come from the composition root (the system clock adapter),
        # the one place that reads ambient state.
        self._new_id = new_id
        self._monotonic = monotonic
        # Workspaces in use by an executing call, and whether a pause asked to discard them:
        # id(workspace) -> [calls executing, discard pending, the workspace].
        self._busy: dict[int, list[Any]] = {}
        self._busy_lock = threading.Lock()
        #: Concurrent calls' row writes, committed together (group_commit.py).
        self._commits = GroupCommit(lambda: self.invocations)
        #: Step 7, an operator's answer (approvals.py), and the rows of processes that are
        #: gone (recovery.py): each runs its calls' steps 8 to 13 here (``run_resumed``).
        self.approvals = Approvals(self)
        self.recovery = Recovery(self)

    def close(self) -> None:
        """Close both stores' connections."""
        for store in (self.invocations, self.artifacts):
            close = getattr(store, "close", None)
            if close is not None:
                close()

    # ------------------------------------------------------------------ one call

    async def invoke(
        self, run: Run, name: str, arguments: Any, *, version: str | None = None,
        hold: bool = False,
    ) -> Outcome:
        """One call through the thirteen steps: exactly one row, and its ``Outcome``.

        :param hold: the caller will ask for the approval within the call (an MCP client's
            form): a call that needs one is recorded ``awaiting_approval`` and the run is not
            paused. The caller then ``approve``s it with the run, ``deny``s it, or ``pause``s
            the run (no answer): an approval answered within the call is not a pause.
        """
        self._commits.enter()
        try:
            return await self.observed(name, run.id, arguments,
                                        self._invoke(run, name, arguments, version, hold))
        finally:
            self._commits.leave()

    async def observed(self, name: str, run_id: str, arguments: Any,
                        work: Coroutine[Any, Any, _R]) -> _R:
        """``work`` (an invocation, or an approval's resumption) inside its span, and its
        outcome counted (a resumption's only when it acted on the row)."""
        telemetry = self.telemetry
        if telemetry is None:
            return await work
        tracing = telemetry.tracing
        call = tracing.begin(name, run_id, arguments) if tracing is not None else None
        started = self._monotonic()
        try:
            result = await work
        except BaseException as exc:
            if tracing is not None:
                tracing.end(call, None, exc)
            raise
        outcome = result.outcome if isinstance(result, Resumed) else result
        if not isinstance(result, Resumed) or result.acted:
            telemetry.instruments.call_ended(outcome, self._monotonic() - started)
        if tracing is not None:
            tracing.end(call, outcome)
        return result

    def _step(self, name: str) -> Any:
        """A step's span (``tracing.STEPS``), or a no-op when nothing is traced."""
        telemetry = self.telemetry
        if telemetry is None or telemetry.tracing is None:
            return _NO_STEP
        return trace_step(name)

    async def _invoke(self, run: Run, name: str, arguments: Any, version: str | None,
                      hold: bool = False) -> Outcome:
        invocation_id = self._new_id()
        # As a refusal's detail shows a name: a registered tool's is itself, a caller's
        # megabyte is not a megabyte of every line of the call.
        log = get_logger(invocation_id=invocation_id, run_id=run.id, tool=steps.shown(name))
        created = self.clock.now()
        registered: Registered | None = None
        try:
            with self._step("validate"):
                registered = steps.resolve(self.registry, name,  # 1
                                           version or run.pins.get(name))
                log.debug("pipeline.resolve", step=1, version=registered.spec.version)
                steps.check_enabled(run, registered)  # 2
                log.debug("pipeline.enabled", step=2)
                steps.check_scopes(run.principal, registered)  # 3
                self._check_in_service(registered)  # 3
                log.debug("pipeline.scopes", step=3)
                prepared = steps.prepare(registered, arguments)  # 4
                log.debug("pipeline.validate", step=4)
        except ToolFailure as failure:
            return await self._persist_refusal(  # 13
                run, invocation_id, name, registered, arguments, created, failure, log)
        except Exception as exc:  # a fault of the host's or a validator's: still one row (D17)
            return await self._persist_refusal(  # 13
                run, invocation_id, name, registered, arguments, created,
                steps.unexpected(exc, registered), log)
        with self._step("policy"):
            decision = steps.decide_policy(self.policy, registered)  # 5
        log.debug("pipeline.policy", step=5, action=decision.action.value, rule=decision.rule)
        if decision.action is PolicyAction.DENY:
            return await self._deny_by_policy(  # 5
                _running_record(invocation_id, run, prepared, decision, created), decision, log)
        try:
            # Step 4's check of the person's words, once a deny cell has had its say: a call
            # the policy denies is denied, never sent to ask the person for words (D446).
            steps.check_user_words(run, registered)  # 4
        except ToolFailure as failure:
            return await self._persist_refusal(  # 13
                run, invocation_id, name, registered, arguments, created, failure, log)
        # The person's words go on the row only for a tool that takes them (to run with,
        # wherever it is approved); nobody else's turn is recorded.
        user_turn = run.user_turn if registered.tool.user_words is not None else None
        if decision.action is PolicyAction.REQUIRE_APPROVAL:
            record = _running_record(invocation_id, run, prepared, decision, created,
                                     user_turn=user_turn)
            try:
                # Not paused past the run's deadline: no approval could run it then (D222).
                steps.check_run_deadline(run, self._monotonic())  # 8, before 6
            except ToolFailure as failure:
                return await self.persist_failure(  # 13
                    attrs.evolve(record, started_at=None), failure, log, inserted=False)
            return await self._pause(run, record, log, hold=hold)  # 6
        # A call that changes anything is recorded as running before it runs, so a crash
        # mid-call leaves evidence (and, in ``owner``, whose it was); a read-only call's row
        # is written once, at step 13.
        record = _running_record(invocation_id, run, prepared, decision, created,
                                 owner=self.invocations.owner(), user_turn=user_turn)
        inserted = registered.spec.idempotency is not Idempotency.READ_ONLY
        if inserted:
            try:
                with self._step("record"):
                    await self._commits.write(functools.partial(self.invocations.insert, record))
            except WriteCancelled as cancelled:
                await self._cancelled_before_running(record, cancelled, log)
                raise
            except Exception as exc:
                return self._not_recorded(record, exc, log)
        return await self._execute_and_persist(run, registered, record, log,  # 8 to 13
                                               inserted=inserted)

    async def _deny_by_policy(self, record: InvocationRecord, decision: PolicyDecision,
                              log: Any) -> Outcome:
        """Step 5's deny cell: the row ends ``denied``, a decision rendered, not a result."""
        created = record.created_at
        denied = attrs.evolve(record, state=InvocationState.DENIED, decided_at=created,
                              finished_at=created, started_at=None)
        try:
            await self._write(functools.partial(self.invocations.insert, denied))
        except Exception as exc:
            return self._not_recorded(record, exc, log)
        log.info("pipeline.denied", step=5, rule=decision.rule)
        return self.outcome_of(denied)

    async def _pause(self, run: Run, record: InvocationRecord, log: Any, *,
                     hold: bool = False) -> Outcome:
        """Step 6: a pause, not a result. The row is durable, so it survives a restart.

        Unless the caller ``hold``s it (it asks within the call), the run pauses here
        (``pause``).
        """
        # The operator's directory goes on the row: an approval after the run has ended
        # (its command, or its session, is gone) runs the call there, not in an empty one.
        recorded = getattr(run.workspace, "recorded_directory", None)
        paused = attrs.evolve(record, state=InvocationState.AWAITING_APPROVAL, started_at=None,
                              operator_directory=recorded() if recorded is not None else None)
        try:
            await self._write(functools.partial(self.invocations.insert, paused))
        except Exception as exc:
            return self._not_recorded(record, exc, log)
        log.info("pipeline.awaiting_approval", step=6, digest=record.argument_digest,
                 asked=hold)
        if not hold:
            self.pause(run)
        return self.outcome_of(paused)

    def pause(self, run: Run) -> None:
        """The run pauses: a call was left waiting for an approval. Its workspace is a cache
        and is discarded: what the run does next (the approved call, wherever it runs, and
        every later call) starts from an empty one, which is then the run's. A workspace the
        host made is removed; an operator's directory (``--workspace DIR``) is only closed,
        never deleted, so its files stay. The workspace stops being the run's at once
        (``pause`` on the run's workspace), so nothing else starts in it; while another call
        of the run is still executing in it here, letting it go waits for that call to end."""
        pause = getattr(run.workspace, "pause", None)
        if pause is not None:
            pause()
        self._discard_when_idle(run.workspace, get_logger(run_id=run.id))

    async def _execute_and_persist(
        self, run: Run, registered: Registered, record: InvocationRecord, log: Any,
        *, inserted: bool = True,
    ) -> Outcome:
        """Steps 8 to 13 for a ``running`` record (already a row unless ``inserted`` is False)."""
        self._enter_workspace(run.workspace)
        try:
            return await self._execute_and_persist_in(run, registered, record, log,
                                                      inserted=inserted)
        finally:
            self._leave_workspace(run.workspace, log)

    def context_for(
        self, run: Run, *, deadline: float, cancellation: CancellationEvent
    ) -> ToolExecutionContext:
        """What a call of ``run`` receives: the run's workspace, an artifact writer bound to
        the run (and its conversation and principal), this deadline and cancellation, and a
        progress reporter when the caller listens (``progress.reporting``). A call the
        pipeline runs has both handles as views that stop working once it has ended
        (``CallWorkspace``, ``CallArtifactWriter``); this one, made to call a body directly
        (the testing kit's), has no such end."""
        return self._context(run, deadline, cancellation, self._writer_for(run),
                             run.workspace if run.workspace is not None else NO_WORKSPACE)

    def _writer_for(self, run: Run) -> RunArtifactWriter:
        # It publishes nothing as the run's once the run has ended (D529).
        return RunArtifactWriter(self.artifacts, run.id, self.clock, run.conversation_id,
                                 principal_id=run.principal.id, live=run_check(run.workspace))

    def _context(self, run: Run, deadline: float, cancellation: CancellationEvent,
                 artifacts: ArtifactWriter, workspace: Workspace) -> ToolExecutionContext:
        reporter = progress.reporter_for(self._monotonic, run_id=run.id)
        return ToolExecutionContext(
            run_id=run.id, principal=run.principal, workspace=workspace, artifacts=artifacts,
            deadline=deadline, cancellation=cancellation,
            conversation_id=run.conversation_id, user_turn=run.user_turn,
            reporter=no_progress if reporter is None else reporter,
        )

    async def _execute_and_persist_in(
        self, run: Run, registered: Registered, record: InvocationRecord, log: Any,
        *, inserted: bool,
    ) -> Outcome:
        # Each call has its own cancellation: set when the run's is, and at its deadline.
        call = CancellationEvent()
        now = self._monotonic()
        # The body's workspace and writer work until its call has ended (``scope.end``).
        scope = CallScope()
        writer = self._writer_for(run)
        context = self._context(
            run, steps.call_deadline(registered, run.deadline, now), call,
            CallArtifactWriter(writer, scope),
            NO_WORKSPACE if run.workspace is None else call_workspace(run.workspace, scope))
        try:
            steps.check_run_deadline(run, now)  # 8: the body never starts past it
            tool = steps.build_tool(self._build, registered)  # 8
            try:
                with self._step("execute"):
                    try:
                        raw = await steps.execute(registered, tool, record.arguments, context,
                                                  call, run,
                                                  context.deadline - self._monotonic(),
                                                  self._monotonic)  # 8
                    finally:
                        # Its outcome is the call's now: what it (or a thread it started)
                        # writes or publishes after this is refused.
                        scope.end()
            except WorkspaceEscape as escape:
                raise steps.workspace_escape(escape) from None  # 9
            except CallEnded as stale:
                # An ended call's handle (a context the body kept from an earlier call): its
                # own bug, which no retry mends, not this call's workspace.
                raise steps.unexpected(stale, registered) from None
            except WorkspaceUnavailable as problem:
                raise steps.workspace_unavailable(problem) from None  # 9
            log.debug("pipeline.execute", step=8)
            output = steps.validate_output(registered, raw)  # 10
            log.debug("pipeline.output", step=10)
            trust = steps.clamp_trust(registered.spec.output_trust, output.output_trust)  # 11
            log.debug("pipeline.trust", step=11, trust=trust.value)
            with self._step("excerpt"):
                shaped = await steps.limit_output_off_loop(  # 12
                    registered, output, trust, writer, record.id)
            log.debug("pipeline.size", step=12, truncated=shaped.truncated)
        except steps.Interrupted as interrupted:
            # Perhaps the operator's Ctrl-C: it goes on, once the row is finished.
            await self.persist_failure(record, interrupted, log, inserted=inserted)  # 13
            raise interrupted.interrupt from None
        except ToolFailure as failure:
            return await self.persist_failure(record, failure, log, inserted=inserted)  # 13
        except Exception as exc:
            # A fault of the host's own after the tool ran (the artifact store's disk, say):
            # the row is still finished, never left running.
            return await self.persist_failure(record, steps.unexpected(exc, registered), log,
                                               inserted=inserted)
        attached = tuple(ref.to_json() for ref in writer.attached)
        return await self._persist_success(record, trust, shaped, log,  # 13
                                           inserted=inserted, attachments=attached)

    # ------------------------------------------------------------------ the run's workspace

    def _enter_workspace(self, workspace: Any) -> None:
        if workspace is None:
            return
        with self._busy_lock:
            entry = self._busy.setdefault(id(workspace), [0, False, workspace])
            entry[0] += 1
            if entry[0] == 1:
                # No other call of the run executes here: its next operation looks up the
                # run's workspace again (a process that paused it may find it resumed).
                refresh = getattr(workspace, "refresh", None)
                if refresh is not None:
                    refresh()

    def _leave_workspace(self, workspace: Any, log: Any) -> None:
        if workspace is None:
            return
        with self._busy_lock:
            entry = self._busy[id(workspace)]
            entry[0] -= 1
            if entry[0] == 0:
                del self._busy[id(workspace)]
                if entry[1]:
                    _discard(workspace, log)

    def _discard_when_idle(self, workspace: Any, log: Any) -> None:
        """Discard the workspace now, or when the last call executing in it ends: never under
        a call that is using it (its directory descriptor would close beneath it)."""
        if workspace is None:
            return
        with self._busy_lock:
            entry = self._busy.get(id(workspace))
            if entry is not None:
                entry[1] = True
            else:
                _discard(workspace, log)

    # ------------------------------------------------------------------ step 13: persist

    async def _persist_refusal(
        self, run: Run, invocation_id: str, name: str, registered: Registered | None,
        arguments: Any, created: Any, failure: ToolFailure, log: Any,
    ) -> Outcome:
        """Step 13 for a call a step from 1 to 4 refused: its one row, written ``failed``."""
        info = steps.render_failure(self.messages, failure)
        record = InvocationRecord(
            id=invocation_id, run_id=run.id, principal_id=run.principal.id,
            scopes=tuple(sorted(run.principal.scopes)), conversation_id=run.conversation_id,
            tool_name=registered.spec.name if registered else steps.recorded_name(name),
            tool_version=registered.spec.version if registered else None,
            arguments=_jsonable(arguments), argument_digest=None, state=InvocationState.FAILED,
            failure_kind=info.kind.value, reason_code=info.reason_code,
            retryable=info.retryable, failure_detail=steps.storable_detail(info.detail),
            created_at=created, finished_at=created,
        )
        try:
            await self._write(functools.partial(self.invocations.insert, record))
        except Exception as exc:
            outcome = self._not_recorded(record, exc, log)
        else:
            outcome = self.outcome_of(record)
        # Logged once the row is written: the log is the operator's, never the call's outcome.
        log.info("pipeline.failed", reason_code=info.reason_code, detail=dict(info.detail))
        return outcome

    async def _persist_success(
        self, record: InvocationRecord, trust: Trust, shaped: steps.Shaped, log: Any,
        *, inserted: bool = True, attachments: tuple[Mapping[str, Any], ...] = (),
    ) -> Outcome:
        fields = dict(
            result_structured=shaped.structured, result_content=shaped.content,
            output_trust=trust.value, artifact_refs=shaped.artifacts,
        )
        if attachments:
            fields["attachments"] = attachments
        outcome = await self._persist(record, InvocationState.SUCCEEDED, fields, log,
                                      inserted=inserted)
        log.info("pipeline.succeeded", step=13, truncated=shaped.truncated)  # after the row
        return outcome

    async def persist_failure(
        self, record: InvocationRecord, failure: ToolFailure, log: Any, *, inserted: bool = True,
    ) -> Outcome:
        info = steps.render_failure(self.messages, failure)
        detail = steps.storable_detail(info.detail)
        # Step 12's OUTPUT_TOO_LARGE keeps the partial output it artifactized.
        artifacts = failure.artifacts if isinstance(failure, steps.OutputTooLarge) else ()
        outcome = await self._persist(record, InvocationState.FAILED, dict(
            failure_kind=info.kind.value, reason_code=info.reason_code,
            retryable=info.retryable, failure_detail=detail,
            artifact_refs=artifacts,
        ), log, inserted=inserted)
        log.info("pipeline.failed", step=13, reason_code=info.reason_code,  # after the row
                 detail=detail)
        return outcome

    async def _persist(
        self, record: InvocationRecord, state: InvocationState, fields: Mapping[str, Any],
        log: Any, *, inserted: bool = True,
    ) -> Outcome:
        """The outcome lands on the row, once: only a ``running`` row this process still
        owns may finish (compare-and-set on its owner, as recovery's)."""
        final = _finished(record, state, self.clock.now(), fields)
        try:
            if not inserted:
                await self._write(functools.partial(self.invocations.insert, final))
            elif not await self._write(functools.partial(
                self.invocations.settle, record.id, from_owner=record.owner, to=state,
                finished_at=final.finished_at, **fields,
            )):
                return self._result_taken(final, log)
        except Exception as exc:
            if not inserted:  # a read: nothing changed, and nothing was recorded
                return self._not_recorded(record, exc, log)
            return self._result_not_recorded(final, exc, log)
        return self.outcome_of(final)

    async def _write(self, write: Callable[[], Any]) -> Any:
        """A row write that ends a call, group-committed with its neighbours': its result
        once committed. A caller cancelled while it waited is answered by the row as written,
        not told CancelledError about a row that says otherwise: the cancellation is taken
        back (as a body's own are), and the write's result returned (or its error raised)."""
        task = asyncio.current_task()
        # Several cancel() calls while the write waited arrive as one CancelledError: each is
        # taken back, or a TaskGroup or timeout later in this task would see one still pending.
        before = task.cancelling() if task is not None else 0
        try:
            with self._step("record"):
                return await self._commits.write(write)
        except WriteCancelled as cancelled:
            while task is not None and task.cancelling() > before:
                task.uncancel()
            return cancelled.value()

    async def _cancelled_before_running(self, record: InvocationRecord,
                                        cancelled: WriteCancelled, log: Any) -> None:
        """A writing call cancelled while its ``running`` row was queued: the row is written
        (or failed to be), the body must not run, and the row must not stay ``running``. It
        ends failed as a cancelled call's; the caller's cancellation then goes on."""
        try:
            cancelled.value()
        except Exception as exc:
            self._not_recorded(record, exc, log)  # nothing written: only the log says so
            return
        await self.persist_failure(record, ToolFailure(core_messages.RUN_CANCELLED), log)

    # ------------------------------------------------------------------ the store failing

    def _not_recorded(self, record: InvocationRecord, exc: Exception, log: Any) -> Outcome:
        """The store failed before anything ran (or for a read): no row, nothing changed, and
        the model reads RECORD_STORE, retryable. The operator reads the exception in the log.
        A ``StoreUnavailable`` (the record is damaged, or its file was deleted) waits on the
        operator, not on time: RECORD_UNUSABLE, not retryable, and the log says which (D534)."""
        log.error("pipeline.store_failed", exception=type(exc).__name__, error=str(exc),
                  recorded=False)
        if self.telemetry is not None:
            self.telemetry.instruments.store_failed("recorded")
        failed = attrs.evolve(
            record, state=InvocationState.FAILED, finished_at=self.clock.now(),
            failure_kind=ToolFailureKind.UPSTREAM_UNAVAILABLE.value,
            reason_code=(core_messages.RECORD_UNUSABLE if isinstance(exc, StoreUnavailable)
                         else core_messages.RECORD_STORE),
            retryable=not isinstance(exc, StoreUnavailable),
            failure_detail={"exception": type(exc).__name__, "error": str(exc)},
        )
        return attrs.evolve(self.outcome_of(failed), invocation_id=None)

    def _result_not_recorded(self, final: InvocationRecord, exc: Exception,
                             log: Any) -> Outcome:
        """A writing call ran, and its outcome could not be recorded: it may or may not have
        taken effect (INTERRUPTED). One more write tries to finish the row as such; if the
        store refuses that too, the row stays ``running``, owned by this process, and
        ``recover`` settles it once this process is gone."""
        detail = {"exception": type(exc).__name__, "error": str(exc),
                  "unrecorded_state": final.state.value}
        fields: dict[str, Any] = dict(
            failure_kind=ToolFailureKind.INTERNAL.value, reason_code=core_messages.INTERRUPTED,
            retryable=False, failure_detail=detail,
        )
        try:
            finished = self.invocations.settle(
                final.id, from_owner=final.owner, to=InvocationState.FAILED,
                finished_at=final.finished_at, **fields)
        except Exception:
            finished = False
        log.error("pipeline.store_failed", exception=type(exc).__name__, error=str(exc),
                  recorded=False, row="failed" if finished else "running")
        if self.telemetry is not None:
            self.telemetry.instruments.store_failed("result")
        interrupted = attrs.evolve(final, state=InvocationState.FAILED, result_structured=None,
                                   result_content=None, output_trust=None, artifact_refs=(),
                                   **fields)
        if not finished:
            self.recovery.settle_later(interrupted)
        return self.outcome_of(interrupted)

    def _result_taken(self, final: InvocationRecord, log: Any) -> Outcome:
        """A writing call ran, and meanwhile another process settled its row, having found
        this one gone (a server database's session cut off): the row is left as that process
        settled it, and this call is INTERRUPTED, its result recorded nowhere."""
        log.error("pipeline.row_taken", recorded=False, unrecorded_state=final.state.value)
        return self.outcome_of(attrs.evolve(
            final, state=InvocationState.FAILED, result_structured=None, result_content=None,
            output_trust=None, artifact_refs=(), failure_kind=ToolFailureKind.INTERNAL.value,
            reason_code=core_messages.INTERRUPTED, retryable=False,
            failure_detail={"unrecorded_state": final.state.value,
                            "row": "settled by another process"}))

    # ------------------------------------------------------------------ a step of calls

    async def invoke_step(self, run: Run, calls: Sequence[ToolCall]) -> list[Outcome]:
        """All calls allow_parallel → concurrently; any writer in the step → serially, in order."""
        if self._parallel(calls):
            return list(await asyncio.gather(
                *(self.invoke(run, c.name, c.arguments, version=c.version) for c in calls)
            ))
        return [await self.invoke(run, c.name, c.arguments, version=c.version) for c in calls]

    def _parallel(self, calls: Sequence[ToolCall]) -> bool:
        for call in calls:
            try:
                spec = self.registry.resolve(call.name, call.version).spec
            except LookupError:
                continue  # fails at step 1 either way and writes nothing
            if not spec.allow_parallel:
                return False
        return True

    # ------------------------------------------------------------------ step 7, and recovery

    async def approve(
        self, invocation_id: str, approver: str, *, cancellation: CancellationEvent | None = None,
        run: Run | None = None,
    ) -> Outcome:
        """Approve and run exactly the validated arguments that were approved, once: the
        outcome of ``resume``."""
        return (await self.approvals.resume(invocation_id, approver, cancellation=cancellation,
                                            run=run)).outcome

    async def resume(
        self, invocation_id: str, approver: str, *, cancellation: CancellationEvent | None = None,
        run: Run | None = None,
    ) -> Resumed:
        """``approve``, saying whether this call acted on the row (``Approvals.resume``)."""
        return await self.approvals.resume(invocation_id, approver, cancellation=cancellation,
                                           run=run)

    def expire(self, invocation_id: str) -> Outcome:
        """End a call left waiting past its run's deadline, unrun (``Approvals.expire``)."""
        return self.approvals.expire(invocation_id)

    def deny(self, invocation_id: str, approver: str, reason: str) -> Outcome:
        """End the row as ``denied``. The reason stays on the row; the model reads DENIED_TEXT."""
        return self.approvals.denial(invocation_id, approver, reason).outcome

    def denial(self, invocation_id: str, approver: str, reason: str) -> Resumed:
        """``deny``, saying whether this call acted on the row (``Approvals.denial``)."""
        return self.approvals.denial(invocation_id, approver, reason)

    async def recover(self, *, rerun: bool = True,
                      cancellation: CancellationEvent | None = None) -> list[Recovered]:
        """Settle every ``running`` row whose owning process is gone (``Recovery.recover``)."""
        return await self.recovery.recover(rerun=rerun, cancellation=cancellation)

    def recover_interrupted(self, stopping: threading.Event | None = None) -> list[Recovered]:
        """``recover(rerun=False)``, synchronously, on any thread
        (``Recovery.recover_interrupted``)."""
        return self.recovery.recover_interrupted(stopping)

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """A call (or an approval's resumption) is under way while this is entered: its row
        writes are group-committed with the other calls' (group_commit.py)."""
        self._commits.enter()
        try:
            yield
        finally:
            self._commits.leave()

    async def run_resumed(
        self, registered: Registered, record: InvocationRecord, log: Any,
        cancellation: CancellationEvent | None, run: Run | None = None,
    ) -> Outcome:
        """Steps 8 to 13 for a row this process took to ``running`` outside ``invoke``: an
        approved call, or one ``recover`` runs again.

        With ``run`` (approved within the call) the call runs in it, as ``invoke`` would
        have. Otherwise the run is rebuilt from the row: same id, principal and
        conversation, its deadline from the row, its own cancellation (the original process
        may be gone), and the run's workspace on this host (``workspace_for``): the one it
        has if it is live here (which is then its workspace for the calls that follow: a run
        that paused starts it afresh), else one of this call's own, discarded afterwards.
        """
        workspace = None
        if run is not None:
            if cancellation is not None:
                run = attrs.evolve(run, cancellation=_joined(run.cancellation, cancellation))
        else:
            try:
                workspace = self._workspace_for(record) if self._workspace_for else None
            except Exception as exc:
                # The row is running already (approved, or taken over by recovery): it ends
                # failed, never left running under this live process.
                return await self.persist_failure(record, steps.workspace_unopened(exc), log)
            deadline = None
            if record.run_deadline is not None:
                left = (record.run_deadline - self.clock.now()).total_seconds()
                deadline = self._monotonic() + left
            run = Run(
                id=record.run_id,
                principal=Principal(record.principal_id, frozenset(record.scopes)),
                conversation_id=record.conversation_id, workspace=workspace, deadline=deadline,
                deadline_at=record.run_deadline,
                cancellation=cancellation if cancellation is not None else CancellationEvent(),
            )
        if record.user_turn is not None:
            # The person's words the call was recorded with, wherever it is approved.
            run = attrs.evolve(run, user_turn=record.user_turn)
        try:
            try:
                # None kept (a row recorded before they were): refused as at step 4.
                steps.check_user_words(run, registered)
            except ToolFailure as failure:
                return await self.persist_failure(record, failure, log)
            return await self._execute_and_persist(run, registered, record, log)  # 8 to 13
        finally:
            if workspace is not None:
                workspace.close()

    # ------------------------------------------------------------------ for other callers

    @staticmethod
    def abandoned_bodies(principal_id: str) -> int:
        """How many of this principal's sync tool bodies their calls stopped waiting for
        (deadline, cancellation) still hold a worker thread: what a server counts against
        the principal's calls, so one person's hung calls cannot take every worker."""
        return abandoned(principal_id)

    async def refuse(self, run: Run, name: str, arguments: Any, reason: str | ToolFailure, *,
                     version: str | None = None) -> Outcome:
        """End a call before it runs with one of the host's reasons (the person declined to
        give their words, ``USER_DECLINED``; or a step's own failure, with its detail): its
        one row, written ``failed``."""
        with self.in_flight():
            invocation_id = self._new_id()
            log = get_logger(invocation_id=invocation_id, run_id=run.id,
                             tool=steps.shown(name))
            registered: Registered | None = None
            try:
                registered = steps.resolve(self.registry, name, version or run.pins.get(name))
            except ToolFailure as failure:
                return await self._persist_refusal(run, invocation_id, name, None, arguments,
                                                   self.clock.now(), failure, log)
            refusal = reason if isinstance(reason, ToolFailure) else ToolFailure(reason)
            return await self._persist_refusal(run, invocation_id, name, registered, arguments,
                                               self.clock.now(), refusal, log)

    def admit(self, run: Run, name: str) -> Registered:
        """Steps 1-3 alone, as ``invoke`` runs them for an unversioned call in ``run``: the
        registration it resolves to, enabled for the run and within its principal's scopes,
        or the ``ToolFailure`` ``invoke`` would refuse the call with."""
        registered = steps.resolve(self.registry, name, run.pins.get(name))
        steps.check_enabled(run, registered)
        steps.check_scopes(run.principal, registered)
        self._check_in_service(registered)
        return registered

    def _check_in_service(self, registered: Registered) -> None:
        """A tool taken out of service since it was registered (``withdrawn``) fails here,
        before the policy: nobody is asked to approve a call that cannot run (D452)."""
        if self._withdrawn is not None:
            failure = self._withdrawn(registered.spec.name)
            if failure is not None:
                raise failure

    def check_run_deadline(self, run: Run) -> None:
        """Step 8's check of the run's deadline alone: raises the ``ToolFailure`` (with the
        deadline in its detail) ``invoke`` would end the call with."""
        steps.check_run_deadline(run, self._monotonic())

    def check_scopes(self, principal: Principal, registered: Registered) -> None:
        """Step 3 alone: raises the ``ToolFailure`` ``invoke`` would refuse the call with."""
        steps.check_scopes(principal, registered)

    def prepare(self, registered: Registered, arguments: Any) -> steps.Prepared:
        """Step 4 alone: the validated arguments and the digest ``invoke`` would record (an
        approval binds to it), or the ``ToolFailure`` it would refuse them with."""
        return steps.prepare(registered, arguments)

    def decide(self, registered: Registered) -> PolicyDecision:
        """Step 5 alone: what the policy decides for calls of this tool."""
        return steps.decide_policy(self.policy, registered)

    def row(self, invocation_id: str) -> InvocationRecord:
        """The invocation's row as it stands. Raises ``InvocationNotFound``."""
        return self.invocations.get(invocation_id)

    def rows_for(self, run_id: str, prepared: steps.Prepared) -> list[InvocationRecord]:
        """The run's rows for exactly these prepared arguments (tool, version, digest), oldest
        first: how a repeated call finds the row its first call left."""
        return list(self.invocations.list(
            run_id=run_id, tool_name=prepared.tool, tool_version=prepared.version,
            argument_digest=prepared.digest,
        ))

    def recorded(self, invocation_id: str) -> Outcome:
        """The outcome as its row records it."""
        return self.outcome_of(self.invocations.get(invocation_id))

    def outcome_of(self, record: InvocationRecord) -> Outcome:
        status = _STATUS[record.state]
        failure = None
        if record.state is InvocationState.FAILED and record.reason_code:
            failure = FailureInfo(
                kind=failure_kind_of(record.reason_code), reason_code=record.reason_code,
                message=self.messages[record.reason_code], retryable=bool(record.retryable),
                detail=dict(record.failure_detail or {}),
            )
        content = _STATUS_TEXT.get(status)
        if content is None:
            content = failure.message if failure else (record.result_content or "")
        trust = record.output_trust
        return Outcome(
            tool=record.tool_name, version=record.tool_version, status=status, content=content,
            structured=record.result_structured if status is OutcomeStatus.SUCCEEDED else None,
            output_trust=(_TRUST_OF.get(trust) or Trust(trust)) if trust else None,
            failure=failure, invocation_id=record.id, artifacts=record.artifact_refs,
            truncated=status is OutcomeStatus.SUCCEEDED and record.result_structured is None,
            decision=record.policy,
            attachments=record.attachments if status is OutcomeStatus.SUCCEEDED else (),
        )


def _joined(run: CancellationEvent, call: CancellationEvent) -> CancellationEvent:
    """A cancellation set when either is: the run's, and this call's own."""
    joined = CancellationEvent()
    run.add_callback(joined.cancel)
    call.add_callback(joined.cancel)
    return joined


def _discard(workspace: Any, log: Any) -> None:
    """Discard a workspace (see ``Pipeline._pause``); a failure is logged, never raised: the
    pause is recorded already."""
    try:
        workspace.discard()
    except Exception as exc:
        log.error("pipeline.workspace_discard_failed", exception=type(exc).__name__,
                  error=str(exc))


def _running_record(invocation_id: str, run: Run, prepared: steps.Prepared,
                    decision: PolicyDecision, created: Any,
                    owner: Mapping[str, Any] | None = None,
                    user_turn: str | None = None) -> InvocationRecord:
    """The row of a call that passed steps 1 to 5, as ``running``; the step-5 denial and the
    step-6 pause evolve it into their own states."""
    return InvocationRecord(
        id=invocation_id, run_id=run.id, principal_id=run.principal.id,
        scopes=tuple(sorted(run.principal.scopes)), conversation_id=run.conversation_id,
        tool_name=prepared.tool, tool_version=prepared.version, arguments=prepared.arguments,
        argument_digest=prepared.digest,
        state=InvocationState.RUNNING, policy=decision.to_json(), created_at=created,
        started_at=created, owner=owner, run_deadline=run.deadline_at, user_turn=user_turn,
    )


def _finished(record: InvocationRecord, state: InvocationState, finished_at: Any,
              fields: Mapping[str, Any]) -> InvocationRecord:
    """``attrs.evolve(record, state=state, finished_at=finished_at, **fields)`` as one
    constructor call: evolve looks the class's fields up on every call (~6 µs against ~3 on
    the hot path). Every field is named (tests/test_pipeline_hot_path.py holds it to evolve)."""
    get = fields.get
    return InvocationRecord(
        id=record.id, run_id=record.run_id, principal_id=record.principal_id,
        scopes=record.scopes, conversation_id=record.conversation_id,
        tool_name=record.tool_name, tool_version=record.tool_version,
        arguments=record.arguments, argument_digest=record.argument_digest, state=state,
        policy=record.policy, approver=record.approver, denial_reason=record.denial_reason,
        result_structured=get("result_structured", record.result_structured),
        result_content=get("result_content", record.result_content),
        output_trust=get("output_trust", record.output_trust),
        failure_kind=get("failure_kind", record.failure_kind),
        reason_code=get("reason_code", record.reason_code),
        retryable=get("retryable", record.retryable),
        failure_detail=get("failure_detail", record.failure_detail),
        artifact_refs=get("artifact_refs", record.artifact_refs),
        created_at=record.created_at, started_at=record.started_at, finished_at=finished_at,
        decided_at=record.decided_at, owner=record.owner, run_deadline=record.run_deadline,
        attachments=get("attachments", record.attachments), user_turn=record.user_turn,
        operator_directory=record.operator_directory,
    )


def _jsonable(value: Any) -> Any:
    """Arguments as the model sent them, for the row, even when they are not an object, and
    within ``steps.MAX_REFUSED_ARGUMENT_BYTES``."""
    if nests_deeper(value):  # what cannot be encoded wherever the row's encoding runs
        return UNRECORDED_ARGUMENTS
    try:
        encoded = canonical_json(value)
    except (TypeError, ValueError):
        value = repr(value)
        encoded = value.encode("utf-8", "backslashreplace")
    return steps.recorded_refusal(value, encoded)


#: A refused call's arguments on its row when they nest deeper than step 4 takes (D336).
UNRECORDED_ARGUMENTS = "(arguments nest too deeply to record)"
