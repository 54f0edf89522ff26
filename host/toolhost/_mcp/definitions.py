"""Tool definitions for ``tools/list``, built from the registry rather than from decorators.

When: once, at startup, for the roster being served (the default roster of latest versions, or
exactly the ``--enable`` names). What: name, title, description, inputSchema and outputSchema
as registered, the annotations from ``toolhost._mcp.annotations``, and ``_meta`` naming
the version and classification. Why: the listing is immutable for the life of the process, so
building it once keeps ``tools/list`` a constant-time answer.

Names keep their dots (``math.calculate``): MCP's tool-name rule (SEP-986) allows
``[A-Za-z0-9._-]{1,128}``, and every name our registration grammar admits fits it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence

import mcp.types as types

from toolhost._composition import Registered, Registry, UnknownTool, UsageError
from toolhost._mcp.annotations import hints_for, title_for

__all__ = [
    "META_PREFIX",
    "UnknownServedTool",
    "list_tools_result",
    "mcp_tool",
    "served_roster",
]

#: Our ``_meta`` namespace (a valid MCP ``_meta`` prefix; ``mcp``/``modelcontextprotocol``
#: second labels are reserved, this is not one).
META_PREFIX = "toolhost/"

#: SEP-986, as the SDK's own validator spells it.
_MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class UnknownServedTool(UsageError, LookupError):
    """``--enable`` named a tool the registry does not have."""


def served_roster(registry: Registry, enable: Iterable[str] | None,
                  pins: Mapping[str, str] | None = None) -> list[Registered]:
    """The version of each tool to serve, sorted by name (``Registry.roster``): the latest
    active one, or the one ``pins`` names (served under its name, for a pinned client).

    :raises UnknownServedTool: a name in ``enable`` is not registered.
    :raises PinError: a pin that names no registered version, or a tool not served.
    """
    try:
        return registry.roster(enable, pins)
    except UnknownTool as exc:
        raise UnknownServedTool(exc.args[0]) from None


def mcp_tool(registered: Registered) -> types.Tool:
    """The MCP definition of one registration. Schemas are deep copies, so nothing the SDK
    does to its model can reach the registry's compiled specs."""
    spec = registered.spec
    if not _MCP_TOOL_NAME.fullmatch(spec.name):  # registration's grammar is narrower; belt and braces
        raise ValueError(f"{spec.name!r} is not a valid MCP tool name")
    title = title_for(spec)
    return types.Tool(
        name=spec.name,
        title=title,
        description=spec.description,
        input_schema=copy.deepcopy(dict(spec.input_schema)),
        output_schema=copy.deepcopy(dict(spec.output_schema)),
        # By wire name (camelCase), so the hint names read as the MCP schema spells them.
        annotations=types.ToolAnnotations.model_validate({"title": title, **hints_for(spec)}),
        _meta={
            f"{META_PREFIX}version": spec.version,
            f"{META_PREFIX}sideEffect": spec.side_effect.value,
            f"{META_PREFIX}risk": spec.risk.value,
            f"{META_PREFIX}idempotency": spec.idempotency.value,
            f"{META_PREFIX}outputTrust": spec.output_trust.value,
        },
    )


def list_tools_result(roster: Sequence[Registered]) -> types.ListToolsResult:
    """The whole ``tools/list`` answer: one page, every served tool."""
    return types.ListToolsResult(tools=[mcp_tool(r) for r in roster])

