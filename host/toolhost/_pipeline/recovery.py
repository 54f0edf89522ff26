"""Recovery: the ``running`` rows whose owning process is gone (killed mid-call), settled.

A NON_IDEMPOTENT or CONDITIONALLY_IDEMPOTENT call is never run again: it ends failed with
``tool.internal.interrupted`` (it may or may not have taken effect). An IDEMPOTENT or READ_ONLY
one is run again here, as an approved call resumes (``Pipeline.run_resumed``), unless its tool
is not registered, the policy cell now denies it or now wants an approval it never had, or the
caller says not to (then it ends failed with the same code, retryable), or its run's deadline
has passed (the same code, not retryable: its body did start). A row whose owner is
alive, or cannot be checked from here, is left alone. ``recover_interrupted`` is that recovery
without re-running anything: synchronous, writing to the store directly, so a server runs it
on a worker thread while its loop serves calls.

This process's own calls whose outcome the store could not take when they ended
(``Pipeline``'s store failing) are handed here (``settle_later``) and written by the next
recovery, so a row is never left ``running`` for as long as this process lives.

A row changed behind the store's back so that it holds no record (``InvocationRecordDamaged``)
is reported and left as it is: nothing it says can be trusted to settle it by, and it must not
keep every other row from being settled.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from toolhost._model import host_reasons as core_messages
from toolhost._model.invocations import (
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    OwnerState,
)
from toolhost._model.outcome import Outcome, ToolFailure, ToolFailureKind
from toolhost._model.spec import Idempotency
from toolhost._pipeline import steps
from toolhost._pipeline.log import get_logger
from toolhost._pipeline.policy import PolicyAction
from toolhost._pipeline.rows import rows_in

if TYPE_CHECKING:
    from toolhost._model.runs import CancellationEvent
    from toolhost._pipeline.pipeline import Pipeline
    from toolhost._ports.clock import Clock
    from toolhost._ports.invocations import InvocationStore
    from toolhost._registration.refusals import Registered

__all__ = ["Recovered", "Recovery", "RecoveryAction"]

#: Calls that may be run again after their process was killed: repeating them is safe.
_RERUNNABLE = frozenset({Idempotency.READ_ONLY, Idempotency.IDEMPOTENT})


class RecoveryAction(enum.Enum):
    #: The owner is alive, or cannot be checked from here, or the row is damaged: the row is
    #: untouched.
    LEFT = "left"
    #: Settled ``failed`` with ``tool.internal.interrupted``; the tool was not run again.
    FAILED = "failed"
    #: Run again here (IDEMPOTENT or READ_ONLY); ``outcome`` is the new result.
    RERUN = "rerun"
    #: Another process settled or took the row first.
    SETTLED_ELSEWHERE = "settled_elsewhere"


@attrs.frozen
class Recovered:
    """One row ``Recovery.recover`` looked at, and what it did."""

    invocation_id: str
    tool: str
    version: str | None
    action: RecoveryAction
    #: One line for the operator: why this action.
    reason: str
    outcome: Outcome | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "invocation_id": self.invocation_id, "tool": self.tool, "version": self.version,
            "action": self.action.value, "reason": self.reason,
            "outcome": self.outcome.to_json() if self.outcome is not None else None,
        }


class Recovery:
    """Recovery for one pipeline: its rows, its registry and policy, its steps 8 to 13."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        #: Rows of this process's calls whose outcome could not be written (the store was
        #: lost mid-call): id -> the row as it should end (``settle_later``).
        self._unsettled: dict[str, InvocationRecord] = {}
        #: The damaged rows already logged: a server's periodic pass logs each once.
        self._damaged_logged: set[str] = set()

    @property
    def _store(self) -> InvocationStore:
        return self._pipeline.invocations

    @property
    def _clock(self) -> Clock:
        return self._pipeline.clock

    def settle_later(self, interrupted: InvocationRecord) -> None:
        """A row of this process's call that the store refused to end (``interrupted``, as it
        should end): the next recovery writes it, once the store takes writes again."""
        self._unsettled[interrupted.id] = interrupted

    async def recover(self, *, rerun: bool = True,
                      cancellation: CancellationEvent | None = None) -> list[Recovered]:
        """Settle every ``running`` row whose owning process is gone; report every row looked
        at, oldest first (the ``running`` rows, then any left ``approved``).

        :param rerun: run IDEMPOTENT and READ_ONLY calls again (the default); False ends them
            failed with ``tool.internal.interrupted``, retryable, like the others but safe to
            repeat (``recover_interrupted``).
        :param cancellation: once set (the operator's Ctrl-C), the call run again ends as a
            cancelled one (``tool.cancelled.run_cancelled``), and no row is looked at after
            it: the rows looked at so far are reported.
        """
        if not rerun:
            return self.recover_interrupted()
        report = self._settle_own()
        for record in self._rows(InvocationState.RUNNING):
            if cancellation is not None and cancellation.cancelled:
                return report  # the rows not looked at are the next recovery's, as they were
            if isinstance(record, InvocationRecordDamaged):
                report.append(self._damaged(record))
                continue
            looked_at = self._settle_gone(record, rerun=True)
            report.append(looked_at if isinstance(looked_at, Recovered)
                          else await self._rerun(record, *looked_at, cancellation))
        report.extend(self._approved_left())
        return report

    def recover_interrupted(self, stopping: threading.Event | None = None) -> list[Recovered]:
        """``recover(rerun=False)``, synchronously: no row is run again, so nothing here needs
        a loop, and every write goes to the store directly (compare-and-set ``settle``), never
        through the group commit queue, whose flush runs on the loop that queued it. A worker
        thread may run this while the loop serves calls (``toolhost serve``'s periodic pass).

        :param stopping: once set, no store call is begun after the one under way; the rows
            looked at so far are reported (a server shutting down waits for one call only).
        """
        report = self._settle_own(stopping)
        if _stopped(stopping):
            return report
        for record in self._rows(InvocationState.RUNNING):
            if _stopped(stopping):
                return report
            if isinstance(record, InvocationRecordDamaged):
                report.append(self._damaged(record))
                continue
            looked_at = self._settle_gone(record, rerun=False, stopping=stopping)
            # rerun=False never hands a row back to run: _why_not_rerun always says why not.
            assert isinstance(looked_at, Recovered)
            report.append(looked_at)
        if not _stopped(stopping):
            report.extend(self._approved_left())
        return report

    def _approved_left(self) -> list[Recovered]:
        return [self._damaged(record) if isinstance(record, InvocationRecordDamaged)
                else _recovered(record, RecoveryAction.LEFT,
                                f"approved but not started: toolhost approve {record.id} runs it")
                for record in self._rows(InvocationState.APPROVED)]

    def _rows(self, state: InvocationState) -> Sequence[InvocationRecord | InvocationRecordDamaged]:
        return rows_in(self._store, state)

    def _damaged(self, damaged: InvocationRecordDamaged) -> Recovered:
        """A damaged row, reported and left as it is (logged once by this recovery)."""
        if damaged.id not in self._damaged_logged:
            self._damaged_logged.add(damaged.id)
            get_logger(invocation_id=damaged.id).warning(
                "pipeline.recover_skipped_damaged", field=damaged.field)
        return Recovered(
            damaged.id, damaged.tool_name or "", damaged.tool_version, RecoveryAction.LEFT,
            f"its record is damaged ({damaged.field}): left as it is; it was changed outside "
            "toolhost (restore it from a backup)")

    def _settle_gone(self, record: InvocationRecord, rerun: bool,
                     stopping: threading.Event | None = None) -> (
            Recovered | tuple[Registered, str, Any]):
        """A ``running`` row left (its owner alive, or not checkable) or settled INTERRUPTED
        without running it; or, to run it again, its tool, its owner described and a log.
        ``stopping``: see ``recover_interrupted`` (the owner check is one store call, the
        settle another)."""
        owner = _describe_owner(record.owner)
        state = self._store.owner_state(record.owner)
        if state is OwnerState.ALIVE:
            return _recovered(record, RecoveryAction.LEFT, f"running in {owner}, alive")
        if state is OwnerState.UNKNOWN:
            return _recovered(record, RecoveryAction.LEFT,
                              f"running in {owner}, which cannot be checked from here yet "
                              "(another pid namespace, or a database server that just "
                              "restarted): run toolhost recover where it ran, or again later")
        log = get_logger(invocation_id=record.id, run_id=record.run_id, tool=record.tool_name)
        try:
            registered: Registered | None = self._pipeline.registry.resolve(
                record.tool_name, record.tool_version)
        except LookupError:
            registered = None
        why_not = self._why_not_rerun(record, registered, rerun)
        if why_not is not None or registered is None:
            # Retryable only where a retry could run: never in a run past its deadline (D433).
            safe = (registered is not None and registered.spec.idempotency in _RERUNNABLE
                    and not self._past_run_deadline(record))
            return self._settle_interrupted(record, owner, why_not or "", safe, log, stopping)
        return registered, owner, log

    async def _rerun(self, record: InvocationRecord, registered: Registered, owner: str,
                     log: Any, cancellation: CancellationEvent | None = None) -> Recovered:
        """Run again here a row whose owner is gone, once this process has taken it."""
        # Take the row over: compare-and-set on its dead owner, so one recoverer runs it.
        if not self._store.settle(record.id, from_owner=record.owner,
                                  to=InvocationState.RUNNING, owner=self._store.owner(),
                                  started_at=self._clock.now()):
            return _recovered(record, RecoveryAction.SETTLED_ELSEWHERE,
                              "settled by another process meanwhile")
        taken = self._store.get(record.id)
        log.warning("pipeline.recovered", action="rerun", owner=owner,
                    idempotency=registered.spec.idempotency.value)
        try:
            bound = steps.bind_approval(registered, taken)  # the arguments recorded, unchanged
        except ToolFailure as failure:
            outcome = await self._pipeline.persist_failure(taken, failure, log)
        else:
            outcome = await self._pipeline.run_resumed(
                registered, attrs.evolve(taken, arguments=bound.arguments), log, cancellation)
        return _recovered(
            record, RecoveryAction.RERUN,
            f"{owner} is gone; {registered.spec.idempotency.value}, so run again here: "
            f"{outcome.status.value}", outcome)

    def _why_not_rerun(self, record: InvocationRecord, registered: Registered | None,
                       rerun: bool) -> str | None:
        """Why a row whose owner is gone is not run again, or None to run it again."""
        if registered is None:
            return f"{record.tool_name} {record.tool_version} is not registered here"
        idempotency = registered.spec.idempotency
        if idempotency not in _RERUNNABLE:
            return f"{idempotency.value}, never run again"
        if self._past_run_deadline(record):
            # Decided before the row is taken: step 8 would refuse the rerun as "did not run"
            # over the dead owner's started_at and owner, though its body had started (D85).
            return "its run's deadline passed"
        if not rerun:
            return f"{idempotency.value}, not run again here (safe to repeat)"
        decision = steps.decide_policy(self._pipeline.policy, registered)
        if decision.action is PolicyAction.DENY:
            return f"policy now denies {decision.rule}"
        if decision.action is PolicyAction.REQUIRE_APPROVAL and record.approver is None:
            return f"policy now requires approval for {decision.rule}"
        return None

    def _past_run_deadline(self, record: InvocationRecord) -> bool:
        """Whether the row's run deadline (on the row, so any process can tell) has passed."""
        return record.run_deadline is not None and self._clock.now() >= record.run_deadline

    def _settle_interrupted(self, record: InvocationRecord, owner: str, why: str,
                            retryable: bool, log: Any,
                            stopping: threading.Event | None = None) -> Recovered:
        """End a row whose owner is gone ``failed`` with INTERRUPTED, without running it.
        Once ``stopping`` is set the row is left for the next recovery, and a row settled
        is reported without reading it back: no store call is begun after a stop."""
        if _stopped(stopping):
            return _recovered(record, RecoveryAction.LEFT,
                              f"{owner} is gone; left for the next recovery (stopping)")
        detail = {"owner": dict(record.owner) if record.owner is not None else None,
                  "not_run_again": why}
        if not self._store.settle(
            record.id, from_owner=record.owner, to=InvocationState.FAILED,
            finished_at=self._clock.now(), failure_kind=ToolFailureKind.INTERNAL.value,
            reason_code=core_messages.INTERRUPTED, retryable=retryable, failure_detail=detail,
        ):
            return _recovered(record, RecoveryAction.SETTLED_ELSEWHERE,
                              "settled by another process meanwhile")
        log.warning("pipeline.recovered", action="failed", owner=owner, why=why)
        outcome = (None if _stopped(stopping)
                   else self._pipeline.recorded(record.id))
        return _recovered(
            record, RecoveryAction.FAILED,
            f"{owner} is gone; {why}: failed {core_messages.INTERRUPTED} (it may or may not "
            "have taken effect)", outcome)

    def _settle_own(self, stopping: threading.Event | None = None) -> list[Recovered]:
        """Write the INTERRUPTED end of this process's calls whose rows the store refused
        (``settle_later``), now that it may take them; a row still refused stays
        for the next recovery, and one another process settled meanwhile is left as it is.
        Safe on a worker thread: each write goes to the store directly."""
        report = []
        # A snapshot: the loop's calls may add rows meanwhile (they are the next pass's).
        for invocation_id, interrupted in list(self._unsettled.items()):
            if _stopped(stopping):
                break
            try:
                finished = self._store.settle(
                    invocation_id, from_owner=interrupted.owner, to=InvocationState.FAILED,
                    finished_at=interrupted.finished_at,
                    failure_kind=interrupted.failure_kind, reason_code=interrupted.reason_code,
                    retryable=interrupted.retryable, failure_detail=interrupted.failure_detail)
            except Exception:
                continue
            self._unsettled.pop(invocation_id, None)
            report.append(_recovered(
                interrupted,
                RecoveryAction.FAILED if finished else RecoveryAction.SETTLED_ELSEWHERE,
                "this process's call, whose outcome the store could not take when it ended"))
        return report


def _describe_owner(owner: Mapping[str, Any] | None) -> str:
    """The owner for the operator: ``pid 4242 on build-7``."""
    if owner is None:
        return "a process recorded before owners were"
    return f"pid {owner.get('pid')} on {owner.get('host')}"


def _stopped(stopping: threading.Event | None) -> bool:
    """Whether a recovery told to stop (``recover_interrupted``) has been."""
    return stopping is not None and stopping.is_set()


def _recovered(record: InvocationRecord, action: RecoveryAction, reason: str,
               outcome: Outcome | None = None) -> Recovered:
    return Recovered(record.id, record.tool_name, record.tool_version, action, reason, outcome)
