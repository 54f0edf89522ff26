"""The execution pipeline: every call runs through these thirteen steps, each a named call.

Numbered as DESIGN §4 so the spec's references hold:

 1 resolve (name, version)                  ``steps.resolve``
 2 enabled for this run                     ``steps.check_enabled``
 3 scopes                                   ``steps.check_scopes``
 4 validate arguments, defaults, digest     ``steps.prepare``
 5 policy decision; a deny cell denies      ``steps.decide_policy``, ``Pipeline._deny_by_policy``
 6 require approval: persist, pause         ``Pipeline._pause``
 7 (resume) the approval binds the digest   ``steps.bind_approval`` in ``Pipeline.approve``;
   (an operator's denial ends the row)      ``Pipeline.deny``
 8 execute under min(timeout_s, run         ``steps.build_tool``, ``steps.execute``
   deadline), cancellable
 9 WorkspaceEscape -> ToolValidationError   ``steps.workspace_escape``
10 validate output against output_schema    ``steps.validate_output``
11 clamp trust to the lower of spec/result  ``steps.clamp_trust``
12 excerpt and artifactize, or too large    ``steps.limit_output``
13 persist the outcome on the row           ``Pipeline._persist`` (and its three callers)

``Pipeline.invoke`` is the list of steps 1 to 6 and 8 to 13; ``Pipeline.approve`` resumes a
paused row at step 7 and runs the same steps 8 to 13. The steps that need no store are
functions in ``toolhost._pipeline.steps``; the ones that write the row are methods here.

A step that ends the invocation raises ``ToolFailure`` (the public exception) with the reason
to render; the pipeline persists exactly one row per invocation and returns an ``Outcome``.
Callers outside the pipeline (the MCP server) use its public methods (``prepare``,
``check_scopes``, ``decide``, ``row``, ``rows_for``), never its steps' internals.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from toolhost._model import host_reasons as core_messages
from toolhost._model.context import Principal, ToolCallable, ToolExecutionContext
from toolhost._model.digest import canonical_json
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.outcome import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    failure_kind_of,
)
from toolhost._model.runs import CancellationEvent, Run, ToolCall
from toolhost._model.spec import Idempotency, Trust
from toolhost._model.workspace import NO_WORKSPACE, WorkspaceEscape
from toolhost._pipeline import steps
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._pipeline.log import get_logger
from toolhost._pipeline.policy import Policy, PolicyAction, PolicyDecision
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._ports.invocations import InvocationStore
from toolhost._registration.refusals import Registered
from toolhost._registration.registry import Registry

__all__ = ["InvocationStateError", "Pipeline", "ToolCall"]


class InvocationStateError(Exception):
    """approve/deny on an invocation that is not awaiting approval."""


_STATUS = {
    InvocationState.AWAITING_APPROVAL: OutcomeStatus.AWAITING_APPROVAL,
    InvocationState.APPROVED: OutcomeStatus.RUNNING,
    InvocationState.RUNNING: OutcomeStatus.RUNNING,
    InvocationState.DENIED: OutcomeStatus.DENIED,
    InvocationState.SUCCEEDED: OutcomeStatus.SUCCEEDED,
    InvocationState.FAILED: OutcomeStatus.FAILED,
}


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
        workspace_for: Callable[[str], Any] | None = None,
    ) -> None:
        self.registry = registry
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

    def close(self) -> None:
        """Close both stores' connections."""
        for store in (self.invocations, self.artifacts):
            close = getattr(store, "close", None)
            if close is not None:
                close()

    # ------------------------------------------------------------------ one call

    async def invoke(
        self, run: Run, name: str, arguments: Any, *, version: str | None = None
    ) -> Outcome:
        """One call through the thirteen steps: exactly one row, and its ``Outcome``."""
        invocation_id = self._new_id()
        log = get_logger(invocation_id=invocation_id, run_id=run.id, tool=name)
        created = self.clock.now()
        registered: Registered | None = None
        try:
            registered = steps.resolve(self.registry, name, version or run.pins.get(name))  # 1
            log.debug("pipeline.resolve", step=1, version=registered.spec.version)
            steps.check_enabled(run, registered)  # 2
            log.debug("pipeline.enabled", step=2)
            steps.check_scopes(run.principal, registered)  # 3
            log.debug("pipeline.scopes", step=3)
            prepared = steps.prepare(registered, arguments)  # 4
            log.debug("pipeline.validate", step=4)
        except ToolFailure as failure:
            return self._persist_refusal(  # 13
                run, invocation_id, name, registered, arguments, created, failure, log)
        decision = steps.decide_policy(self.policy, registered)  # 5
        log.debug("pipeline.policy", step=5, action=decision.action.value, rule=decision.rule)
        record = _running_record(invocation_id, run, prepared, decision, created)
        if decision.action is PolicyAction.DENY:
            return self._deny_by_policy(record, decision, log)  # 5
        if decision.action is PolicyAction.REQUIRE_APPROVAL:
            return self._pause(record, log)  # 6
        # A call that changes anything is recorded as running before it runs, so a crash
        # mid-call leaves evidence; a read-only call's row is written once, at step 13.
        inserted = registered.spec.idempotency is not Idempotency.READ_ONLY
        if inserted:
            self.invocations.insert(record)
        return await self._execute_and_persist(run, registered, record, log,  # 8 to 13
                                               inserted=inserted)

    def _deny_by_policy(self, record: InvocationRecord, decision: PolicyDecision,
                        log: Any) -> Outcome:
        """Step 5's deny cell: the row ends ``denied``, a decision rendered, not a result."""
        created = record.created_at
        denied = attrs.evolve(record, state=InvocationState.DENIED, decided_at=created,
                              finished_at=created, started_at=None)
        self.invocations.insert(denied)
        log.info("pipeline.denied", step=5, rule=decision.rule)
        return self._outcome(denied)

    def _pause(self, record: InvocationRecord, log: Any) -> Outcome:
        """Step 6: a pause, not a result. The row is durable, so it survives a restart."""
        paused = attrs.evolve(record, state=InvocationState.AWAITING_APPROVAL, started_at=None)
        self.invocations.insert(paused)
        log.info("pipeline.awaiting_approval", step=6, digest=record.argument_digest)
        return self._outcome(paused)

    async def _execute_and_persist(
        self, run: Run, registered: Registered, record: InvocationRecord, log: Any,
        *, inserted: bool = True,
    ) -> Outcome:
        """Steps 8 to 13 for a ``running`` record (already a row unless ``inserted`` is False)."""
        writer = RunArtifactWriter(self.artifacts, run.id, self.clock, run.conversation_id,
                                   principal_id=run.principal.id)
        # Each call has its own cancellation: set when the run's is, and at its deadline.
        call = CancellationEvent()
        context = ToolExecutionContext(
            run_id=run.id, principal=run.principal,
            workspace=run.workspace if run.workspace is not None else NO_WORKSPACE,
            artifacts=writer,
            deadline=steps.call_deadline(registered, run.deadline, self._monotonic()),
            cancellation=call, conversation_id=run.conversation_id, user_turn=run.user_turn,
        )
        try:
            tool = steps.build_tool(self._build, registered)  # 8
            try:
                raw = await steps.execute(registered, tool, record.arguments, context, call, run,
                                          context.deadline - self._monotonic())  # 8
            except WorkspaceEscape as escape:
                raise steps.workspace_escape(escape) from None  # 9
            log.debug("pipeline.execute", step=8)
            output = steps.validate_output(registered, raw)  # 10
            log.debug("pipeline.output", step=10)
            trust = steps.clamp_trust(registered.spec.output_trust, output.output_trust)  # 11
            log.debug("pipeline.trust", step=11, trust=trust.value)
            shaped = steps.limit_output(registered, output, trust, writer, record.id)  # 12
            log.debug("pipeline.size", step=12, truncated=shaped.truncated)
        except ToolFailure as failure:
            return self._persist_failure(record, failure, log, inserted=inserted)  # 13
        except Exception as exc:
            # A fault of the host's own after the tool ran (the artifact store's disk, say):
            # the row is still finished, never left running.
            return self._persist_failure(record, steps.unexpected(exc), log, inserted=inserted)
        return self._persist_success(record, trust, shaped, log, inserted=inserted)  # 13

    # ------------------------------------------------------------------ step 13: persist

    def _persist_refusal(
        self, run: Run, invocation_id: str, name: str, registered: Registered | None,
        arguments: Any, created: Any, failure: ToolFailure, log: Any,
    ) -> Outcome:
        """Step 13 for a call a step from 1 to 4 refused: its one row, written ``failed``."""
        info = steps.render_failure(self.messages, failure)
        log.info("pipeline.failed", reason_code=info.reason_code, detail=dict(info.detail))
        record = InvocationRecord(
            id=invocation_id, run_id=run.id, principal_id=run.principal.id,
            scopes=tuple(sorted(run.principal.scopes)), conversation_id=run.conversation_id,
            tool_name=name, tool_version=registered.spec.version if registered else None,
            arguments=_jsonable(arguments), argument_digest=None, state=InvocationState.FAILED,
            failure_kind=info.kind.value, reason_code=info.reason_code,
            retryable=info.retryable, failure_detail=dict(info.detail),
            created_at=created, finished_at=created,
        )
        self.invocations.insert(record)
        return self._outcome(record)

    def _persist_success(
        self, record: InvocationRecord, trust: Trust, shaped: steps.Shaped, log: Any,
        *, inserted: bool = True,
    ) -> Outcome:
        fields = dict(
            result_structured=shaped.structured, result_content=shaped.content,
            output_trust=trust.value, artifact_refs=shaped.artifacts,
        )
        log.info("pipeline.succeeded", step=13, truncated=shaped.truncated)
        return self._persist(record, InvocationState.SUCCEEDED, fields, inserted=inserted)

    def _persist_failure(
        self, record: InvocationRecord, failure: ToolFailure, log: Any, *, inserted: bool = True,
    ) -> Outcome:
        info = steps.render_failure(self.messages, failure)
        log.info("pipeline.failed", step=13, reason_code=info.reason_code,
                 detail=dict(info.detail))
        # Step 12's OUTPUT_TOO_LARGE keeps the partial output it artifactized.
        artifacts = failure.artifacts if isinstance(failure, steps.OutputTooLarge) else ()
        return self._persist(record, InvocationState.FAILED, dict(
            failure_kind=info.kind.value, reason_code=info.reason_code,
            retryable=info.retryable, failure_detail=dict(info.detail),
            artifact_refs=artifacts,
        ), inserted=inserted)

    def _persist(
        self, record: InvocationRecord, state: InvocationState, fields: Mapping[str, Any],
        *, inserted: bool = True,
    ) -> Outcome:
        """The outcome lands on the row, once: only a ``running`` row may finish."""
        final = attrs.evolve(record, state=state, finished_at=self.clock.now(), **fields)
        if not inserted:
            self.invocations.insert(final)
        elif not self.invocations.transition(
            record.id, expected={InvocationState.RUNNING}, to=state,
            finished_at=final.finished_at, **fields,
        ):
            raise InvocationStateError(f"invocation {record.id} was not running")
        return self._outcome(final)

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

    # ------------------------------------------------------------------ step 7: approvals

    async def approve(
        self, invocation_id: str, approver: str, *, cancellation: CancellationEvent | None = None
    ) -> Outcome:
        """Approve and run exactly the validated arguments that were approved, once.

        Calling it twice, or from two processes at once, runs the tool once: the row's
        compare-and-set from ``approved`` to ``running`` is the lock, and the loser gets the
        row as it stands. ``cancellation`` lets the caller cancel the approved execution (a
        server whose client went away); by default nothing can.
        """
        started = self._start_approved(invocation_id, approver)
        if isinstance(started, Outcome):
            return started
        record = started
        log = get_logger(invocation_id=invocation_id, run_id=record.run_id, tool=record.tool_name)
        # Pinned, so exact: the version that paused. (A version no longer registered raises
        # the registry's UnknownTool or UnknownVersion, as it always has.)
        registered = self.registry.resolve(record.tool_name, record.tool_version)  # 1
        try:
            steps.bind_approval(registered, record)  # 7
        except ToolFailure as failure:
            log.error("pipeline.digest_mismatch", step=7)
            return self._persist_failure(record, failure, log)  # 13
        log.info("pipeline.approved", step=7, approver=approver)
        # The resumed run is this row's run: same id and principal, a fresh deadline and
        # cancellation (the original process may be gone), and an empty workspace: the one
        # before the pause was a cache, discarded when the run paused.
        workspace = self._workspace_for(record.run_id) if self._workspace_for else None
        run = Run(
            id=record.run_id, principal=Principal(record.principal_id, frozenset(record.scopes)),
            conversation_id=record.conversation_id, workspace=workspace,
            cancellation=cancellation if cancellation is not None else CancellationEvent(),
        )
        try:
            return await self._execute_and_persist(run, registered, record, log)  # 8 to 13
        finally:
            if workspace is not None:
                workspace.discard()

    def _start_approved(self, invocation_id: str, approver: str) -> InvocationRecord | Outcome:
        """Record the approval and take the row from ``approved`` to ``running``: the running
        record when this caller won it, else the outcome to hand back as the row stands."""
        record = self.invocations.get(invocation_id)
        if record.state is InvocationState.AWAITING_APPROVAL:
            self.invocations.transition(
                invocation_id, expected={InvocationState.AWAITING_APPROVAL},
                to=InvocationState.APPROVED, approver=approver, decided_at=self.clock.now(),
            )
            record = self.invocations.get(invocation_id)
        if record.state is InvocationState.DENIED:
            raise InvocationStateError(f"invocation {invocation_id} was denied")
        if record.state is not InvocationState.APPROVED:
            return self._outcome(record)
        # The row's move from approved to running is the lock: exactly one caller wins it.
        if not self.invocations.transition(
            invocation_id, expected={InvocationState.APPROVED}, to=InvocationState.RUNNING,
            started_at=self.clock.now(),
        ):
            return self._outcome(self.invocations.get(invocation_id))
        return self.invocations.get(invocation_id)

    def deny(self, invocation_id: str, approver: str, reason: str) -> Outcome:
        """End the row as ``denied``. The reason stays on the row; the model reads DENIED_TEXT."""
        record = self.invocations.get(invocation_id)
        now = self.clock.now()
        if not self.invocations.transition(
            invocation_id, expected={InvocationState.AWAITING_APPROVAL},
            to=InvocationState.DENIED, approver=approver, denial_reason=reason,
            decided_at=now, finished_at=now,
        ):
            current = self.invocations.get(invocation_id)
            if current.state is InvocationState.DENIED:
                return self._outcome(current)
            raise InvocationStateError(
                f"invocation {invocation_id} is {current.state.value}, not awaiting approval"
            )
        get_logger(invocation_id=invocation_id, run_id=record.run_id).info(
            "pipeline.denied", step=7, approver=approver, reason=reason)
        return self._outcome(self.invocations.get(invocation_id))

    # ------------------------------------------------------------------ for other callers

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
        return self._outcome(self.invocations.get(invocation_id))

    def _outcome(self, record: InvocationRecord) -> Outcome:
        status = _STATUS[record.state]
        failure = None
        if record.state is InvocationState.FAILED and record.reason_code:
            failure = FailureInfo(
                kind=failure_kind_of(record.reason_code), reason_code=record.reason_code,
                message=self.messages[record.reason_code], retryable=bool(record.retryable),
                detail=dict(record.failure_detail or {}),
            )
        content = {
            OutcomeStatus.AWAITING_APPROVAL: core_messages.AWAITING_APPROVAL_TEXT,
            OutcomeStatus.DENIED: core_messages.DENIED_TEXT,
            OutcomeStatus.RUNNING: core_messages.RUNNING_TEXT,
        }.get(status)
        if content is None:
            content = failure.message if failure else (record.result_content or "")
        return Outcome(
            tool=record.tool_name, version=record.tool_version, status=status, content=content,
            structured=record.result_structured if status is OutcomeStatus.SUCCEEDED else None,
            output_trust=Trust(record.output_trust) if record.output_trust else None,
            failure=failure, invocation_id=record.id, artifacts=record.artifact_refs,
            truncated=status is OutcomeStatus.SUCCEEDED and record.result_structured is None,
            decision=record.policy,
        )


def _running_record(invocation_id: str, run: Run, prepared: steps.Prepared,
                    decision: PolicyDecision, created: Any) -> InvocationRecord:
    """The row of a call that passed steps 1 to 5, as ``running``; the step-5 denial and the
    step-6 pause evolve it into their own states."""
    return InvocationRecord(
        id=invocation_id, run_id=run.id, principal_id=run.principal.id,
        scopes=tuple(sorted(run.principal.scopes)), conversation_id=run.conversation_id,
        tool_name=prepared.tool, tool_version=prepared.version, arguments=prepared.arguments,
        argument_digest=prepared.digest,
        state=InvocationState.RUNNING, policy=decision.to_json(), created_at=created,
        started_at=created,
    )


def _jsonable(value: Any) -> Any:
    """Arguments as the model sent them, for the row, even when they are not an object."""
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
