"""Step 7: an operator's answer to a paused call (pipeline.py numbers the steps).

``approve`` (``Approvals.resume``) runs exactly the arguments that paused, once, through the
pipeline's steps 8 to 13 (``Pipeline.run_resumed``); ``deny`` (``Approvals.denial``) ends the
row ``denied``. Both are compare-and-set writes on the row, so two answers, from one process or
two, act once: the other is handed the row as it stands (``Resumed.acted`` False).

Before an approved row is touched, its tool (at its pinned version) must be registered here,
or ``ApprovalRefused`` leaves the row awaiting approval; the policy is decided again, so a cell
tightened to deny since the pause ends the row ``denied`` unrun; and a row whose run's deadline
has passed ends failed (``tool.timeout.run_deadline_passed``) unrun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from toolhost._model import host_reasons as core_messages
from toolhost._model.errors import ToolhostError
from toolhost._model.invocations import InvocationRecord, InvocationRecordDamaged, InvocationState
from toolhost._model.outcome import Outcome, ToolFailure
from toolhost._pipeline import steps
from toolhost._pipeline.log import get_logger
from toolhost._pipeline.policy import PolicyAction, PolicyDecision

if TYPE_CHECKING:
    from toolhost._model.runs import CancellationEvent, Run
    from toolhost._pipeline.pipeline import Pipeline

__all__ = ["ApprovalNotRecorded", "ApprovalRefused", "Approvals", "InvocationStateError",
           "Resumed"]


class InvocationStateError(ToolhostError):
    """approve/deny on an invocation that is not awaiting approval."""


class ApprovalNotRecorded(ToolhostError):
    """approve, when the record store failed to take the approval: nothing changed, and the
    row still awaits approval (``approve`` or ``deny`` it again, from anywhere)."""

    def __init__(self, invocation_id: str, error: Exception) -> None:
        super().__init__(
            f"invocation {invocation_id} was not approved: the record store failed "
            f"({type(error).__name__}); it still awaits approval, approve it again")
        self.invocation_id = invocation_id


class ApprovalRefused(InvocationStateError):
    """approve on a row this process cannot run (its tool is not registered here): the row is
    left as it was, awaiting approval, for an ``approve`` where the tool is, or a ``deny``."""


@attrs.frozen
class Resumed:
    """What ``Approvals.resume`` did: the outcome, and whether this call acted on the row (ran
    the tool, or ended the row at step 7) rather than handing it back as it stood."""

    outcome: Outcome
    acted: bool


class Approvals:
    """Step 7 for one pipeline: its rows, its registry and policy, its steps 8 to 13."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    async def resume(
        self, invocation_id: str, approver: str, *, cancellation: CancellationEvent | None = None,
        run: Run | None = None,
    ) -> Resumed:
        """Approve and run exactly the validated arguments that were approved, once (step 7,
        then 8 to 13), saying whether this call acted on the row.

        Calling it twice, or from two processes at once, runs the tool once: the row's
        compare-and-set from awaiting approval to ``running`` is the lock, and the loser gets
        the row as it stands. ``cancellation`` lets the caller cancel the approved execution (a
        server whose client went away); by default nothing can. ``run``: the approval was
        answered within the call (``invoke(hold=True)``), and the call goes on in that run:
        its workspace, deadline and cancellation.

        :raises InvocationNotFound: no such row.
        :raises InvocationStateError: the row was denied.
        :raises ApprovalRefused: the tool is not registered in this process.
        :raises ApprovalNotRecorded: the record store failed to take the approval.
        :raises InvocationRecordDamaged: ``run`` is not the row's run (nor its principal the
            row's): the row was changed since the caller found it as its run's.
        """
        with self._pipeline.in_flight():
            return await self._resume(invocation_id, approver, cancellation, run)

    async def _resume(self, invocation_id: str, approver: str,
                      cancellation: CancellationEvent | None, run: Run | None = None) -> Resumed:
        pipeline = self._pipeline
        record = pipeline.invocations.get(invocation_id)
        if run is not None and (run.id, run.principal.id) != (record.run_id,
                                                               record.principal_id):
            # The caller found the row as its run's: changed behind the store's back since.
            raise InvocationRecordDamaged(
                invocation_id, "run_id" if run.id != record.run_id else "principal_id",
                record.tool_name, record.tool_version)
        if record.state is InvocationState.DENIED:
            raise InvocationStateError(f"invocation {invocation_id} was denied")
        if record.state not in (InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED):
            return Resumed(pipeline.outcome_of(record), acted=False)
        return await pipeline.observed(record.tool_name, record.run_id, None, self._resume_row(
            record, approver, cancellation, run))

    async def _resume_row(self, record: InvocationRecord, approver: str,
                          cancellation: CancellationEvent | None, run: Run | None) -> Resumed:
        """``_resume`` for a row awaiting approval, or approved and not yet started."""
        pipeline = self._pipeline
        invocation_id = record.id
        log = get_logger(invocation_id=invocation_id, run_id=record.run_id, tool=record.tool_name)
        try:
            # Pinned, so exact: the version that paused.
            registered = pipeline.registry.resolve(record.tool_name, record.tool_version)  # 1
        except LookupError:
            raise ApprovalRefused(
                f"invocation {invocation_id} calls {record.tool_name} {record.tool_version}, "
                "which is not registered here: approve it where its plugin is installed and "
                "enabled, or deny it"
            ) from None
        decision = steps.decide_policy(pipeline.policy, registered)  # 5, again
        if decision.action is PolicyAction.DENY:
            return self._deny_at_approval(record, decision, log)
        if record.run_deadline is not None and pipeline.clock.now() >= record.run_deadline:
            return self._expire_at_approval(record, approver, log)  # 7
        started = self._start_approved(invocation_id, approver)
        if isinstance(started, Outcome):
            return Resumed(started, acted=False)
        record = started
        self._approval_decided(record, "approved")
        try:
            bound = steps.bind_approval(registered, record)  # 7
        except ToolFailure as failure:
            log.error("pipeline.digest_mismatch", step=7)
            return Resumed(await pipeline.persist_failure(record, failure, log),  # 13
                           acted=True)
        # As step 4 prepares them now: the same values, with a row paused before D404
        # holding 3.0 where the body now gets 3.
        record = attrs.evolve(record, arguments=bound.arguments)
        log.info("pipeline.approved", step=7, approver=approver, within_call=run is not None)
        return Resumed(await pipeline.run_resumed(registered, record, log, cancellation, run),
                       acted=True)

    def expire(self, invocation_id: str) -> Outcome:
        """A call left waiting whose run's deadline has passed (as its caller, holding the run,
        judged it), found again by its own session before anyone is asked: it ends failed,
        unrun, as an approval after the deadline ends it, with no approver (nobody approved
        it). A row with no run deadline, or not waiting, is returned as it stands (D433)."""
        pipeline = self._pipeline
        record = pipeline.invocations.get(invocation_id)
        if record.state is InvocationState.AWAITING_APPROVAL and record.run_deadline is not None:
            log = get_logger(invocation_id=invocation_id, run_id=record.run_id,
                             tool=record.tool_name)
            return self._expire_at_approval(record, None, log).outcome
        return pipeline.outcome_of(record)

    def _expire_at_approval(self, record: InvocationRecord, approver: str | None,
                            log: Any) -> Resumed:
        """The run's deadline passed while the call waited: it ends failed, unrun, with the
        approval that came too late on the row (None: nobody approved it)."""
        pipeline = self._pipeline
        now = pipeline.clock.now()
        info = steps.render_failure(pipeline.messages, ToolFailure(
            core_messages.RUN_DEADLINE_PASSED,
            detail={"run_deadline": record.run_deadline.isoformat()
                    if record.run_deadline else None}))
        decided = ({} if approver is None and record.approver is None else
                   {"approver": record.approver or approver, "decided_at": now})
        acted = pipeline.invocations.transition(
            record.id, expected={InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED},
            to=InvocationState.FAILED, finished_at=now, failure_kind=info.kind.value,
            reason_code=info.reason_code, retryable=info.retryable,
            failure_detail=dict(info.detail), **decided,
        )
        if acted:
            log.info("pipeline.failed", step=7, reason_code=info.reason_code)
        return Resumed(pipeline.recorded(record.id), acted=acted)

    def _deny_at_approval(self, record: InvocationRecord, decision: PolicyDecision,
                          log: Any) -> Resumed:
        """The policy now denies what paused for approval: the row ends ``denied``, unrun,
        with the decision that denied it on the row."""
        pipeline = self._pipeline
        now = pipeline.clock.now()
        reason = f"policy now denies {decision.rule}"
        acted = pipeline.invocations.transition(
            record.id, expected={InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED},
            to=InvocationState.DENIED, denial_reason=reason, policy=decision.to_json(),
            decided_at=now, finished_at=now,
        )
        if acted:
            log.info("pipeline.denied", step=7, rule=decision.rule, reason=reason)
        return Resumed(pipeline.recorded(record.id), acted=acted)

    def _start_approved(self, invocation_id: str, approver: str) -> InvocationRecord | Outcome:
        """Record the approval and take the row to ``running`` in one compare-and-set, the
        lock exactly one caller wins: the running record when this caller won it, else the
        outcome to hand back as the row stands. One write, so a store that refuses it leaves
        the row awaiting approval, for any answer from anywhere (``ApprovalNotRecorded``); a
        row left ``approved`` (by a toolhost that wrote the approval apart) goes on from
        there, its approver kept.

        :raises ApprovalNotRecorded: the record store failed: nothing changed.
        """
        store = self._pipeline.invocations
        try:
            record = store.get(invocation_id)
            if record.state in (InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED):
                now = self._pipeline.clock.now()
                fields: dict[str, Any] = {"started_at": now, "owner": store.owner()}
                if record.state is InvocationState.AWAITING_APPROVAL:
                    fields.update(approver=approver, decided_at=now)
                if store.transition(invocation_id, expected={record.state},
                                    to=InvocationState.RUNNING, **fields):
                    # The row as written, not read back: a read failing now would leave it
                    # running, and unrun.
                    return attrs.evolve(record, state=InvocationState.RUNNING, **fields)
                record = store.get(invocation_id)  # another answer came first
        except ToolhostError:
            raise
        except Exception as exc:
            raise ApprovalNotRecorded(invocation_id, exc) from exc
        if record.state is InvocationState.DENIED:
            raise InvocationStateError(f"invocation {invocation_id} was denied")
        return self._pipeline.outcome_of(record)

    def denial(self, invocation_id: str, approver: str, reason: str) -> Resumed:
        """End the row as ``denied`` (the reason stays on the row; the model reads
        DENIED_TEXT), saying whether this call acted on the row: a row denied already keeps
        its first approver and reason, and ``acted`` is False.

        :raises InvocationNotFound: no such row.
        :raises InvocationStateError: the row is neither awaiting approval nor denied.
        """
        pipeline = self._pipeline
        record = pipeline.invocations.get(invocation_id)
        now = pipeline.clock.now()
        if not pipeline.invocations.transition(
            invocation_id, expected={InvocationState.AWAITING_APPROVAL},
            to=InvocationState.DENIED, approver=approver, denial_reason=reason,
            decided_at=now, finished_at=now,
        ):
            current = pipeline.invocations.get(invocation_id)
            if current.state is InvocationState.DENIED:
                return Resumed(pipeline.outcome_of(current), acted=False)
            raise InvocationStateError(
                f"invocation {invocation_id} is {current.state.value}, not awaiting approval"
            )
        get_logger(invocation_id=invocation_id, run_id=record.run_id).info(
            "pipeline.denied", step=7, approver=approver, reason=reason)
        outcome = pipeline.recorded(invocation_id)
        if pipeline.telemetry is not None:
            self._approval_decided(attrs.evolve(record, decided_at=now), "denied")
            # Nothing ran: the call's time is its wait, counted above, not the pipeline's.
            pipeline.telemetry.instruments.call_ended(outcome, 0.0)
        return Resumed(outcome, acted=True)

    def _approval_decided(self, record: InvocationRecord, decision: str) -> None:
        """How long the row waited for its approval or denial (its pause to the decision)."""
        telemetry = self._pipeline.telemetry
        if telemetry is None or record.decided_at is None:
            return
        waited = (record.decided_at - record.created_at).total_seconds()
        telemetry.instruments.approval_decided(record.tool_name, decision, waited)
