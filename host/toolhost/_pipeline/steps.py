"""The pipeline's steps that need no store: one named function each, numbered as in pipeline.py.

 1 ``resolve``            name and version to a registration
 2 ``check_enabled``      the run's enabled_tools, or the default roster
 3 ``check_scopes``       required_scopes within the principal's
 4 ``prepare``            validate (defaults applied, schema rules mapped) and digest;
   ``check_user_words``   a tool that needs the person's words has a user turn to check
 5 ``decide_policy``      the policy matrix: allow, require approval or deny
 7 ``bind_approval``      (resume) the row's arguments still digest to the approved digest
 8 ``check_run_deadline``  a run past its deadline runs nothing more (also before step 6)
   ``build_tool``, ``execute``  build the callable; run it under its deadline, cancellable
 9 ``workspace_escape``   WorkspaceEscape -> ToolValidationError (``workspace_unavailable``:
                            WorkspaceUnavailable -> a retryable host failure)
10 ``validate_output``    the structured output against output_schema
11 ``clamp_trust``        the lower of the spec's trust and the result's
12 ``limit_output``       excerpt and artifactize, or OUTPUT_TOO_LARGE

Steps 6 (pause) and 13 (persist) write the invocation row, so they are the ``Pipeline``'s own
methods (``toolhost._pipeline.pipeline``), as is the step-5 denial.

A step that ends the invocation raises ``ToolFailure``, the same public exception a tool body
raises, carrying the reason code and the operator-only detail; the pipeline renders it from
the message table and persists it. Step 12's OUTPUT_TOO_LARGE also carries the partial output
it wrote as an artifact, so it is the small subclass ``OutputTooLarge``.
"""

from __future__ import annotations

import asyncio
import copy
import errno
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import fastjsonschema

from toolhost._model import host_reasons as core_messages
from toolhost._model.artifacts import ArtifactOrigin, ArtifactRef, ArtifactStoreUnavailable
from toolhost._model.context import Principal, ToolCallable, ToolExecutionContext
from toolhost._model.digest import argument_digest, canonical_json, sha256_digest
from toolhost._model.invocations import InvocationRecord
from toolhost._model.nesting import MAX_ARGUMENT_DEPTH, nests_deeper
from toolhost._model.outcome import (
    FailureInfo,
    ToolFailure,
    ToolOutput,
    ToolValidationError,
    failure_kind_of,
)
from toolhost._model.printable import escaped, prints
from toolhost._model.runs import CancellationEvent, Run
from toolhost._model.spec import Idempotency, Trust
from toolhost._model.workspace import RunEnded, WorkspaceEscape, WorkspaceUnavailable
from toolhost._pipeline.excerpt import excerpt
from toolhost._pipeline.execution import BodyAborted, Cancelled, DeadlineExceeded, run_tool
from toolhost._pipeline.policy import Policy, PolicyAction, PolicyDecision
from toolhost._ports.tool_artifacts import ArtifactWriter
from toolhost._registration.refusals import (
    HARD_OUTPUT_CEILING,
    MAX_NAME_LENGTH,
    NAME_PATTERN,
    Registered,
)
from toolhost._registration.registry import Registry, UnknownTool, UnknownVersion
from toolhost._registration.schema import IntegerPosition

__all__ = [
    "Interrupted",
    "OutputTooLarge",
    "Prepared",
    "Shaped",
    "bind_approval",
    "build_tool",
    "call_deadline",
    "check_enabled",
    "check_run_deadline",
    "check_scopes",
    "check_user_words",
    "clamp_trust",
    "decide_policy",
    "execute",
    "limit_output",
    "limit_output_off_loop",
    "prepare",
    "recorded_name",
    "render_failure",
    "resolve",
    "shown",
    "unexpected",
    "validate_output",
    "workspace_escape",
    "workspace_unavailable",
    "workspace_unopened",
]


class OutputTooLarge(ToolFailure):
    """Step 12's failure: OUTPUT_TOO_LARGE, with the partial output already artifactized."""

    def __init__(self, size: int, artifacts: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(core_messages.HARD_CEILING, detail={"bytes": size})
        self.artifacts = tuple(artifacts)


class Interrupted(ToolFailure):
    """INTERNAL_UNEXPECTED for a body's KeyboardInterrupt that may be the operator's Ctrl-C
    (``BodyAborted.interrupt``): the pipeline finishes the row, then raises ``interrupt``."""

    def __init__(self, interrupt: BaseException) -> None:
        super().__init__(core_messages.INTERNAL_UNEXPECTED,
                         detail={"exception": type(interrupt).__name__, "error": str(interrupt)})
        self.interrupt = interrupt


def unexpected(exc: BaseException, registered: Registered | None = None) -> ToolFailure:
    """INTERNAL_UNEXPECTED for an exception nobody declared: the model gets the static message,
    operators the exception's type and text. An artifact store that could not be reached (a
    tool's write or read, or step 12's capture) is ARTIFACT_STORE instead: retryable when the
    tool is safe to repeat, and otherwise the non-retryable code that warns it may have taken
    effect (``registered`` unknown counts as not safe)."""
    if isinstance(exc, ArtifactStoreUnavailable):
        safe = registered is not None and _timeout_retryable(registered)
        code = (core_messages.ARTIFACT_STORE if safe
                else core_messages.ARTIFACT_STORE_MAY_HAVE_TAKEN_EFFECT)
        return ToolFailure(code, retryable=safe,
                           detail={"exception": type(exc).__name__, "error": str(exc)})
    return ToolFailure(
        core_messages.INTERNAL_UNEXPECTED,
        detail={"exception": type(exc).__name__, "error": str(exc)},
    )


# ---------------------------------------------------------------------- step 1: resolve


def resolve(registry: Registry, name: str, version: str | None) -> Registered:
    """Unversioned → latest active, pinned → exact. The refusal's detail holds the name (and
    version) asked for as ``shown`` gives them."""
    try:
        return registry.resolve(name, version)
    except UnknownTool:
        raise ToolFailure(core_messages.UNKNOWN_TOOL, detail={"tool": shown(name)}) from None
    except UnknownVersion:
        raise ToolFailure(
            core_messages.UNKNOWN_VERSION, detail={"tool": shown(name), "version": shown(version)}
        ) from None


#: The row's ``tool_name`` for a call whose name no tool could have (outside the registry's
#: grammar, or longer than any name it takes): a caller's text is not stored as the column
#: SQL filters and orders on (PostgreSQL's TEXT cannot hold U+0000, no store a lone
#: surrogate, and a megabyte of name would be stored whole). The detail says what was asked.
NOT_A_TOOL_NAME = "(not a tool name)"
#: The characters of a caller's name (or version) a refusal's detail keeps.
SHOWN_CHARS = 200


def recorded_name(name: Any) -> str:
    """The ``tool_name`` a call step 1 could not resolve is recorded under: ``name`` itself
    when a tool could have it, else ``NOT_A_TOOL_NAME``."""
    if isinstance(name, str) and len(name) <= MAX_NAME_LENGTH and NAME_PATTERN.fullmatch(name):
        return name
    return NOT_A_TOOL_NAME


#: A failure's detail keeps at most this many characters of text in all (its keys, strings,
#: and the text standing for what JSON cannot hold): it is the operator's note on one call,
#: and a plugin's exception text or detail of megabytes was stored whole in its row (and log).
MAX_DETAIL_CHARS = 64 * 1024
#: What stands for a value the walk meets again inside itself.
CYCLE = "(a cycle)"
#: What stands for a value nested past ``MAX_ARGUMENT_DEPTH`` levels.
DEEPER = f"(nested deeper than {MAX_ARGUMENT_DEPTH} levels)"

#: The most of a refused call's arguments its row records, encoded. Arguments a step from 1 to
#: 4 refused are bounded by nothing but the door's bytes, so each such call grew the record by
#: its whole size (31 MB over stdio); the same bound as a failure's detail.
MAX_REFUSED_ARGUMENT_BYTES = MAX_DETAIL_CHARS


def recorded_refusal(arguments: Any, encoded: bytes) -> Any:
    """What a refused call's row records of ``arguments`` (``encoded`` as the row would store
    them): themselves, or past ``MAX_REFUSED_ARGUMENT_BYTES`` their size and digest."""
    if len(encoded) <= MAX_REFUSED_ARGUMENT_BYTES:
        return arguments
    return f"(arguments of {len(encoded)} bytes, too large to record; {sha256_digest(encoded)})"


def storable_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A failure's detail as the row can hold it, whatever a plugin put in it: one whose JSON
    is within ``MAX_DETAIL_CHARS`` bytes as it is; any other as JSON (``_Storable``), at most
    ``MAX_DETAIL_CHARS`` characters of text. Written raw, the row's write failed and a tool's
    own failure read as a record-store outage (D393, D401), or the encoding raised out of
    ``invoke`` (a cycle, a key that is not text)."""
    try:
        # Depth first: whether an encoder takes 5,000 levels depends on the Python (3.13's
        # does), and what the row holds must not.
        if not nests_deeper(detail) and len(canonical_json(detail)) <= MAX_DETAIL_CHARS:
            return dict(detail)
    except Exception:  # the walk below is total: nothing escapes invoke (D88)
        # Not JSON (a cycle, bytes, a lone surrogate, NaN), nested past the stack, or a
        # plugin's own Mapping whose items() raises midway as the encoder reads it.
        pass
    stored = _Storable().value(detail, 1)
    return stored if isinstance(stored, dict) else {"detail": stored}


class _Storable:
    """One walk of a detail into JSON: text with no UTF-8 form (a file name ``os.fsdecode``
    read) as its JSON escapes, as a refusal's shown name is; NaN or an infinity as its text
    (D397, D401); a set or tuple as a list; a key that is not text, bytes, an integer too long
    for text, and any other object as its ``repr`` (or what it is, when that raises); a cycle
    as ``CYCLE``, past ``MAX_ARGUMENT_DEPTH`` levels ``DEEPER``. Each value costs one of the
    ``MAX_DETAIL_CHARS`` and each text its length, so the walk ends within that many values:
    a text past what is left is cut as ``shown`` cuts a name, a container's rest counted."""

    def __init__(self) -> None:
        self.left = MAX_DETAIL_CHARS
        #: The containers the walk is inside: meeting one again is a cycle, not a shared value.
        self.path: set[int] = set()

    def value(self, value: Any, depth: int) -> Any:
        self.left -= 1
        try:
            if isinstance(value, str):
                return self.text(str.__str__(value))
            if value is None or isinstance(value, bool):
                return value
            if isinstance(value, int):
                return self.integer(value)
            if isinstance(value, float):
                # JSON has no such number (D401): the operator reads "nan", "inf".
                return float(value) if math.isfinite(value) else float.__repr__(value)
            if isinstance(value, (Mapping, list, tuple, set, frozenset)):
                return self.container(value, depth)
            if isinstance(value, (bytes, bytearray)):
                head = bytes(value[:max(self.left, 0)])
                whole = len(head) == len(value)
                return self.text(repr(head), None if whole else len(value), "bytes")
            return self.text(repr(value))
        except Exception:  # a repr or a Mapping of the plugin's own that raises
            return f"(a {type(value).__qualname__} that cannot be shown)"

    def integer(self, value: int) -> Any:
        try:
            digits = int.__repr__(value)
        except ValueError:  # past Python's digit limit for text: its size, not its digits
            return f"(an integer of {value.bit_length()} bits)"
        if len(digits) > self.left:
            return self.text(digits)
        self.left -= len(digits)
        return int(value)

    def container(self, value: Mapping[Any, Any] | Sequence[Any] | set[Any] | frozenset[Any],
                  depth: int) -> Any:
        if depth > MAX_ARGUMENT_DEPTH:
            return DEEPER
        if id(value) in self.path:
            return CYCLE
        self.path.add(id(value))
        try:
            if isinstance(value, Mapping):
                entries: dict[str, Any] = {}
                for count, (key, item) in enumerate(value.items()):
                    if self.left <= 0:
                        entries["…"] = f"({len(value) - count} more entries)"
                        break
                    name = self.text(key if isinstance(key, str) else repr(key))
                    while name in entries:  # 1 and "1" are one text: neither entry is lost
                        name = self.text(f"{name} (again)")
                    entries[name] = self.value(item, depth + 1)  # the key's text counted first
                return entries
            items: list[Any] = []
            for count, item in enumerate(value):
                if self.left <= 0:
                    items.append(f"… ({len(value) - count} more items)")
                    break
                items.append(self.value(item, depth + 1))
            return items
        finally:
            self.path.discard(id(value))

    def text(self, text: str, length: int | None = None, unit: str = "characters") -> str:
        """``text`` within what is left of the bound; past it (or when ``length`` is given,
        the length of what ``text`` shows a part of), its first characters and how long the
        whole was, in ``unit``."""
        keep = max(self.left, 0)
        kept = text[:keep]
        self.left -= len(kept)
        try:
            kept.encode("utf-8")
        except UnicodeEncodeError:
            kept = escaped(kept, one_line=False)
        if len(text) <= keep and length is None:
            return kept
        return f"{kept}… ({len(text) if length is None else length} {unit})"


def shown(value: Any) -> str:
    """A caller's name or version as a refusal's detail (and so the row) keeps it: itself
    when short and printable, else its first ``SHOWN_CHARS`` characters, what does not print
    as its JSON escape (U+0000, a lone surrogate), and how long it was."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= SHOWN_CHARS and prints(text):
        return text
    kept = escaped(text[:SHOWN_CHARS])
    return kept if len(text) <= SHOWN_CHARS else f"{kept}… ({len(text)} characters)"


# ---------------------------------------------------------------------- step 2: enabled


def check_enabled(run: Run, registered: Registered) -> None:
    """The run's enabled_tools, or the default roster when it names none."""
    if not Registry.enabled(registered, run.enabled_tools):
        raise ToolFailure(core_messages.NOT_ENABLED, detail={"run": run.id})


# ---------------------------------------------------------------------- step 3: scopes


def check_scopes(principal: Principal, registered: Registered) -> None:
    """required_scopes ⊆ the principal's scopes, else PERMISSION_DENIED (not retryable)."""
    missing = sorted(set(registered.spec.required_scopes) - principal.scopes)
    if missing:
        raise ToolFailure(core_messages.MISSING_SCOPE, detail={"missing": missing})


# ---------------------------------------------------------------------- step 4: validate


@attrs.frozen
class Prepared:
    """Step 4's result: the arguments as validated (a copy, defaults applied) and the digest
    an approval binds to, for exactly this tool and version."""

    tool: str
    version: str
    arguments: dict[str, Any]
    digest: str


def prepare(registered: Registered, arguments: Any) -> Prepared:
    """Step 4, the one place arguments are validated and digested: ``invoke`` records what it
    returns, ``approve`` re-checks a paused row with it (step 7), and the MCP server finds a
    repeated call's row by its digest."""
    if nests_deeper(arguments):
        # Before anything recurses through them (D336): copying, validating and encoding
        # each raised RecursionError about a thousand levels deep, wherever it came first.
        raise ToolValidationError(detail={
            "problem": f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels"})
    data = _validate_arguments(registered, arguments)
    for position in registered.integer_positions:
        data = _whole_numbers_as_int(data, position)
    return Prepared(registered.spec.name, registered.spec.version, data,
                    _digest_arguments(registered, data))


def _whole_numbers_as_int(value: Any, position: IntegerPosition) -> Any:
    """``value`` with each whole-number float at ``position`` an int (D404): the schema said
    integer, and a body slicing or sizing with ``3.0`` raised TypeError. A container the path
    changes something in is copied, never the caller's changed in place."""
    if not position:
        return int(value) if type(value) is float and value.is_integer() else value
    step, rest = position[0], position[1:]
    if isinstance(step, int):  # ITEMS
        if not isinstance(value, list) or (not rest and float not in map(type, value)):
            return value  # the common case, a list of ints, checked at C speed
        items = [_whole_numbers_as_int(item, rest) for item in value]
        same = all(a is b for a, b in zip(items, value, strict=True))
        return value if same else items
    if not isinstance(value, dict) or step not in value:
        return value
    found = value[step]
    changed = _whole_numbers_as_int(found, rest)
    return value if changed is found else {**value, step: changed}


def _validate_arguments(registered: Registered, arguments: Any) -> dict[str, Any]:
    """Validate against input_schema and apply defaults (on a copy: the caller's is untouched).

    A failed rule the tool maps to a reason of its own (``Reason(schema_rules=...)``) fails
    with that reason; every other failure is the host's one validation failure.
    """
    if not isinstance(arguments, Mapping):
        raise ToolValidationError(detail={"problem": "arguments are not an object"})
    # A copy for the validator to fill defaults into: its top level alone when no default
    # lies deeper (D333): a deep copy of a largest body's arguments held the loop ~0.8 s.
    data = copy.deepcopy(dict(arguments)) if registered.nested_defaults else dict(arguments)
    try:
        registered.validate_input(data)
    except fastjsonschema.JsonSchemaValueException as exc:
        detail = {"problem": exc.message, "rule": exc.rule}
        pointer = "".join(f"/{part}" for part in (exc.path or [])[1:])
        code = registered.schema_reasons.get((pointer, str(exc.rule)))
        raise (ToolValidationError(detail=detail) if code is None
               else ToolFailure(code, detail=detail)) from None
    except (ArithmeticError, ValueError):
        # The generated validator divides by a float multipleOf: an integer past a float's
        # range overflows there, and NaN fails int() (D401). The model's number, its error.
        raise ToolValidationError(detail={
            "problem": "a number in the arguments cannot be checked against the schema "
                       "(too large, NaN or an infinity)"
        }) from None
    return data


#: What encoding a value as UTF-8 JSON (``canonical_json``, ``str.encode``) raises when it has
#: no such form: a lone surrogate (UnicodeEncodeError, a ValueError), a value JSON cannot hold
#: (TypeError), a cycle (ValueError). Step 4 refuses such arguments, step 10 such an output.
NOT_UTF8_JSON = (ValueError, TypeError)


def _digest_arguments(registered: Registered, data: Mapping[str, Any]) -> str:
    """The digest an approval binds to; the last check of step 4.

    A lone surrogate is a valid Python str but not text: it has no UTF-8 form, so it could be
    neither digested, stored nor handed on. It is an argument error, found here by the one
    encoding of the arguments the pipeline makes.
    """
    try:
        return argument_digest(registered.spec.name, registered.spec.version, data,
                               registered.definition)
    except NOT_UTF8_JSON:
        raise ToolValidationError(
            detail={"problem": "arguments are not encodable as UTF-8 JSON"}
        ) from None


def check_user_words(run: Run, registered: Registered) -> None:
    """A tool whose arguments must be the person's own words (``Tool.user_words``) runs only
    in a run with a user turn: the person's message (``toolhost call --user-turn``), or
    their answer to the host's question (an MCP form). Without one it fails ``needs_user``
    rather than let the model stand in for the person (and then be told to ask again)."""
    if registered.tool.user_words is not None and run.user_turn is None:
        raise ToolFailure(core_messages.NEEDS_USER, detail={"run": run.id})


# ---------------------------------------------------------------------- step 5: policy


def decide_policy(policy: Policy, registered: Registered) -> PolicyDecision:
    """The policy matrix cell for the tool's side effect and risk, as the operator configured
    it; a tool that always requires approval is asked for where the cell allows (D430)."""
    decision = policy.decide(registered.spec.side_effect, registered.spec.risk)
    if registered.tool.always_requires_approval and decision.action is PolicyAction.ALLOW:
        # The cell's override, if it had one, decided nothing: not named on the row.
        return attrs.evolve(decision, action=PolicyAction.REQUIRE_APPROVAL, override=None,
                            tool_requires_approval=True)
    return decision


# ---------------------------------------------------------------------- step 7: approval


def bind_approval(registered: Registered, record: InvocationRecord) -> Prepared:
    """An approval binds to the digest recorded at the pause (step 6).

    The row's arguments are prepared again, exactly as step 4 prepared them; unless they
    digest to the recorded digest they are not the arguments that were approved (the row was
    changed after the pause), or, for an upstream MCP server's tool, not the tool that was
    approved (its definition changed since, D441), and the call ends with DIGEST_MISMATCH
    without running.
    """
    try:
        prepared: Prepared | None = prepare(registered, record.arguments)
    except ToolFailure:
        prepared = None  # arguments that no longer validate were not the validated ones
    if prepared is None or (prepared.digest != record.argument_digest
                            and not _paused_before_d404(registered, record)):
        problem = ("arguments changed after approval" if registered.definition is None else
                   "the arguments or the tool's definition changed after the pause")
        raise ToolFailure(core_messages.DIGEST_MISMATCH, detail={"problem": problem})
    return prepared


def _paused_before_d404(registered: Registered, record: InvocationRecord) -> bool:
    """Whether the row's digest is of its arguments as stored, whole-number floats unconverted:
    a call paused before step 4 handed them to the body as ints (D404) is the same call."""
    if not registered.integer_positions:
        return False
    try:
        digest = argument_digest(registered.spec.name, registered.spec.version, record.arguments,
                                 registered.definition)
    except NOT_UTF8_JSON:
        return False
    return digest == record.argument_digest


# ---------------------------------------------------------------------- steps 8-9: execute


def call_deadline(registered: Registered, run_deadline: float | None, now: float) -> float:
    """This call's deadline, a monotonic instant: min(now + timeout_s, the run's deadline)."""
    deadline = now + float(registered.spec.timeout_s)
    return deadline if run_deadline is None else min(deadline, run_deadline)


def check_run_deadline(run: Run, now: float) -> None:
    """Before a body would start (step 8, and before step 6 pauses a call): a run whose
    deadline has passed runs nothing more, so the call ends RUN_DEADLINE_PASSED, unrun and not
    retryable, as an approval after the deadline does (D222). DEADLINE would say a body that
    never started "did not finish", retryable in a run where every retry fails the same way,
    or "may already have taken effect". A cancelled run's call is left to end as cancelled,
    as it did before this check."""
    if run.past_deadline(now):
        raise ToolFailure(core_messages.RUN_DEADLINE_PASSED, detail=_run_deadline_detail(run))


def _run_deadline_detail(run: Run) -> dict[str, Any]:
    return {"run_deadline": run.deadline_at.isoformat() if run.deadline_at else None}


def _timeout_retryable(registered: Registered) -> bool:
    # A timed-out call may have done its work; repeating it is safe only when repetition is.
    return registered.spec.idempotency in (Idempotency.READ_ONLY, Idempotency.IDEMPOTENT)


def _timed_out(registered: Registered, run: Run, deadline: float) -> ToolFailure:
    """Step 8's failure for a body its deadline (``call_deadline``, a monotonic instant) cut
    off. The code is the call's timeout either way (D433). When that deadline was the run's,
    a retry in this run is refused ``run_deadline_passed``, so the failure is not retryable
    and its detail is the run's deadline, the limit that fired, not the tool's timeout_s."""
    repeatable = _timeout_retryable(registered)
    code = core_messages.DEADLINE if repeatable else core_messages.DEADLINE_MAY_HAVE_TAKEN_EFFECT
    if run.deadline is not None and deadline >= run.deadline:
        return ToolFailure(code, detail=_run_deadline_detail(run))
    return ToolFailure(code, detail={"timeout_s": registered.spec.timeout_s},
                       retryable=repeatable)


def build_tool(build: Callable[[Registered], ToolCallable], registered: Registered) -> (
    ToolCallable
):
    """Step 8 begins: a tool whose factory raises (a missing credential, say) fails as
    INTERNAL."""
    try:
        return build(registered)
    except Exception as exc:
        raise unexpected(exc) from None
    except BaseException as exc:  # a factory's sys.exit, as a body's (``execute``)
        raise _aborted(BodyAborted(exc), registered) from None


def _aborted(aborted: BodyAborted, registered: Registered) -> ToolFailure:
    """The failure a plugin's BaseException (not an Exception) ends its call with."""
    if aborted.interrupt:
        return Interrupted(aborted.raised)
    return unexpected(aborted.raised, registered)


async def execute(
    registered: Registered,
    tool: ToolCallable,
    arguments: Mapping[str, Any],
    context: ToolExecutionContext,
    call: CancellationEvent,
    run: Run,
    timeout: float,
    monotonic: Callable[[], float],
) -> Any:
    """Step 8: the tool's return value, unchecked (step 10 checks it), ``timeout`` measured on
    the host's ``monotonic`` clock.

    A deadline, a cancellation, a declared ``ToolFailure`` and any other exception become the
    failure the model reads, a BaseException the body raised included (``BodyAborted``: one
    that may be the operator's Ctrl-C is ``Interrupted``); a ``WorkspaceEscape`` or
    ``WorkspaceUnavailable`` passes through untouched, for step 9.
    """
    try:
        return await run_tool(
            tool, arguments, context,
            timeout=timeout, call=call, run=run.cancellation, monotonic=monotonic,
        )
    except DeadlineExceeded:
        raise _timed_out(registered, run, context.deadline) from None
    except Cancelled:
        raise ToolFailure(core_messages.RUN_CANCELLED) from None
    except (WorkspaceEscape, WorkspaceUnavailable):
        raise
    except BodyAborted as aborted:
        raise _aborted(aborted, registered) from None
    except ToolFailure as failure:
        if (failure.reason_code in registered.tool.reason_codes
                or failure.reason_code in core_messages.RAISED_BY_TYPED_BODIES):
            raise
        raise ToolFailure(
            core_messages.INTERNAL_UNDECLARED,
            detail={"reason_code": failure.reason_code, "detail": dict(failure.detail)},
        ) from None
    except Exception as exc:  # the model gets the static message; operators the detail
        raise unexpected(exc, registered) from None


def workspace_escape(escape: WorkspaceEscape) -> ToolFailure:
    """Step 9: one shape and one message for every workspace tool's rejected path."""
    return ToolValidationError(detail={"workspace": escape.reason})


def workspace_unavailable(problem: WorkspaceUnavailable) -> ToolFailure:
    """Step 9: one retryable failure for a workspace the filesystem cannot serve, whichever
    tool met it; the handle's static reason is operator detail. A run ended under the call
    (``RunEnded``) is the run's cancellation, not retryable: it stays ended (D529)."""
    if isinstance(problem, RunEnded):
        return ToolFailure(core_messages.RUN_CANCELLED, detail={"problem": problem.reason})
    return ToolFailure(core_messages.WORKSPACE_UNAVAILABLE, detail={"problem": problem.reason},
                       retryable=True)


def workspace_unopened(exc: Exception) -> ToolFailure:
    """Step 8 begins for a call run outside ``invoke`` (approved, or run again by recovery):
    the run's workspace could not be opened here (no file handles left, a workspaces
    directory gone or made unusable). That is step 9's retryable ``WorkspaceUnavailable``,
    the errno's name the operator's detail (the OS's text can carry a path); any other error
    is the host's own."""
    if isinstance(exc, WorkspaceUnavailable):
        return workspace_unavailable(exc)
    if isinstance(exc, OSError):
        name = errno.errorcode.get(exc.errno or 0, "no errno")
        return workspace_unavailable(
            WorkspaceUnavailable(f"the run's workspace could not be opened ({name})"))
    return unexpected(exc)


# ---------------------------------------------------------------------- step 10: output


def validate_output(registered: Registered, output: object) -> ToolOutput:
    """A ``ToolOutput`` with text content, a ``Trust`` (or none), and structured output that
    matches output_schema; anything else is OUTPUT_INVALID.

    So is an output with no UTF-8 JSON form (a lone surrogate, a value JSON cannot hold), as
    step 4 refuses such arguments: the row could not hold it. That rule is checked where the
    output is encoded anyway, step 12 (``limit_output_off_loop``), once and, for a large
    output, off the loop (``_unencodable_output``)."""
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
        except ArithmeticError:  # an integer past a float's range against multipleOf (D401)
            problem = "a number in the output cannot be checked against the schema"
    if problem is not None or not isinstance(output, ToolOutput):
        raise ToolFailure(core_messages.OUTPUT_SCHEMA, detail={"problem": problem})
    return output


def _unencodable_output() -> ToolFailure:
    """Step 10's OUTPUT_INVALID for an output with no UTF-8 JSON form (``validate_output``)."""
    return ToolFailure(core_messages.OUTPUT_SCHEMA,
                       detail={"problem": "the output is not encodable as UTF-8 JSON"})


# ---------------------------------------------------------------------- step 11: trust


def clamp_trust(declared: Trust, returned: Trust | None) -> Trust:
    """Effective trust is the lower of the spec's and the result's: a tool may only lower it."""
    return declared if returned is None else Trust.lower(declared, returned)


# ---------------------------------------------------------------------- step 12: size


@attrs.frozen
class Shaped:
    """Step 12's result: what the row records and the model reads."""

    content: str
    structured: Mapping[str, Any] | None
    artifacts: tuple[Mapping[str, Any], ...] = ()
    truncated: bool = False


def limit_output(
    registered: Registered,
    output: ToolOutput,
    trust: Trust,
    writer: ArtifactWriter,
    invocation_id: str,
) -> Shaped:
    """Within maximum_output_bytes: unchanged. Over it: excerpt plus the whole as an artifact.
    Over the hard ceiling: OUTPUT_TOO_LARGE, with the partial output artifactized.

    The limit is about the text the model reads: measured is the larger of the content's
    UTF-8 bytes and the structured result's canonical JSON, where the structured result does
    not count the content a second time: one string in it that is the content itself
    (read_text's ``content`` field) counts as "", being the content, already measured raw.
    Escaping would otherwise make a file of quotes twice its size, and a file of exactly the
    limit, which write_text accepts, would be cut when read back.

    This is CPU and disk work in proportion to the output: a pipeline on an event loop runs
    it through ``limit_output_off_loop``.
    """
    try:
        content = output.content.encode("utf-8")
        size = max(len(content), _structured_size(output))
    except NOT_UTF8_JSON:
        raise _unencodable_output() from None  # step 10's rule, checked by this one encoding
    limit = registered.spec.maximum_output_bytes
    if size <= limit:
        return Shaped(output.content, dict(output.structured))
    name = f"{registered.spec.name}-{invocation_id}"
    if size > HARD_OUTPUT_CEILING:
        partial = _capture(
            writer, name=f"{name}.partial.txt", media_type="text/plain; charset=utf-8",
            content=content[:HARD_OUTPUT_CEILING], trust=trust,
        )
        raise OutputTooLarge(size, [attrs.asdict(partial)])
    whole = _capture(
        writer, name=f"{name}.json", media_type="application/json",
        content=canonical_json({"content": output.content, "structured": output.structured}),
        trust=trust,
    )
    text = excerpt(output.content, limit, whole.id, whole.checksum)
    return Shaped(text, None, (attrs.asdict(whole),), truncated=True)


#: Step 12 runs on a worker thread when an output may be larger than this (or than the tool's
#: limit, so that it writes an artifact): encoding, excerpting and writing megabytes on the
#: event loop would stall every other call a server is running.
OFF_LOOP_BYTES = 64 * 1024


async def limit_output_off_loop(
    registered: Registered,
    output: ToolOutput,
    trust: Trust,
    writer: ArtifactWriter,
    invocation_id: str,
) -> Shaped:
    """``limit_output``, on a worker thread unless the output is certainly small.

    The check is a cheap upper bound (the content's length, and a walk of the structured
    result that stops as soon as it passes the threshold), so deciding costs nothing like
    the work it moves. The run's writer (``RunArtifactWriter``) is safe to share between threads.
    """
    threshold = min(OFF_LOOP_BYTES, registered.spec.maximum_output_bytes)
    if not _may_exceed(output, threshold):
        # Certainly within the tool's limit (the bound sums what limit_output measures the
        # larger of): unchanged, with no exact measure (most calls: ~6 µs of encodes). Only
        # step 10's last rule is checked, on what the row will hold (~1 µs for most).
        shaped = Shaped(output.content, dict(output.structured))
        try:
            canonical_json(shaped.structured)
            shaped.content.encode("utf-8")
        except NOT_UTF8_JSON:
            raise _unencodable_output() from None
        return shaped
    if not _ascii_within(output, registered, threshold):
        return await asyncio.to_thread(limit_output, registered, output, trust, writer,
                                       invocation_id)
    return limit_output(registered, output, trust, writer, invocation_id)


def _ascii_within(output: ToolOutput, registered: Registered, threshold: int) -> bool:
    """An ASCII text within the tool's limit beside a small rest: nothing to excerpt or write,
    and its encode is a copy (~20 µs a MiB), less than the hop to a thread (read_text's 1 MiB
    file paid ~150 µs for it)."""
    content = output.content
    return (content.isascii() and len(content) <= registered.spec.maximum_output_bytes
            and not _may_exceed(output, threshold, count_content=False))


def _structured_size(output: ToolOutput) -> int:
    """The structured result's canonical JSON bytes, its first copy of the content as ""."""
    return len(canonical_json(_without_content(output.structured, output.content, [False])))


def _without_content(value: Any, content: str, seen: list[bool]) -> Any:
    # ``seen`` holds one flag: only the first copy of the content is left out.
    if isinstance(value, str):
        if not seen[0] and value == content:
            seen[0] = True
            return ""
        return value
    if isinstance(value, Mapping):
        return {k: _without_content(v, content, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_content(v, content, seen) for v in value]
    return value


#: Bytes one character may take in canonical JSON: six for an escaped control character.
_ESCAPED = 6
#: At most this many bytes for a float, boolean or null (an int is counted by its bits).
_SCALAR = 32


def _may_exceed(output: ToolOutput, threshold: int, *, count_content: bool = True) -> bool:
    """Whether what ``limit_output`` measures may pass ``threshold``: never False when it
    does (content and structured are summed, each at its most bytes per character; the
    content left out with ``count_content`` False). Each node of the structured result costs
    at least two bytes of the budget, so the walk visits at most ``threshold / 2`` of them
    however large the result."""
    content = output.content
    left = threshold - (len(content) * (1 if content.isascii() else 4) if count_content else 0)
    stack: list[Any] = [output.structured]
    skipped = False
    while stack and left >= 0:
        value = stack.pop()
        if isinstance(value, str):
            if not skipped and value == content:
                skipped = True
                continue
            left -= _ESCAPED * len(value) + 3
        elif isinstance(value, Mapping):
            left -= 2
            for key, item in value.items():
                left -= _ESCAPED * len(str(key)) + 4
                if left < 0:
                    break
                stack.append(item)
        elif isinstance(value, (list, tuple)):
            left -= 2 + len(value)
            stack.extend(value[:max(left, 0)])
        elif isinstance(value, int) and not isinstance(value, bool):
            left -= value.bit_length() // 3 + 2  # its digits and sign, at most (log10 2 < 1/3)
        else:
            left -= _SCALAR
    return left < 0


def _capture(writer: ArtifactWriter, *, name: str, media_type: str, content: bytes,
             trust: Trust) -> ArtifactRef:
    """Write a TOOL_OUTPUT_CAPTURE artifact. The store is a port and steps signal with
    ``ToolFailure``: one the store raised is a fault of the host's, never a step's verdict."""
    try:
        return writer.write(origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE, name=name,
                            media_type=media_type, content=content, trust=trust)
    except ToolFailure as exc:
        raise unexpected(exc) from None


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
