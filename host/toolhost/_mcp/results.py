"""From the pipeline's ``Outcome`` to what ``tools/call`` answers.

When: after every invocation, approval, denial or replay. What: success is the content text
(then a ``resource_link`` for each file the call exported or generated, see ``resources``)
plus ``structuredContent`` equal to the structured result; everything else is ``isError`` with
the static model-facing text, and the reason code, status and invocation id in ``_meta``
(``toolhost/...`` keys). Why ``_meta`` and not ``structuredContent`` for errors: a tool's
``outputSchema`` describes its results, and a client that validates an error's structured
content against it would reject the error itself. Operator ``detail`` never leaves the host.

A truncated success (its output was over ``maximum_output_bytes``: the pipeline kept a
head-and-tail excerpt and withheld the structured result) is answered ``isError`` too: the MCP
schema says a tool with an ``outputSchema`` MUST return conforming structured content, which
an excerpt cannot, and the SDK's own client raises on a success that lacks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError

from toolhost import Outcome, OutcomeStatus
from toolhost._composition import host_reasons as core_messages
from toolhost._mcp.definitions import META_PREFIX
from toolhost._mcp.resources import resource_link

__all__ = [
    "UNSERVED_REASON_CODES",
    "approve_command",
    "awaiting_text",
    "internal_error_result",
    "protocol_error_for",
    "to_call_tool_result",
]

#: Failures that mean "no such tool here": answered as JSON-RPC -32602, the shape the MCP
#: schema gives an unknown tool, rather than as a tool result.
UNSERVED_REASON_CODES = frozenset({core_messages.UNKNOWN_TOOL, core_messages.NOT_ENABLED,
                                   core_messages.UNKNOWN_VERSION})


def approve_command(invocation_id: str) -> str:
    """What the operator runs, exactly as ``toolhost pending`` lists the id."""
    return f"toolhost approve {invocation_id}"


#: What a pause does to the run's files, by whether its workspace is an operator's directory
#: (``TOOLHOST_MCP_WORKSPACE``): the run's own is discarded (D87); the operator's is kept, and
#: the approved call runs in it (D219). Static: the model is never told the path.
_WHILE_WAITING = {
    False: "Meanwhile this run's workspace is discarded: the files made before this pause are "
           "gone, the approved call starts without them, and on this host the calls after it "
           "see what it wrote.",
    True: "Meanwhile this run's workspace, a directory of the operator's, is kept as it is: "
          "the approved call runs on the files it holds then, and on this host the calls "
          "after it see what it wrote.",
}


def awaiting_text(invocation_id: str, *, workspace_kept: bool = False) -> str:
    """The model-facing text of a paused call: the static sentence plus what happens next,
    to the call and to the run's files (``workspace_kept``: the run's workspace is an
    operator's directory)."""
    return (
        f"{core_messages.AWAITING_APPROVAL_TEXT} Invocation {invocation_id}: an operator approves "
        f"it with `{approve_command(invocation_id)}`; then call this tool again with the same "
        f"arguments to get its result. {_WHILE_WAITING[workspace_kept]}"
    )


def _meta(outcome: Outcome, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        f"{META_PREFIX}status": outcome.status.value,
        f"{META_PREFIX}invocationId": outcome.invocation_id,
        f"{META_PREFIX}version": outcome.version,
    }
    if outcome.output_trust is not None:
        meta[f"{META_PREFIX}outputTrust"] = outcome.output_trust.value
    if outcome.failure is not None:
        meta[f"{META_PREFIX}reasonCode"] = outcome.failure.reason_code
        meta[f"{META_PREFIX}retryable"] = outcome.failure.retryable
    meta.update({f"{META_PREFIX}{k}": v for k, v in extra.items()})
    return {k: v for k, v in meta.items() if v is not None}


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


def to_call_tool_result(outcome: Outcome, *, workspace_kept: bool = False) -> (
        types.CallToolResult):
    """The ``CallToolResult`` for any outcome the pipeline returns (``workspace_kept``: the
    run's workspace is an operator's directory, which a pause keeps: ``awaiting_text``)."""
    status = outcome.status
    if status is OutcomeStatus.SUCCEEDED and not outcome.truncated:
        # Each file the call exported or generated, as a link the client reads the bytes of.
        links: list[types.ContentBlock] = [resource_link(ref) for ref in outcome.attachments]
        return types.CallToolResult(
            content=_text(outcome.content) + links,
            structured_content=dict(outcome.structured or {}),
            is_error=False,
            _meta=_meta(outcome),
        )
    if status is OutcomeStatus.SUCCEEDED:  # truncated: the excerpt, and where the whole is
        artifacts = [a.get("id") for a in outcome.artifacts]
        return types.CallToolResult(
            content=_text(outcome.content), is_error=True,
            _meta=_meta(outcome, truncated=True, artifacts=artifacts),
        )
    if status is OutcomeStatus.AWAITING_APPROVAL:
        invocation_id = str(outcome.invocation_id)
        return types.CallToolResult(
            content=_text(awaiting_text(invocation_id, workspace_kept=workspace_kept)),
            is_error=True,
            _meta=_meta(outcome, approveCommand=approve_command(invocation_id)),
        )
    if status is OutcomeStatus.RUNNING:
        return types.CallToolResult(
            content=_text(f"{outcome.content} Call this tool again with the same arguments to get "
                          "it."),
            is_error=True, _meta=_meta(outcome),
        )
    # FAILED and DENIED: the content is already the static text (the message table entry, or
    # DENIED_TEXT); the row keeps the detail and the operator's reason.
    return types.CallToolResult(content=_text(outcome.content), is_error=True, _meta=_meta(outcome))


def protocol_error_for(outcome: Outcome) -> MCPError:
    """The JSON-RPC error for a call naming no tool this server serves (unknown, or registered
    but not in the served roster): the static message, the reason code and invocation id as
    ``data``."""
    assert outcome.failure is not None
    data: Mapping[str, Any] = {
        "reasonCode": outcome.failure.reason_code,
        "invocationId": outcome.invocation_id,
    }
    return MCPError(code=types.INVALID_PARAMS, message=outcome.failure.message, data=dict(data))


def internal_error_result(invocation_id: str | None = None) -> types.CallToolResult:
    """What the model reads when the server itself failed around a call (never the exception)."""
    return host_failure_result(core_messages.INTERNAL_UNEXPECTED, invocation_id)


def host_failure_result(code: str, invocation_id: str | None = None, *,
                        retryable: bool = False) -> types.CallToolResult:
    """A failure of the host's own around a call, by its reason code: the static message."""
    return types.CallToolResult(
        content=_text(core_messages.MESSAGES[code]), is_error=True,
        _meta={f"{META_PREFIX}status": "failed", f"{META_PREFIX}reasonCode": code,
               f"{META_PREFIX}retryable": retryable, f"{META_PREFIX}invocationId": invocation_id},
    )
