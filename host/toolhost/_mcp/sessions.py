"""One run per MCP session: the principal, the served roster, a workspace, and what was said.

When: a session's first ``tools/call`` starts its run; ``close`` ends every run when the
server stops. What a session is: on stdio, the process (one client per process); on
streamable HTTP, the transport session the ``mcp-session-id`` header names; requests without
one (2026-07-28 clients, which have no sessions) share one server-wide run. Why one run per
session: the run is what the pipeline scopes a workspace, a principal and the invocation rows
to, and an MCP session is the nearest thing the protocol has to an agent run. Each run is
live on the host while its session lasts: its workspace is made on first use (or is the
operator's directory, TOOLHOST_MCP_WORKSPACE), kept through approvals answered in the call,
discarded when a call is left waiting (a pause: the next call, or the approved one wherever it
runs, starts the run's next workspace), and ended with the session. Its pins and deadline are
the server's (``--pin``, TOOLHOST_MCP_RUN_TIMEOUT_S).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from toolhost._composition import Host
from toolhost._mcp.http_front import CALLER_KEY
from toolhost._model.context import Principal
from toolhost._model.runs import Run
from toolhost._pipeline.log import get_logger

__all__ = ["Session", "Sessions", "session_key"]

SESSION_HEADER = "mcp-session-id"


@attrs.define(eq=False)
class Session:
    """A session's run, and the recorded outcomes already handed back in it."""

    key: str | None
    run: Run
    #: Invocation ids whose final recorded outcome this session has returned once (replays).
    delivered: set[str] = attrs.field(factory=set)
    #: Calls recorded awaiting approval while the person is asked within the call: the run
    #: pauses only if they leave it waiting.
    held: set[str] = attrs.field(factory=set)
    #: Calls whose approval question this session put to a 2026-07-28 client: the only rows
    #: an answer riding a retry may decide.
    asked: set[str] = attrs.field(factory=set)


def session_key(request: Any, protocol_version: str | None = None) -> str | None:
    """The transport session of a request: the HTTP ``mcp-session-id`` header, else None.

    A 2026-07-28 request has no session: the SDK never checks the header on it, so a client
    could name another session's id there and be handed that session's run (its files and
    its pending calls). Such a request is always the server-wide sessionless run.
    """
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    value = headers.get(SESSION_HEADER)
    return value or None


class Sessions:
    """The runs of every session this server has seen, created on first use."""

    def __init__(self, host: Host, principal: Principal, enabled: Iterable[str], *,
                 workspace: Path | None = None, pins: Mapping[str, str] | None = None,
                 run_timeout_s: float | None = None) -> None:
        self._host = host
        self._principal = principal
        self._enabled = frozenset(enabled)
        self._workspace = workspace
        self._pins = dict(pins or {})
        self._run_timeout_s = run_timeout_s
        self._sessions: dict[tuple[str, str, str | None], Session] = {}

    def of(self, ctx: Any) -> Session:
        """The session a request belongs to (``session_key``), for the principal its bearer
        token names (over HTTP with authentication), else the server's principal."""
        scope = getattr(ctx.request, "scope", None) or {}
        caller = scope.get(CALLER_KEY)
        key = session_key(ctx.request, ctx.protocol_version)
        if caller is None:
            return self.get(key)
        return self.get(key, caller.principal, caller.fingerprint)

    def get(self, key: str | None, principal: Principal | None = None,
            credential: str = "") -> Session:
        """The run of session ``key`` for ``principal`` (default: the server's) and the kind
        of credential it came with (``Caller.fingerprint``: how it authenticated, its scopes):
        two principals, or two tokens of one principal with different scopes, never share a
        run, not even the sessionless one."""
        principal = principal if principal is not None else self._principal
        session = self._sessions.get((principal.id, credential, key))
        if session is None:
            # The run's enabled tools are exactly the served roster, so step 2 of the pipeline
            # and tools/list agree by construction.
            run = self._host.start_run(principal=principal, enabled_tools=self._enabled,
                                       conversation_id=key, workspace=self._workspace,
                                       pins=self._pins, timeout_s=self._run_timeout_s)
            session = self._sessions[(principal.id, credential, key)] = Session(key, run)
            get_logger(run_id=run.id).info("mcp.session.started", session=key,
                                           principal=principal.id)
        return session

    def cancel(self) -> None:
        """Cancel every run's calls in flight (a stopping server whose drain time is up):
        each records its cancellation and answers it."""
        for session in list(self._sessions.values()):
            session.run.cancellation.cancel()

    def close(self) -> None:
        """End every run: fresh workspaces are discarded, an operator's directory is kept."""
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            session.run.cancellation.cancel()
            self._host.end_run(session.run)
