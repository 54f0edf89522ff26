"""The execution pipeline: every call runs through these thirteen steps, each a named function.

Numbered as DESIGN §4 so the spec's references hold:

 1 resolve (name, version)            8 execute under min(timeout_s, run deadline), cancellable
 2 enabled for this run               9 WorkspaceEscape -> ToolValidationError
 3 scopes                            10 validate output against output_schema
 4 validate arguments, defaults      11 clamp trust to the lower of spec and result
 5 policy decision                   12 excerpt and artifactize, or OUTPUT_TOO_LARGE
 6 require approval: persist, pause  13 persist the outcome on the tool_invocations row
 7 (resume) approval binds the digest; a denial ends the row, no ToolResult

A step that ends the invocation raises ``_Refused`` with the ToolFailure to render; the
pipeline persists exactly one row per invocation and returns an ``Outcome``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import fastjsonschema

from toolhost._model import host_reasons as core_messages
from toolhost._model.artifacts import ArtifactOrigin
from toolhost._model.context import Principal, ToolCallable, ToolExecutionContext
from toolhost._model.digest import argument_digest, canonical_json
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.outcome import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    ToolOutput,
    ToolValidationError,
    failure_kind_of,
)
from toolhost._model.runs import CancellationEvent, Run
from toolhost._model.spec import Idempotency, Trust
from toolhost._model.workspace import NO_WORKSPACE, WorkspaceEscape
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._pipeline.excerpt import excerpt
from toolhost._pipeline.execution import Cancelled, DeadlineExceeded, run_tool
from toolhost._pipeline.log import get_logger
from toolhost._pipeline.policy import Policy, PolicyAction, PolicyDecision
from toolhost._ports.artifacts import ArtifactStore
from toolhost._ports.clock import Clock
from toolhost._ports.invocations import InvocationStore
from toolhost._registration.refusals import HARD_OUTPUT_CEILING, Registered
from toolhost._registration.registry import Registry, UnknownTool, UnknownVersion

__all__ = [
    "InvocationStateError",
    "Pipeline",
    "ToolCall",
    "call_deadline",
    "check_enabled",
    "check_scopes",
    "clamp_trust",
    "decide_policy",
    "digest_arguments",
    "limit_output",
    "render_failure",
    "resolve",
    "validate_arguments",
    "validate_output",
]


@attrs.frozen
class ToolCall:
    """One call the model made in a step."""

    name: str
    arguments: Any
    version: str | None = None


class InvocationStateError(Exception):
    """approve/deny on an invocation that is not awaiting approval."""


class _Refused(Exception):
    """Internal: a step ended the invocation with this failure."""

    def __init__(self, failure: ToolFailure, artifacts: Sequence[Mapping[str, Any]] = ()) -> None:
        self.failure = failure
        self.artifacts = tuple(artifacts)


# ---------------------------------------------------------------------- step 1: resolve


def resolve(registry: Registry, name: str, version: str | None) -> Registered:
    """Unversioned → latest active, pinned → exact."""
    try:
        return registry.resolve(name, version)
    except UnknownTool:
        raise _Refused(ToolFailure(core_messages.UNKNOWN_TOOL, detail={"tool": name})) from None
    except UnknownVersion:
        raise _Refused(
            ToolFailure(core_messages.UNKNOWN_VERSION, detail={"tool": name, "version": version})
        ) from None


# ---------------------------------------------------------------------- step 2: enabled


def check_enabled(run: Run, registered: Registered) -> None:
    """The run's enabled_tools, or the default roster when it names none."""
    if run.enabled_tools is None:
        enabled = registered.tool.default_enabled
    else:
        enabled = registered.spec.name in run.enabled_tools
    if not enabled:
        raise _Refused(ToolFailure(core_messages.NOT_ENABLED, detail={"run": run.id}))


# ---------------------------------------------------------------------- step 3: scopes


def check_scopes(principal: Principal, registered: Registered) -> None:
    missing = sorted(set(registered.spec.required_scopes) - principal.scopes)
    if missing:
        raise _Refused(ToolFailure(core_messages.MISSING_SCOPE, detail={"missing": missing}))


# ---------------------------------------------------------------------- step 4: validate


def validate_arguments(registered: Registered, arguments: Any) -> dict[str, Any]:
    """Validate against input_schema and apply defaults (on a copy: the caller's is untouched).

    A failed rule the tool maps to a reason of its own (``Reason(schema_rules=...)``) fails
    with that reason; every other failure is the host's one validation failure.
    """
    if not isinstance(arguments, Mapping):
        raise _Refused(ToolValidationError(detail={"problem": "arguments are not an object"}))
    data = copy.deepcopy(dict(arguments))
    try:
        registered.validate_input(data)
    except fastjsonschema.JsonSchemaValueException as exc:
        detail = {"problem": exc.message, "rule": exc.rule}
        pointer = "".join(f"/{part}" for part in (exc.path or [])[1:])
        code = registered.schema_reasons.get((pointer, str(exc.rule)))
        failure = ToolValidationError(detail=detail) if code is None else ToolFailure(
            code, detail=detail)
        raise _Refused(failure) from None
    return data


def digest_arguments(registered: Registered, data: Mapping[str, Any]) -> str:
    """The digest an approval binds to; the last check of step 4.

    A lone surrogate is a valid Python str but not text: it has no UTF-8 form, so it could be
    neither digested, stored nor handed on. It is an argument error, found here by the one
    encoding of the arguments the pipeline makes.
    """
    try:
        return argument_digest(registered.spec.name, registered.spec.version, data)
    except (UnicodeEncodeError, ValueError, TypeError):
        raise _Refused(
            ToolValidationError(detail={"problem": "arguments are not encodable as UTF-8 JSON"})
        ) from None


# ---------------------------------------------------------------------- step 5: policy


def decide_policy(policy: Policy, registered: Registered) -> PolicyDecision:
    return policy.decide(registered.spec.side_effect, registered.spec.risk)


# ---------------------------------------------------------------------- steps 8-9: execute


def call_deadline(registered: Registered, run_deadline: float | None, now: float) -> float:
    """This call's deadline, a monotonic instant: min(now + timeout_s, the run's deadline)."""
    deadline = now + float(registered.spec.timeout_s)
    return deadline if run_deadline is None else min(deadline, run_deadline)


def _timeout_retryable(registered: Registered) -> bool:
    # A timed-out call may have done its work; repeating it is safe only when repetition is.
    return registered.spec.idempotency in (Idempotency.READ_ONLY, Idempotency.IDEMPOTENT)


async def execute(
    registered: Registered,
    tool: ToolCallable,
    arguments: Mapping[str, Any],
    context: ToolExecutionContext,
    call: CancellationEvent,
    run: Run,
    timeout: float,
) -> Any:
    try:
        return await run_tool(
            tool, arguments, context,
            timeout=timeout, call=call, run=run.cancellation,
        )
    except DeadlineExceeded:
        raise _Refused(
            ToolFailure(core_messages.DEADLINE, detail={"timeout_s": registered.spec.timeout_s},
                        retryable=_timeout_retryable(registered))
        ) from None
    except Cancelled:
        raise _Refused(ToolFailure(core_messages.RUN_CANCELLED)) from None
    except WorkspaceEscape as escape:
        # Step 9: one shape and one message for every workspace tool's rejected path.
        raise _Refused(ToolValidationError(detail={"workspace": escape.reason})) from None
    except ToolFailure as failure:
        if failure.reason_code in registered.tool.reason_codes:
            raise _Refused(failure) from None
        raise _Refused(
            ToolFailure(
                core_messages.INTERNAL_UNDECLARED,
                detail={"reason_code": failure.reason_code, "detail": dict(failure.detail)},
            )
        ) from None
    except Exception as exc:  # the model gets the static message; operators the detail
        raise _unexpected(exc) from None


def _unexpected(exc: Exception) -> _Refused:
    return _Refused(
        ToolFailure(
            core_messages.INTERNAL_UNEXPECTED,
            detail={"exception": type(exc).__name__, "error": str(exc)},
        )
    )


def build_tool(build: Callable[[Registered], ToolCallable], registered: Registered) -> (
    ToolCallable
):
    """A tool whose factory raises (a missing credential, say) fails as INTERNAL."""
    try:
        return build(registered)
    except Exception as exc:
        raise _unexpected(exc) from None


# ---------------------------------------------------------------------- step 10: output


def validate_output(registered: Registered, output: object) -> ToolOutput:
    problem = None
    if not isinstance(output, ToolOutput):
        problem = "not a ToolOutput"
    elif not isinstance(output.content, str):
        problem = "content is not text"
    elif output.output_trust is not None and not isinstance(output.output_trust, Trust):
        problem = "output_trust is not a Trust member"
    else:
        try:
            # Output validators never apply defaults, so no defensive copy is needed.
            registered.validate_output(output.structured)
        except (fastjsonschema.JsonSchemaValueException, TypeError, ValueError) as exc:
            problem = str(exc)
    if problem is not None or not isinstance(output, ToolOutput):
        raise _Refused(ToolFailure(core_messages.OUTPUT_SCHEMA, detail={"problem": problem}))
    return output


# ---------------------------------------------------------------------- step 11: trust


def clamp_trust(declared: Trust, returned: Trust | None) -> Trust:
    """Effective trust is the lower of the spec's and the result's: a tool may only lower it."""
    return declared if returned is None else Trust.lower(declared, returned)


# ---------------------------------------------------------------------- step 12: size


@attrs.frozen
class _Shaped:
    content: str
    structured: Mapping[str, Any] | None
    artifacts: tuple[Mapping[str, Any], ...] = ()
    truncated: bool = False


def limit_output(
    registered: Registered,
    output: ToolOutput,
    trust: Trust,
    writer: RunArtifactWriter,
    invocation_id: str,
) -> _Shaped:
    """Within maximum_output_bytes: unchanged. Over it: excerpt plus the whole as an artifact.
    Over the hard ceiling: OUTPUT_TOO_LARGE, with the partial output artifactized."""
    content = output.content.encode("utf-8")
    structured = canonical_json(dict(output.structured))
    size = max(len(content), len(structured))
    limit = registered.spec.maximum_output_bytes
    if size <= limit:
        return _Shaped(output.content, dict(output.structured))
    name = f"{registered.spec.name}-{invocation_id}"
    if size > HARD_OUTPUT_CEILING:
        partial = writer.write(
            origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE, name=f"{name}.partial.txt",
            media_type="text/plain; charset=utf-8", content=content[:HARD_OUTPUT_CEILING],
            trust=trust,
        )
        raise _Refused(
            ToolFailure(core_messages.HARD_CEILING, detail={"bytes": size}),
            artifacts=[attrs.asdict(partial)],
        )
    whole = writer.write(
        origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE, name=f"{name}.json",
        media_type="application/json",
        content=canonical_json({"content": output.content, "structured": output.structured}),
        trust=trust,
    )
    text = excerpt(output.content, limit, whole.id, whole.checksum)
    return _Shaped(text, None, (attrs.asdict(whole),), truncated=True)


# ---------------------------------------------------------------------- rendering


def render_failure(messages: Mapping[str, str], failure: ToolFailure) -> FailureInfo:
    """The model-facing failure: the static table entry, byte for byte, never the detail."""
    return FailureInfo(
        kind=failure_kind_of(failure.reason_code),
        reason_code=failure.reason_code,
        message=messages[failure.reason_code],
        retryable=failure.retryable,
        detail=dict(failure.detail),
    )


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
        invocation_id = self._new_id()
        log = get_logger(invocation_id=invocation_id, run_id=run.id, tool=name)
        created = self.clock.now()
        registered: Registered | None = None
        try:
            registered = resolve(self.registry, name, version or run.pins.get(name))
            log.debug("pipeline.resolve", step=1, version=registered.spec.version)
            check_enabled(run, registered)
            log.debug("pipeline.enabled", step=2)
            check_scopes(run.principal, registered)
            log.debug("pipeline.scopes", step=3)
            data = validate_arguments(registered, arguments)
            digest = digest_arguments(registered, data)
            log.debug("pipeline.validate", step=4)
        except _Refused as refused:
            return self._fail_before_running(
                run, invocation_id, name, registered, arguments, created, refused, log
            )
        spec = registered.spec
        decision = decide_policy(self.policy, registered)
        log.debug("pipeline.policy", step=5, action=decision.action.value, rule=decision.rule)
        record = InvocationRecord(
            id=invocation_id, run_id=run.id, principal_id=run.principal.id,
            scopes=tuple(sorted(run.principal.scopes)), conversation_id=run.conversation_id,
            tool_name=spec.name, tool_version=spec.version, arguments=data,
            argument_digest=digest,
            state=InvocationState.RUNNING, policy=decision.to_json(), created_at=created,
            started_at=created,
        )
        if decision.action is PolicyAction.DENY:
            denied = attrs.evolve(
                record, state=InvocationState.DENIED, decided_at=created, finished_at=created,
                started_at=None)
            self.invocations.insert(denied)
            log.info("pipeline.denied", step=5, rule=decision.rule)
            return self._outcome(denied)
        if decision.action is PolicyAction.REQUIRE_APPROVAL:
            # Step 6: a pause, not a result. The row is durable, so it survives a restart.
            paused = attrs.evolve(record, state=InvocationState.AWAITING_APPROVAL, started_at=None)
            self.invocations.insert(paused)
            log.info("pipeline.awaiting_approval", step=6, digest=record.argument_digest)
            return self._outcome(paused)
        # A call that changes anything is recorded as running before it runs, so a crash
        # mid-call leaves evidence; a read-only call's row is written once, at step 13.
        inserted = spec.idempotency is not Idempotency.READ_ONLY
        if inserted:
            self.invocations.insert(record)
        return await self._run_and_persist(run, registered, record, log, inserted=inserted)

    def _fail_before_running(
        self, run: Run, invocation_id: str, name: str, registered: Registered | None,
        arguments: Any, created: Any, refused: _Refused, log: Any,
    ) -> Outcome:
        info = render_failure(self.messages, refused.failure)
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

    async def _run_and_persist(
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
            artifacts=writer, deadline=call_deadline(registered, run.deadline, self._monotonic()),
            cancellation=call, conversation_id=run.conversation_id, user_turn=run.user_turn,
        )
        try:
            tool = build_tool(self._build, registered)
            raw = await execute(registered, tool, record.arguments, context, call, run,
                                context.deadline - self._monotonic())
            log.debug("pipeline.execute", step=8)
            output = validate_output(registered, raw)
            log.debug("pipeline.output", step=10)
            trust = clamp_trust(registered.spec.output_trust, output.output_trust)
            log.debug("pipeline.trust", step=11, trust=trust.value)
            shaped = limit_output(registered, output, trust, writer, record.id)
            log.debug("pipeline.size", step=12, truncated=shaped.truncated)
        except _Refused as refused:
            return self._persist_failure(record, refused, log, inserted=inserted)
        except Exception as exc:
            # A fault of the host's own after the tool ran (the artifact store's disk, say):
            # the row is still finished, never left running.
            return self._persist_failure(record, _unexpected(exc), log, inserted=inserted)
        fields = dict(
            result_structured=shaped.structured, result_content=shaped.content,
            output_trust=trust.value, artifact_refs=shaped.artifacts,
        )
        log.info("pipeline.succeeded", step=13, truncated=shaped.truncated)
        return self._persist(record, InvocationState.SUCCEEDED, fields, inserted=inserted)

    def _persist_failure(
        self, record: InvocationRecord, refused: _Refused, log: Any, *, inserted: bool = True,
    ) -> Outcome:
        info = render_failure(self.messages, refused.failure)
        log.info("pipeline.failed", step=13, reason_code=info.reason_code,
                 detail=dict(info.detail))
        return self._persist(record, InvocationState.FAILED, dict(
            failure_kind=info.kind.value, reason_code=info.reason_code,
            retryable=info.retryable, failure_detail=dict(info.detail),
            artifact_refs=refused.artifacts,
        ), inserted=inserted)

    def _persist(
        self, record: InvocationRecord, state: InvocationState, fields: Mapping[str, Any],
        *, inserted: bool = True,
    ) -> Outcome:
        """Step 13: the outcome lands on the row, once: only a ``running`` row may finish."""
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

    # ------------------------------------------------------------------ approvals

    async def approve(
        self, invocation_id: str, approver: str, *, cancellation: CancellationEvent | None = None
    ) -> Outcome:
        """Approve and run exactly the validated arguments that were approved, once.

        Calling it twice, or from two processes at once, runs the tool once: the row's
        compare-and-set from ``approved`` to ``running`` is the lock, and the loser gets the
        row as it stands. ``cancellation`` lets the caller cancel the approved execution (a
        server whose client went away); by default nothing can.
        """
        record = self.invocations.get(invocation_id)
        log = get_logger(invocation_id=invocation_id, run_id=record.run_id, tool=record.tool_name)
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
        record = self.invocations.get(invocation_id)
        # Step 7: the approval binds to the digest of exactly these arguments.
        if argument_digest(record.tool_name, str(record.tool_version),
                           record.arguments) != record.argument_digest:
            log.error("pipeline.digest_mismatch", step=7)
            return self._persist_failure(record, _Refused(ToolFailure(
                core_messages.DIGEST_MISMATCH,
                detail={"problem": "arguments changed after approval"})), log)
        registered = self.registry.resolve(record.tool_name, record.tool_version)
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
            return await self._run_and_persist(run, registered, record, log)
        finally:
            if workspace is not None:
                workspace.discard()

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


def _jsonable(value: Any) -> Any:
    """Arguments as the model sent them, for the row, even when they are not an object."""
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
