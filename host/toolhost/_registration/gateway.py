"""The MCP gateway: upstream servers' tools as the host's own contribution to the registry.

Each tool an upstream server lists becomes an ordinary ``Tool``: ``source`` MCP, ``server_id``
the server's configured name, in the reserved ``mcp`` domain (which only this contribution may
use: ``register(gateway=...)``), and through the same seven steps as any plugin's. A tool
whose input schema fails step 5 is left out, with one line for ``toolhost check``.

What is decided here (docs/gateway.md has the operator's view):

- **Names.** ``mcp.<server>__<tool>``. The tool part is the upstream name when it is already
  lower-case ``[a-z0-9_]`` and fits; otherwise it is normalized (lower case, every other
  character ``_``), cut, and always suffixed with ``_`` and 8 hex digits of the SHA-256 of the
  upstream name, so two upstream names never share one, and a name depends on nothing but the
  server's name and the upstream name (stable across restarts and listing order). The whole
  is at most 64 characters, the providers' limit once the dot is a hyphen.
- **Classification** is the operator's (per tool, then per server); unconfigured:
  EXTERNAL_WRITE / HIGH / NON_IDEMPOTENT, which the default policy sends to approval. The
  upstream's annotations (``readOnlyHint``...) are never read for it. ``output_trust`` is
  EXTERNAL_UNTRUSTED (step 7 forces it).
- **Descriptions** are the upstream's words, attacker-controlled: the model reads them inside
  a fixed frame naming the server, flattened to one line and cut at 1024 characters, unless the
  operator wrote the tool's ``description``.
- **Results.** Text blocks joined become the content the model reads; the structured content
  is carried as its JSON text (an open object could never pass the host's closed output
  validation). Failures are static reasons declared on every gateway tool; the upstream's
  error text goes to ``detail`` (operators) only.
- **A changed listing** (``notifications/tools/list_changed``, a reconnect, a server's first
  connection after the start) is compared with what was registered: a tool whose input
  schema changed, or that is no longer listed, is disabled until an operator reviews it and
  restarts the host (its calls fail ``mcp_schema_changed``: ``refusal_of`` says so before
  anyone is asked to approve one, and ``on_tools_disabled`` tells a serving host, which stops
  listing it); a tool listed only now goes
  through the same registration steps, alone, and is added to the registry (the host tells
  its MCP clients, ``notifications/tools/list_changed``), unclassified unless the operator
  classified it. Nothing a server lists can take another server's name, or one of its own
  already registered: names are per server, and a name is never given twice.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import heapq
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from toolhost._model.context import no_progress
from toolhost._model.outcome import HARD_OUTPUT_CEILING, ToolFailure, ToolOutput
from toolhost._model.printable import one_line
from toolhost._model.spec import (
    Idempotency,
    Kind,
    Reason,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
)
from toolhost._model.upstream import (
    ServerState,
    UpstreamError,
    UpstreamFailure,
    UpstreamServer,
    UpstreamStatus,
    UpstreamTool,
)
from toolhost._registration.discovery import Contribution
from toolhost._registration.refusals import registration_problems
from toolhost._registration.schema import closed
from toolhost._registration.upstream_schema import reviewed_schema

if TYPE_CHECKING:
    from toolhost._model.context import ToolExecutionContext
    from toolhost._ports.upstream import Upstreams

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "GATEWAY_DISTRIBUTION",
    "GATEWAY_VERSION",
    "MAX_NAME",
    "OUTPUT_SCHEMA",
    "REASONS",
    "Gateway",
    "tool_name",
]

#: The distribution the gateway's tools are attributed to in refusals, rows and listings. Not a
#: valid distribution name (spaces, parentheses), so no installed plugin can be taken for it.
GATEWAY_DISTRIBUTION = "toolhost (mcp gateway)"
#: Every gateway tool's version: a changed upstream tool is disabled, not versioned.
GATEWAY_VERSION = "1.0.0"
#: A provider's tool name is at most 64 characters (``toolhost tools --format``).
MAX_NAME = 64
DEFAULT_TIMEOUT_S = 60.0
MAXIMUM_OUTPUT_BYTES = 64 * 1024
#: The most description text of the upstream's the model reads.
MAX_DESCRIPTION = 1024
#: The text an upstream result may bring past the hard ceiling is cut to a head and a tail
#: this size in all, which step 12 then excerpts and keeps as an artifact.
KEPT_TEXT = HARD_OUTPUT_CEILING - 64 * 1024
#: Seconds past the call's deadline the SDK's own request timeout allows: the pipeline's
#: deadline is what ends a call, this only keeps a wait from outliving it.
_SDK_GRACE_S = 1.0

UNREACHABLE = "tool.upstream_unavailable.mcp_server_unreachable"
CONNECTION_LOST = "tool.upstream_unavailable.mcp_connection_lost"
TIMED_OUT = "tool.timeout.mcp_server_timed_out"
PROTOCOL = "tool.upstream_unavailable.mcp_protocol_error"
TOOL_ERROR = "tool.upstream_rejected.mcp_tool_error"
TOO_LARGE = "tool.output_too_large.mcp_result_too_large"
SCHEMA_CHANGED = "tool.upstream_rejected.mcp_schema_changed"

REASONS = (
    Reason(UNREACHABLE, "The MCP server behind this tool cannot be reached right now, so "
           "nothing was sent to it. Try again later."),
    Reason(CONNECTION_LOST, "The MCP server behind this tool went away during the call. It "
           "may or may not have taken effect: check before calling it again."),
    Reason(TIMED_OUT, "The MCP server behind this tool did not answer in time. It may or may "
           "not have taken effect: check before calling it again."),
    Reason(PROTOCOL, "The MCP server behind this tool answered with something that is not a "
           "valid result."),
    Reason(TOOL_ERROR, "The MCP server behind this tool reported an error. Its text is not "
           "shown. Check the arguments, or ask the user how to proceed."),
    Reason(TOO_LARGE, "The MCP server behind this tool returned a result too large to accept."),
    Reason(SCHEMA_CHANGED, "This tool changed on its MCP server since it was reviewed, so it "
           "is disabled until an operator reviews it."),
)

_FAILURE_CODES = {
    UpstreamFailure.UNREACHABLE: UNREACHABLE,
    UpstreamFailure.CONNECTION_LOST: CONNECTION_LOST,
    UpstreamFailure.TIMED_OUT: TIMED_OUT,
    UpstreamFailure.PROTOCOL: PROTOCOL,
    UpstreamFailure.REJECTED: TOOL_ERROR,
    UpstreamFailure.TOO_LARGE: TOO_LARGE,
}

OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "structured_content": {
            "type": ["string", "null"],
            "description": "the upstream result's structured content as JSON text, or null",
        },
    },
    "required": ["structured_content"],
    "additionalProperties": False,
}

_PLAIN = re.compile(r"^[a-z0-9_]+$")
_OTHER = re.compile(r"[^a-z0-9_]+")
#: The end of a name the gateway made: an upstream name that already ends so is renamed too,
#: so no upstream name can be spelt as another's mapping (``a_805c58e8`` beside ``éa``).
_SUFFIXED = re.compile(r"_[0-9a-f]{8}\Z")
#: The most tools registered of one server (in name order); a longer listing's rest is left
#: out, with a line: a listing must not make every start slow.
MAX_TOOLS_PER_SERVER = 256
#: The most upstream names of one server the gateway considers in a process's life (those
#: registered and those left out); past them a server's new names wait for a restart.
MAX_CONSIDERED = 2 * MAX_TOOLS_PER_SERVER
#: The longest listed name a tool table naming no listed tool is compared with for a likely
#: spelling, and how many names get difflib's full ratio (quadratic in a name's length): both
#: how long and how many the names are is the upstream's to make, and a table's hint must cost
#: milliseconds, not seconds, whatever it lists (1,024 names of 128 characters took 2.5 s).
_MEANT_CHARS = 64
_MEANT_COMPARED = 16
#: difflib's ``get_close_matches`` cutoff: a spelling less alike is no hint.
_MEANT_CUTOFF = 0.6


def tool_name(server: str, upstream: str) -> str:
    """``mcp.<server>__<tool>``: deterministic, at most ``MAX_NAME`` characters. A plain name
    that fits is kept; any other is made plain and suffixed with 8 hex digits of its hash."""
    prefix = f"mcp.{server}__"
    budget = MAX_NAME - len(prefix)
    if _PLAIN.fullmatch(upstream) and len(upstream) <= budget and not _SUFFIXED.search(upstream):
        return prefix + upstream
    digest = hashlib.sha256(upstream.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    plain = _OTHER.sub("_", upstream.lower()).strip("_")
    return f"{prefix}{plain[:budget - 9]}_{digest}" if plain else f"{prefix}{digest}"


def description_for(server: str, tool: UpstreamTool, written: str | None) -> str:
    if written is not None:
        return written
    said = one_line(tool.description, MAX_DESCRIPTION) or "(no description)"
    return (f"A tool of the MCP server {server} (not part of this host; its description is "
            f"the server's own): {said}")


def _head_and_tail(text: str) -> str:
    """``text`` cut to ``KEPT_TEXT`` UTF-8 bytes around a marker, when it is longer."""
    data = text.encode("utf-8", "replace")
    if len(data) <= KEPT_TEXT:
        return text
    half = KEPT_TEXT // 2
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    elided = len(data) - len(head.encode()) - len(tail.encode())
    return (f"{head}\n[... {elided} bytes of the upstream result elided by the gateway, of "
            f"{len(data)} ...]\n{tail}")


@attrs.frozen
class _Mapped:
    server: str
    upstream: UpstreamTool


class Gateway:
    """The configured servers, their adapter, and the tools made of their listings."""

    def __init__(self, servers: Sequence[UpstreamServer], upstreams: Upstreams, *,
                 monotonic: Callable[[], float]) -> None:
        self.servers = {s.name: s for s in servers}
        self.upstreams = upstreams
        #: The host's monotonic clock: a call's time left is its deadline less this.
        self._monotonic = monotonic
        self._mapped: dict[str, _Mapped] = {}
        #: (server, upstream name or "") -> the line saying why it is left out: one line per
        #: tool, replaced rather than repeated when a listing says it again.
        self._left_out: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        #: name -> why it is disabled until reviewed.
        self._disabled: dict[str, str] = {}
        #: Per server, the upstream names considered since the start (registered or left out
        #: once, with its line, not again at each listing); at most ``MAX_CONSIDERED`` each,
        #: so a server listing ever-new names costs a bounded amount of work and memory.
        self._considered: dict[str, set[str]] = {name: set() for name in self.servers}
        #: Set once the host subscribed (``on_tools_added``): listings before it are the
        #: start's own (``contribution``), or caught up at the subscription.
        self._live = False
        self._on_added: list[Callable[[list[Tool]], None]] = []
        self._on_disabled: list[Callable[[list[str]], None]] = []
        #: Per server, the tool tables naming no tool of its last listing that the log was
        #: told of: said again only when a listing changes them, not at every list_changed.
        self._unmatched_said: dict[str, frozenset[str]] = {}
        #: Servers whose listing came before the host's log was configured (structlog's
        #: default writes to stdout, ``toolhost serve``'s transport): said at their next call.
        self._unsaid: set[str] = set()
        upstreams.on_tools_changed(self._tools_changed)

    # ------------------------------------------------------------------ registration

    def contribution(self) -> Contribution:
        """The tools of every server connected now, each one that passes registration alone
        (a tool failing step 5 is left out, with a line in ``readiness``)."""
        tools: list[Tool] = []
        with self._lock:
            for status in self.upstreams.status():
                server = self.servers[status.name]
                listed = sorted(status.tools, key=lambda t: t.name)
                if len(listed) > MAX_TOOLS_PER_SERVER:
                    self._left_out[(server.name, "")] = (
                        f"{server.name}: lists {len(listed)} tools; those after the first "
                        f"{MAX_TOOLS_PER_SERVER} by name are left out")
                    self._considered[server.name].update(
                        t.name for t in listed[MAX_TOOLS_PER_SERVER:MAX_CONSIDERED])
                    listed = listed[:MAX_TOOLS_PER_SERVER]
                tools += self._admit(server, listed)
        return Contribution(GATEWAY_DISTRIBUTION, (), tuple(tools))

    def _admit(self, server: UpstreamServer, listed: Sequence[UpstreamTool]) -> list[Tool]:
        """Of ``listed`` (sorted by name), the tools that pass registration, each alone, now
        mapped; a line for each left out. Under ``_lock``."""
        names: dict[str, list[str]] = {}
        for upstream in listed:
            names.setdefault(tool_name(server.name, upstream.name), []).append(upstream.name)
        tools: list[Tool] = []
        for upstream in listed:
            self._considered[server.name].add(upstream.name)
            name = tool_name(server.name, upstream.name)
            if len(names[name]) > 1 or name in self._mapped:
                # Two upstream names with one mapping (a hash collision): neither is taken,
                # so which one a name means never depends on the listing's order; and a name
                # already given is never given again.
                others = len(names[name]) - 1 + (name in self._mapped)
                self._leave_out(server.name, upstream.name, f"its name {name} is also that "
                                f"of {others} other tool(s)")
                continue
            tool = self._tool(server, upstream)
            if tool is None:
                continue
            try:
                problems = registration_problems(
                    [], gateway=Contribution(GATEWAY_DISTRIBUTION, (), (tool,)))
            except Exception as exc:  # one tool's, never the listing's
                # Each tool alone: whatever its check raises leaves it out, not the ones after.
                self._leave_out(server.name, upstream.name,
                                f"its registration failed ({type(exc).__name__})")
                continue
            if problems:
                hint = ""
                if "additionalProperties" in problems[0].problem:
                    hint = (f" (close_schema = true under [mcp.servers.{server.name}.tools."
                            f"{_table_key(upstream.name)}] closes it)")
                self._leave_out(server.name, upstream.name, f"{problems[0].problem}{hint}")
                continue
            tools.append(tool)
            self._mapped[name] = _Mapped(server.name, upstream)
        return tools

    def _leave_out(self, server: str, upstream: str, why: str) -> None:
        self._left_out[(server, upstream)] = (f"{server}: tool {_shown(upstream)} is left out: "
                                              f"{why}")

    def _tool(self, server: UpstreamServer, upstream: UpstreamTool) -> Tool | None:
        written = server.classification(upstream.name)
        if written.enabled is False:
            return None
        input_schema = reviewed_schema(closed(upstream.input_schema) if written.close_schema
                                       else upstream.input_schema)
        if isinstance(input_schema, str):
            self._leave_out(server.name, upstream.name, input_schema)
            return None
        idempotency = written.idempotency or Idempotency.NON_IDEMPOTENT
        name = tool_name(server.name, upstream.name)
        spec = ToolSpec(
            name=name,
            version=GATEWAY_VERSION,
            description=description_for(server.name, upstream, written.description),
            input_schema=input_schema,
            output_schema=OUTPUT_SCHEMA,
            kind=Kind.CAPABILITY,
            source=Source.MCP,
            target_kind=TargetKind.IN_PROCESS,
            server_id=server.name,
            side_effect=written.side_effect or SideEffect.EXTERNAL_WRITE,
            risk=written.risk or Risk.HIGH,
            idempotency=idempotency,
            output_trust=Trust.EXTERNAL_UNTRUSTED,
            required_scopes=written.scopes or (),
            timeout_s=written.timeout_s or DEFAULT_TIMEOUT_S,
            maximum_output_bytes=MAXIMUM_OUTPUT_BYTES,
            allow_parallel=idempotency is Idempotency.READ_ONLY,
            deprecated=False,
        )
        return Tool(spec, call=self._body(name, server.name, upstream.name), reasons=REASONS)

    # ------------------------------------------------------------------ the call

    def _body(self, name: str, server: str, upstream: str) -> Any:
        async def call(arguments: Mapping[str, Any],
                       context: ToolExecutionContext) -> ToolOutput:
            # A call approved before the tool was disabled reaches its body: refused here as
            # the pipeline refuses a new one (``refusal_of``).
            refused = self.refusal_of(name)
            if refused is not None:
                raise refused
            if server in self._unsaid:
                # Off the event loop: every other request of a serving host waits on it.
                await asyncio.to_thread(self._say_unmatched, server)
            where = {"server": server, "tool": upstream}
            timeout = max(context.deadline - self._monotonic(), 0.001) + _SDK_GRACE_S
            # The server's progress is asked for only when someone watches this call (the
            # context's reporter: the host's own class, read where the host set it).
            watched = context._reporter is not no_progress
            try:
                result = await self.upstreams.call(
                    server, upstream, arguments, timeout_s=timeout,
                    progress=context.progress if watched else None)
            except UpstreamError as exc:
                raise ToolFailure(_FAILURE_CODES[exc.failure], detail={**where,
                                  "upstream": exc.detail},
                                  retryable=exc.failure is UpstreamFailure.UNREACHABLE
                                  ) from None
            if result.is_error:
                # The upstream's words stay with operators: they may carry instructions.
                raise ToolFailure(TOOL_ERROR, detail={**where,
                                                      "upstream": result.text[:2000]})
            structured = None
            if result.structured is not None:
                structured = json.dumps(result.structured, sort_keys=True, ensure_ascii=False)
                if len(structured.encode("utf-8", "replace")) > KEPT_TEXT:
                    raise ToolFailure(TOO_LARGE, detail={**where, "structured_bytes":
                                                         len(structured)})
            text = result.text if result.text or structured is None else structured
            return ToolOutput(structured={"structured_content": structured},
                              content=_head_and_tail(text),
                              output_trust=Trust.EXTERNAL_UNTRUSTED)

        return call

    # ------------------------------------------------------------------ lifecycle

    def on_tools_added(self, callback: Callable[[list[Tool]], None]) -> None:
        """Call ``callback(tools)`` with the tools registered since the start (a server's
        listing changed, or a server reached only after the start), on the adapter's listing
        thread. From now on: what was listed since ``contribution`` is caught up here."""
        with self._lock:
            self._on_added.append(callback)
            self._live = True
        for server in self.servers:
            self._tools_changed(server)

    def on_tools_disabled(self, callback: Callable[[list[str]], None]) -> None:
        """Call ``callback(names)`` with the tools disabled by a listing from now on, on the
        adapter's listing thread (those disabled before: ``disabled_tools``)."""
        with self._lock:
            self._on_disabled.append(callback)

    def disabled_tools(self) -> frozenset[str]:
        """The names of the tools disabled until reviewed, now."""
        with self._lock:
            return frozenset(self._disabled)

    def refusal_of(self, name: str) -> ToolFailure | None:
        """What every call of ``name`` fails with whatever its arguments, before anyone is
        asked to approve it (the pipeline's ``withdrawn``, D452): ``mcp_schema_changed`` for a
        tool disabled until reviewed; None for any other name."""
        why = self._disabled.get(name)
        if why is None:
            return None
        mapped = self._mapped.get(name)
        where = {"server": mapped.server, "tool": mapped.upstream.name} if mapped else {}
        return ToolFailure(SCHEMA_CHANGED, detail={**where, "why": why})

    def _tools_changed(self, server: str) -> None:
        """A server listed its tools again: a registered tool whose input schema changed, or
        that is gone, is disabled until reviewed; one listed only now is registered, through
        the same steps as at the start."""
        with self._lock:
            if not self._live:
                return  # the start's own listing: ``contribution`` takes it
            # Read under the lock: two threads (the subscription's catch-up and the adapter's)
            # never judge a listing older than the one the other just admitted from.
            status = self._status_of(server)
            listed = {t.name: t for t in status.tools} if status is not None else {}
            unmatched = self._newly_unmatched(status)
            mine = {m.upstream.name: name for name, m in self._mapped.items()
                    if m.server == server}
            disabled = []
            for upstream, name in mine.items():
                now = listed.get(upstream)
                why = ("no longer listed by its server" if now is None
                       else self._changed(server, self._mapped[name].upstream, now))
                if why is not None and name not in self._disabled:
                    self._disabled[name] = why
                    disabled.append((name, why))
            added = self._admit(self.servers[server], self._fresh(server, listed, len(mine)))
            listeners = list(self._on_added) if added else []
            withdrawing = list(self._on_disabled) if disabled else []
        # Said where the operator of the running host looks: a new process (``toolhost
        # check``) lists the server anew and cannot know what changed here.
        from toolhost._pipeline.log import get_logger

        for name, why in disabled:
            get_logger(tool=name, server=server).warning("gateway.tool_disabled", why=why)
        self._log_unmatched(status, unmatched)
        for callback in listeners:
            callback(added)
        for told in withdrawing:
            told([name for name, _ in disabled])

    def _changed(self, server: str, was: UpstreamTool, now: UpstreamTool) -> str | None:
        """What changed of a registered tool that makes it another tool (D441: what an
        approval binds to): its input schema, or the description the model and the person
        read (the server's, unless the operator wrote one); None when neither did."""
        if dict(now.input_schema) != dict(was.input_schema):
            return "its input schema changed"
        written = self.servers[server].classification(was.name).description
        if description_for(server, now, written) != description_for(server, was, written):
            return "its description changed"
        return None

    def _fresh(self, server: str, listed: Mapping[str, UpstreamTool],
               registered: int) -> list[UpstreamTool]:
        """The tools of ``listed`` not considered yet, in name order, as many as there is
        room for (``MAX_TOOLS_PER_SERVER`` registered, ``MAX_CONSIDERED`` considered); a line
        for those past it. Under ``_lock``."""
        considered = self._considered[server]
        fresh = sorted((t for n, t in listed.items() if n not in considered),
                       key=lambda t: t.name)
        room = min(MAX_TOOLS_PER_SERVER - registered, MAX_CONSIDERED - len(considered))
        if len(fresh) > room:
            self._left_out[(server, "")] = (
                f"{server}: lists more tools than the gateway takes of one server "
                f"({MAX_TOOLS_PER_SERVER} registered, {MAX_CONSIDERED} considered); the rest "
                "wait for the next start")
            fresh = fresh[:max(room, 0)]
        return fresh

    # ------------------------------------------------------------------ operators

    def readiness(self) -> list[str]:
        """One line per server not connected, per tool left out, disabled or waiting, and per
        tool table naming no tool its server lists now."""
        lines = []
        for status in self.upstreams.status():
            if status.state is not ServerState.CONNECTED:
                lines.append(self._absent(status))
            for table, meant in self._unmatched(status):
                lines.append(f"{status.name}: {_unmatched_words(table, meant)}")
        with self._lock:
            lines += self._left_out.values()
            for name, why in sorted(self._disabled.items()):
                lines.append(f"{self._mapped[name].server}: {name} is disabled until reviewed: "
                             f"{why} (restart the host to register it as listed now)")
        return lines

    def _unmatched(self, status: UpstreamStatus) -> list[tuple[str, str | None]]:
        """Each tool table of ``status``'s server naming no tool of its listing (as written:
        ``[mcp.servers.S.tools.NAME]``), with the table it likely meant, if any. A misspelt
        ``enabled = false`` leaves the tool it meant registered."""
        return self._hinted(status, self._unmatched_names(status))

    def _unmatched_names(self, status: UpstreamStatus) -> list[str]:
        """The names of ``status``'s server's tool tables its listing lacks. Only a connected
        server's listing is known; and a table may be written ahead of a tool it lists later."""
        if status.state is not ServerState.CONNECTED:
            return []
        listed = {t.name for t in status.tools}
        return [written for written in self.servers[status.name].tools if written not in listed]

    def _hinted(self, status: UpstreamStatus, names: Sequence[str]
                ) -> list[tuple[str, str | None]]:
        """Each of ``names`` as its table, with the one it likely meant (``_meant``): outside
        ``_lock``, so no other thread waits on the comparison."""
        listed = {t.name for t in status.tools} if names else set()
        return [(_table_of(status.name, written), _meant(status.name, written, listed))
                for written in names]

    def _newly_unmatched(self, status: UpstreamStatus | None) -> list[str]:
        """``_unmatched_names``, when this listing changed them since the log was last told
        (then what is new of them); else nothing. Nothing either before the host's log is
        configured: the server's next call says it (``_say_unmatched``). Under ``_lock``."""
        from toolhost._pipeline.log import logging_configured

        if status is None:
            return []
        if not logging_configured():
            self._unsaid.add(status.name)
            return []
        self._unsaid.discard(status.name)
        names = self._unmatched_names(status)
        said = self._unmatched_said.get(status.name, frozenset())
        if status.state is not ServerState.CONNECTED or frozenset(names) == said:
            return []
        self._unmatched_said[status.name] = frozenset(names)
        return [written for written in names if written not in said]

    def _say_unmatched(self, server: str) -> None:
        """Log what a listing that came before the log was configured left unsaid."""
        with self._lock:
            status = self._status_of(server)
            unmatched = self._newly_unmatched(status)
        self._log_unmatched(status, unmatched)

    def _log_unmatched(self, status: UpstreamStatus | None, names: Sequence[str]) -> None:
        """Said in the log of the host that listed the server: a serving host's operator reads
        no ``toolhost check`` of it. Outside ``_lock`` (the hints' comparison)."""
        if status is None or not names:
            return
        from toolhost._pipeline.log import get_logger

        for table, meant in self._hinted(status, names):
            get_logger(server=status.name).warning("gateway.tool_table_unmatched", table=table,
                                                   meant=meant)

    def _status_of(self, server: str) -> UpstreamStatus | None:
        """``server``'s status now; None for one the adapter does not hold (disabled)."""
        return next((s for s in self.upstreams.status() if s.name == server), None)

    def unconnected_server_of(self, name: str) -> str | None:
        """For a tool name of a configured server that is not connected now: that server's
        readiness line (the tool may well exist once it is); None otherwise."""
        server = name.removeprefix("mcp.").partition("__")[0] if name.startswith("mcp.") \
            and "__" in name else None
        for status in self.upstreams.status():
            if status.name == server and status.state is not ServerState.CONNECTED:
                return self._absent(status)
        return None

    def _absent(self, status: UpstreamStatus) -> str:
        return (f"server {status.name} ({self.servers[status.name].transport}) is "
                f"{status.state.value}: {status.problem}; its tools are absent")

    def servers_summary(self) -> list[dict[str, Any]]:
        """Each server: its transport, state, problem, and its registered tools."""
        found = []
        for status in self.upstreams.status():
            server = self.servers[status.name]
            with self._lock:
                names = sorted(n for n, m in self._mapped.items() if m.server == status.name)
            found.append({
                "server": status.name, "transport": server.transport,
                "state": status.state.value, "problem": status.problem, "tools": names,
            })
        return found

    def configured_scopes(self) -> frozenset[str]:
        """Every scope the operator's classification names, for any server or tool: what a
        tool registered after the start may require."""
        return frozenset(
            scope for server in self.servers.values()
            for chosen in (server.defaults, *server.tools.values())
            for scope in chosen.scopes or ())

    def close(self) -> None:
        self.upstreams.close()


def _table_key(name: str) -> str:
    """An upstream name as a TOML key: bare when it can be, else quoted (and escaped)."""
    if re.fullmatch(r"[A-Za-z0-9_-]+", name):
        return name
    return json.dumps(name[:80])


def _table_of(server: str, tool: str) -> str:
    """The operator's table for ``tool`` of ``server``, as a TOML header."""
    return f"[mcp.servers.{server}.tools.{_table_key(tool)}]"


def _meant(server: str, written: str, listed: set[str]) -> str | None:
    """The table a tool table naming no listed tool was likely meant as: the listed tool whose
    toolhost name it wrote (tables take the server's own name), else the closest spelling."""
    prefix = f"mcp.{server}__"
    meant = [u for u in sorted(listed) if tool_name(server, u).removeprefix(prefix) == written]
    closest = meant[0] if meant else _closest(written, listed)
    return _table_of(server, closest) if closest is not None else None


def _closest(written: str, listed: set[str]) -> str | None:
    """The listed name spelt most like ``written`` by difflib's ratio, as ``get_close_matches``
    finds it, at a bounded cost: of the names up to ``_MEANT_CHARS`` long, only the
    ``_MEANT_COMPARED`` sharing the most characters with it (difflib's linear
    ``quick_ratio``) get the full comparison."""
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(written[:_MEANT_CHARS])  # difflib caches the second sequence's index
    alike = []
    for name in listed:
        if len(name) <= _MEANT_CHARS:
            matcher.set_seq1(name)
            if matcher.real_quick_ratio() >= _MEANT_CUTOFF:
                alike.append((matcher.quick_ratio(), name))
    scored = []
    for quick, name in heapq.nlargest(_MEANT_COMPARED, alike):
        if quick >= _MEANT_CUTOFF:
            matcher.set_seq1(name)
            scored.append((matcher.ratio(), name))
    best = max(scored, default=None)
    return best[1] if best is not None and best[0] >= _MEANT_CUTOFF else None


def _unmatched_words(table: str, meant: str | None) -> str:
    said = f"{table} names no tool the server lists, so it applies to none"
    return f"{said} (did you mean {meant}?)" if meant is not None else said


def _shown(name: str) -> str:
    """An upstream's name, as an operator's line quotes it (it is the upstream's word)."""
    return repr(name[:80])
