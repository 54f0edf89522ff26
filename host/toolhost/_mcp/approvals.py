"""Approvals over MCP: asking the client's user, and finding a call already decided.

When: a served tool whose policy cell requires approval is called. What:

- the pipeline prepares a repeated call's arguments exactly as its step 4 did
  (``Pipeline.prepare``: the validated arguments, defaults applied, and the digest an approval
  binds to) and lists this run's rows for that tool, version and digest (``Pipeline.rows_for``);
- ``find_row`` picks the latest of those rows that has not yet been answered in this session,
  which is how a call repeated after ``toolhost approve`` returns the recorded result instead
  of pausing (or executing) a second time;
- ``approval_request`` is the elicitation a client shows its user: the tool, its
  classification, the invocation id and the arguments' digest in the host's own words, then
  the arguments as a fenced block of escaped canonical JSON that nothing in a value can break
  out of (``arguments_block``), whole or not asked at all (``arguments_shown``: the call then
  waits for the operator, as for a client that cannot be asked); ``decision_of`` reads the
  answer. Accept with ``approve: true`` approves; accept with ``false``, or decline,
  denies; cancel (dismissed without a choice), a timeout or an error leaves the call pending
  for the operator.

Why scoped to the session's run, and once per row: the approval authorized that invocation,
for that run's principal; replaying it into another session would hand one run's result to
another, and replaying it forever would make a deliberate repeat of a non-idempotent call
impossible. A third identical call therefore asks again.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Collection, Sequence
from typing import Any

import mcp.types as types

from toolhost._composition import InvocationRecord, Registered, escaped, shown_text

__all__ = [
    "APPROVAL_SCHEMA",
    "ARGUMENTS_SHOWN",
    "ELICITATION_KEY",
    "Decision",
    "approval_message",
    "approval_request",
    "arguments_block",
    "arguments_shown",
    "decision_of",
    "find_row",
    "supports_form_elicitation",
]

#: The key of our one question in an ``InputRequiredResult`` (2026-07-28 clients).
ELICITATION_KEY = "toolhost.approval"

#: A flat form, as elicitation requires: one boolean the user must set.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve this call",
            "description": "Run the tool once with exactly these arguments.",
            "default": False,
        }
    },
    "required": ["approve"],
}

#: The longest arguments block the form shows: room for sandbox.run_command's 16,384-character
#: command. Longer arguments are not asked about in the client at all (D466): whatever was cut
#: could hold the part that matters.
ARGUMENTS_SHOWN = 20_000


class Decision(enum.Enum):
    APPROVE = "approve"
    DENY = "deny"
    #: No choice was made (cancelled, timed out, unanswerable): the row stays pending.
    UNDECIDED = "undecided"


def find_row(rows: Sequence[InvocationRecord], answered: Collection[str]) -> InvocationRecord | None:
    """The newest of ``rows`` (oldest first, as ``Pipeline.rows_for`` lists them) not in
    ``answered``."""
    for record in reversed(rows):
        if record.id not in answered:
            return record
    return None


def supports_form_elicitation(capabilities: types.ClientCapabilities | None) -> bool:
    """Form-mode elicitation: declared as ``form``, or as a bare ``elicitation: {}`` (the
    2025-06-18 shape, which meant form)."""
    if capabilities is None or capabilities.elicitation is None:
        return False
    elicitation = capabilities.elicitation
    return elicitation.form is not None or elicitation.url is None


def arguments_shown(arguments: Any) -> str | None:
    """The arguments as the form shows them: their canonical JSON on one line, what does not
    print as its JSON escape (so it is still JSON, and equal to the arguments); None when that
    is longer than ARGUMENTS_SHOWN characters. A person approves only what they could read
    whole: a cut block once hid the destination behind a long ``content`` (D466)."""
    text = shown_text(arguments)
    if len(text) > ARGUMENTS_SHOWN:  # an escape is never shorter than its character
        return None
    shown = escaped(text)
    return shown if len(shown) <= ARGUMENTS_SHOWN else None


def arguments_block(shown: str) -> str:
    """``arguments_shown``'s text fenced as a code block. Canonical JSON has no raw line
    break, so nothing in a value can end the block or start a line of the host's own."""
    return "\n".join(["```json", shown, "```"])


def approval_message(record: InvocationRecord, registered: Registered,
                     described: tuple[str, list[str]] | None = None) -> str:
    """What the user reads: the host's own two lines (the tool and its classification, the ids
    to cross-check with the operator, what approving does), what the tool says the call does
    (``described``, ``Host.describe_call``'s escaped lines), then the arguments block.

    :raises ValueError: the arguments do not fit the form (``arguments_shown`` is None): such
        a call is never asked about in the client."""
    shown = arguments_shown(record.arguments)
    if shown is None:
        raise ValueError(f"the arguments of {record.id} are too long to ask about in a form")
    spec = registered.spec
    return (
        f"toolhost asks to approve {spec.name} {spec.version} "
        f"({spec.side_effect.value}, risk {spec.risk.value}): invocation {record.id}, "
        f"argument digest {record.argument_digest}.\n"
        + _described_lines(described)
        + "Approve runs it once with exactly the arguments in the block below (canonical JSON).\n"
        + arguments_block(shown)
    )


def _described_lines(described: tuple[str, list[str]] | None) -> str:
    """The tool's lines, each one line already (the host escaped them) and each after a
    bullet, so none starts a line of Markdown of its own (a fence, a heading)."""
    if described is None:
        return ""
    distribution, lines = described
    return (f"What {escaped(distribution)} says this call does:\n"
            + "".join(f"\u2022 {line}\n" for line in lines))


def approval_request(record: InvocationRecord, registered: Registered,
                     described: tuple[str, list[str]] | None = None) -> types.ElicitRequest:
    """The form-mode elicitation for one paused invocation."""
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=approval_message(record, registered, described),
            requested_schema=copy.deepcopy(APPROVAL_SCHEMA),
        )
    )


def decision_of(answer: Any) -> Decision:
    """Read the user's answer; anything that is not an explicit choice is UNDECIDED."""
    if not isinstance(answer, types.ElicitResult):
        return Decision.UNDECIDED
    if answer.action == "decline":
        return Decision.DENY
    if answer.action == "accept":
        approve = (answer.content or {}).get("approve")
        if approve is True:
            return Decision.APPROVE
        if approve is False:
            return Decision.DENY
    return Decision.UNDECIDED
