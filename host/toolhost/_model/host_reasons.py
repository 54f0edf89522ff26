"""The host's own reason codes: failures the pipeline produces rather than a tool.

Plugins never declare these (registration refuses it): a schema failure, a timeout or a
cancellation is the same failure with the same message whichever tool it happened to.
"""

from __future__ import annotations

from toolhost._model.outcome import ToolValidationError

UNKNOWN_TOOL = "tool.invalid_arguments.unknown_tool"
UNKNOWN_VERSION = "tool.invalid_arguments.unknown_version"
INVALID_SCHEMA = ToolValidationError.REASON_CODE
INTERNAL_UNEXPECTED = "tool.internal.unexpected"
INTERNAL_UNDECLARED = "tool.internal.undeclared_reason_code"
OUTPUT_SCHEMA = "tool.output_invalid.schema"
NOT_ENABLED = "tool.permission_denied.not_enabled"
MISSING_SCOPE = "tool.permission_denied.missing_scope"
DEADLINE = "tool.timeout.deadline"
#: The deadline of a tool that is not safe to repeat (NON_IDEMPOTENT, CONDITIONALLY_IDEMPOTENT):
#: its request may already have reached the world, and been paid for (a media
#: generation, D137), so the model is told not to retry rather than only that time ran out.
DEADLINE_MAY_HAVE_TAKEN_EFFECT = "tool.timeout.deadline_may_have_taken_effect"
RUN_CANCELLED = "tool.cancelled.run_cancelled"
HARD_CEILING = "tool.output_too_large.hard_ceiling"
DIGEST_MISMATCH = "tool.internal.digest_mismatch"
#: A ``running`` row whose process is gone (``Pipeline.recover``), or a result the tool produced
#: that could not be recorded: it may or may not have taken effect.
INTERRUPTED = "tool.internal.interrupted"
#: The invocation store failed before anything ran (or for a read, which changes nothing).
RECORD_STORE = "tool.upstream_unavailable.record_store"
#: The invocation store cannot be used until its operator acts (``StoreUnavailable``: the
#: record damaged, or its files deleted or replaced while the host ran): no retry can
#: succeed, so the model is not told to try again (D534).
RECORD_UNUSABLE = "tool.upstream_unavailable.record_unusable"
#: The run's workspace raised ``WorkspaceUnavailable`` (no space or no file handles left, a
#: read-only or failing filesystem): neither the path's fault nor the tool's, so one host
#: failure for every tool that touches a workspace, retryable.
WORKSPACE_UNAVAILABLE = "tool.upstream_unavailable.workspace_unavailable"
#: The artifact store raised ``ArtifactStoreUnavailable`` (its object store unreachable or
#: failing) while a call wrote or read an artifact: retryable, and nothing was published.
ARTIFACT_STORE = "tool.upstream_unavailable.artifact_store"
#: The same, for a tool not safe to repeat: its request may already have reached the world
#: (a generation that may have been charged), so it is not retryable and says so.
ARTIFACT_STORE_MAY_HAVE_TAKEN_EFFECT = "tool.upstream_unavailable.artifact_store_may_have_taken_effect"

#: A call approved after its run's deadline (``Run.deadline_at``, on the row): it did not run.
RUN_DEADLINE_PASSED = "tool.timeout.run_deadline_passed"
#: A tool that needs the person's own words (``Tool.user_words``) called in a run without a
#: user turn, by a client that cannot ask its user.
NEEDS_USER = "tool.permission_denied.needs_user"
#: The person was asked for their words (or to confirm them) and declined.
USER_DECLINED = "tool.permission_denied.user_declined"
#: A typed tool's (``toolhost.tool``) argument matched the input schema but could not become
#: the annotated value (an attrs validator refused it, a number too large for a float).
VALUE_REFUSED = "tool.invalid_arguments.value_refused"

#: The host codes a ``toolhost.tool`` body's wrapper raises itself (VALUE_REFUSED, and
#: OUTPUT_SCHEMA for a result JSON cannot carry): step 8 passes them through undeclared.
RAISED_BY_TYPED_BODIES = frozenset({VALUE_REFUSED, OUTPUT_SCHEMA})

#: What the model reads when a call pauses for approval, or an operator denies it. Static like
#: every message; the denial reason an operator writes stays on the row and in the logs.
AWAITING_APPROVAL_TEXT = "This call needs an operator's approval. It is recorded and runs once approved."
RUNNING_TEXT = "This call was approved and is running. Its result is recorded when it finishes."
DENIED_TEXT = "An operator denied this call. Do not retry it; ask the user how to proceed."

MESSAGES = {
    UNKNOWN_TOOL: "Unknown tool. Call one of the tools you were given.",
    UNKNOWN_VERSION: "That version of the tool is not registered. Omit the version to use the latest.",
    INVALID_SCHEMA: "The arguments do not match the tool's input schema.",
    INTERNAL_UNEXPECTED: "The tool failed unexpectedly.",
    INTERNAL_UNDECLARED: "The tool failed unexpectedly.",
    OUTPUT_SCHEMA: "The tool returned output that does not match its output schema.",
    NOT_ENABLED: "That tool is not enabled for this run. Call one of the tools you were given.",
    MISSING_SCOPE: "This run is not granted a scope the tool requires.",
    DEADLINE: "The tool did not finish before its deadline.",
    DEADLINE_MAY_HAVE_TAKEN_EFFECT: "The tool did not finish before its deadline, but its "
    "request may already have taken effect and been charged. Do not retry it blindly; ask the "
    "user how to proceed.",
    RUN_CANCELLED: "The run was cancelled before the tool finished.",
    HARD_CEILING: "The output exceeded the 8 MiB ceiling. The partial output was saved as an "
    "artifact.",
    DIGEST_MISMATCH: "The tool failed unexpectedly.",
    INTERRUPTED: "The call was interrupted before its result was recorded. It may or may not "
    "have taken effect: check before calling it again.",
    RECORD_STORE: "The host could not record this call, so it has no result and changed "
    "nothing. Try again later.",
    RECORD_UNUSABLE: "The host's record cannot be used until its operator repairs it, so this "
    "call has no result and changed nothing. Do not retry it; tell the user.",
    WORKSPACE_UNAVAILABLE: "The workspace cannot be used right now (no space or no file "
    "handles left). Try again later.",
    ARTIFACT_STORE: "The artifact store cannot be reached right now, so nothing was saved. "
    "Try again later.",
    RUN_DEADLINE_PASSED: "The run's deadline passed before this call could run, so it did not "
    "run. Do not retry it in this run; ask the user how to proceed.",
    NEEDS_USER: "This tool needs the user's own words, and the user cannot be asked for them "
    "here. Do not retry it; tell the user it needs a client that can ask them (a form), or "
    "their own message.",
    VALUE_REFUSED: "An argument matches the input schema, but the tool refused its value. "
    "Check the values against the tool's description and try again.",
    USER_DECLINED: "The user declined to give their words for this call, so it did not run. "
    "Do not retry it; ask the user how to proceed.",
    ARTIFACT_STORE_MAY_HAVE_TAKEN_EFFECT: "The artifact store cannot be reached right now, so "
    "nothing was saved, but the tool's request may already have taken effect and been charged. "
    "Do not retry it blindly; ask the user how to proceed.",
}
