"""The sessionless run (2026-07-28 requests over HTTP) past TOOLHOST_MCP_RUN_TIMEOUT_S: no
client can end it as a session's run ends with its session, so it is ended and a new one
started at the next request; it answered every call with the deadline until the server
restarted. A session's run keeps its deadline: its client opens another session (and on
stdio the process is the session)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from toolhost import Principal
from toolhost._mcp.sessions import Sessions
from toolhost.testing import Harness

MODERN = "2026-07-28"


def _request(protocol: str, *, session: str | None = None) -> Any:
    """An HTTP request's context as the SDK hands it to a handler (stdio's has none)."""
    headers = {"mcp-session-id": session} if session else {}
    return SimpleNamespace(request=SimpleNamespace(scope={}, headers=headers),
                           protocol_version=protocol)


def test_the_sessionless_run_past_its_deadline_is_replaced_by_a_new_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with Harness.over({}) as h:
        sessions = Sessions(h.host, Principal(id="alice", scopes=frozenset()), None,
                            run_timeout_s=60)
        try:
            first = sessions.of(_request(MODERN)).run
            assert sessions.of(_request(MODERN)).run is first  # within its deadline: the same
            named = sessions.of(_request("2025-06-18", session="s1")).run
            assert first.deadline is not None
            later = first.deadline + 1  # the host's monotonic clock, past the first deadline
            monkeypatch.setattr(h.host, "deadline_in", lambda seconds: later + seconds)
            renewed = sessions.of(_request(MODERN)).run
            assert renewed is not first and renewed.id != first.id
            assert first.cancellation.cancelled  # the old one is ended, its calls told
            assert renewed.deadline is not None and renewed.deadline > first.deadline
            # A session's run keeps its deadline: its client opens another session.
            assert sessions.of(_request("2025-06-18", session="s1")).run is named
        finally:
            sessions.close()
