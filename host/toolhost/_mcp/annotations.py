"""The one table from a tool's classification to its MCP tool annotations.

MCP clients read ``annotations`` to decide how to present a tool (many skip the confirmation
prompt for a read-only one), so a hint here is a claim about safety. Each classification
value (a row) names the hints it decides; a hint two rows name is true only when both say
true, so a writer whose idempotency was declared READ_ONLY is never advertised read-only.

    Idempotency.READ_ONLY       readOnlyHint, idempotentHint
    Idempotency.IDEMPOTENT      idempotentHint
    SideEffect writers          destructiveHint (and they veto readOnlyHint)
    SideEffect.EXTERNAL_WRITE   openWorldHint

Every hint is always emitted, true or false: the MCP defaults (destructive and open-world
true) are the pessimistic ones, and an absent hint would read as them.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolhost import Idempotency, SideEffect, ToolSpec

__all__ = ["HINTS", "HINT_TABLE", "hints_for", "title_for"]

#: The four hints, in the order the MCP schema lists them.
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")

_WRITE = {"readOnlyHint": False, "destructiveHint": True}

#: classification value -> the hints that value decides. One row per enum member.
HINT_TABLE: Mapping[Idempotency | SideEffect, Mapping[str, bool]] = {
    Idempotency.READ_ONLY: {"readOnlyHint": True, "idempotentHint": True},
    Idempotency.IDEMPOTENT: {"readOnlyHint": False, "idempotentHint": True},
    Idempotency.CONDITIONALLY_IDEMPOTENT: {"readOnlyHint": False, "idempotentHint": False},
    Idempotency.NON_IDEMPOTENT: {"readOnlyHint": False, "idempotentHint": False},
    SideEffect.NONE: {"destructiveHint": False, "openWorldHint": False},
    SideEffect.WORKSPACE_READ: {"destructiveHint": False, "openWorldHint": False},
    SideEffect.WORKSPACE_WRITE: {**_WRITE, "openWorldHint": False},
    SideEffect.CODE_EXECUTION: {**_WRITE, "openWorldHint": False},
    SideEffect.EXTERNAL_WRITE: {**_WRITE, "openWorldHint": True},
}


def hints_for(spec: ToolSpec) -> dict[str, bool]:
    """The four hints for a spec: each the AND of the rows (idempotency, side effect) naming it.

    :raises KeyError: a classification value with no row (the table test keeps this from
        happening: it asserts a row for every enum member).
    """
    rows = (HINT_TABLE[spec.idempotency], HINT_TABLE[spec.side_effect])
    return {hint: all(row[hint] for row in rows if hint in row) for hint in HINTS}


def title_for(spec: ToolSpec) -> str:
    """A human-readable title from the dotted name: ``system.current_time`` reads
    ``System: Current time``. Names are ASCII by registration's grammar."""
    domain, _, tool = spec.name.partition(".")
    words = tool.replace("_", " ")
    return f"{domain.replace('_', ' ').capitalize()}: {words[:1].upper()}{words[1:]}"
