"""An HTTP upstream that answers a call with an event stream whose event is not JSON-RPC: the
call fails ``mcp_protocol_error`` as an unreadable JSON body and an unreadable stdio line do
(D494), not as the server's own error, against the hostile loopback server of
tests/test_gateway_http_hostile.py, directly and through ``toolhost call``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import invocation_rows

pytest.importorskip("mcp")

from test_gateway_http_hostile import Hostile, call, connected

from toolhost._model.upstream import ServerState, UpstreamError, UpstreamFailure
from toolhost._registration.gateway import PROTOCOL, REASONS
from toolhost.testing import run_toolhost

#: What each tool's one event carries as its data: no JSON, and JSON that is no JSON-RPC.
UNREADABLE_EVENTS = {"event_not_json": b"not json", "event_not_jsonrpc": b'{"foo":1}'}


class EventsHostile(Hostile):
    """The hostile server, with its tools ``event_not_json`` and ``event_not_jsonrpc``
    answered by an event stream of one such event."""

    async def tool(self, writer: asyncio.StreamWriter, path: str, rid: Any, name: str,
                   js: dict[str, str]) -> None:
        if name not in UNREADABLE_EVENTS:
            await super().tool(writer, path, rid, name, js)
            return
        await self.send(writer, "200 OK", {**js, "Content-Type": "text/event-stream"},
                        b"event: message\ndata: " + UNREADABLE_EVENTS[name] + b"\n\n")


@pytest.fixture
def hostile(monkeypatch: pytest.MonkeyPatch) -> Iterator[EventsHostile]:
    import test_gateway_http_hostile

    monkeypatch.setattr(test_gateway_http_hostile, "TOOLS",
                        (*test_gateway_http_hostile.TOOLS, *UNREADABLE_EVENTS))
    server = EventsHostile()
    yield server
    server.close()


@pytest.mark.parametrize("tool", sorted(UNREADABLE_EVENTS))
def test_an_event_that_is_not_json_rpc_fails_its_call_as_a_protocol_error(
        hostile: EventsHostile, caplog: pytest.LogCaptureFixture, tool: str) -> None:
    """It failed ``rejected`` (the server's own error, ``mcp_tool_error``): the SDK answers
    such an event in the server's stead, in its own words for an event. Now ``protocol``, at
    once, the parser's words for operators, one log line, and the connection stays."""
    with caplog.at_level(logging.WARNING), connected(hostile) as upstreams:
        began = time.monotonic()
        refused = asyncio.run(call(upstreams, tool))
        assert time.monotonic() - began < 10
        assert asyncio.run(call(upstreams, "echo")) == "echo"
        assert upstreams.status()[0].state is ServerState.CONNECTED
    assert isinstance(refused, UpstreamError), refused
    assert refused.failure is UpstreamFailure.PROTOCOL, refused
    assert refused.detail.startswith("Failed to parse SSE message: "), refused.detail
    noisy = [r for r in caplog.records if r.exc_info is not None]
    assert noisy == [], [(r.name, r.getMessage(), r.exc_info[1]) for r in noisy if r.exc_info]


def test_a_non_idempotent_call_answered_by_an_unreadable_event_is_recorded_not_retryable(
        hostile: EventsHostile, tmp_path: Path) -> None:
    """Through the whole pipeline: the row says what happened (``mcp_protocol_error``, the
    parser's words in its detail), the model reads the reason's static message and none of
    the server's bytes, and a call the server did answer is not retryable."""
    config = tmp_path / "toolhost.toml"
    config.write_text(f'''
[mcp.servers.h]
url = "http://127.0.0.1:{hostile.port}/mcp"
connect_timeout_s = 60

[mcp.servers.h.tools.event_not_json]
side_effect = "NONE"
risk = "LOW"
idempotency = "NON_IDEMPOTENT"
''')
    data_dir = tmp_path / "data"
    called = run_toolhost("call", "mcp.h__event_not_json", "--args", "{}", "--json",
                          data_dir=data_dir, plugins="", env={"TOOLHOST_CONFIG": str(config)})
    assert called.returncode != 0, called.stdout
    assert "Traceback" not in called.stderr, called.stderr
    outcome = json.loads(called.stdout)
    (message,) = [r.message for r in REASONS if r.code == PROTOCOL]
    assert "not json" not in called.stdout and "Failed to parse" not in called.stdout
    assert message in called.stdout, called.stdout
    assert outcome["retryable"] is False, outcome
    (row,) = invocation_rows(data_dir / "toolhost.sqlite3")
    assert (row["state"], row["reason_code"], row["retryable"]) == ("failed", PROTOCOL, 0)
    assert "Failed to parse SSE message: " in row["failure_detail"], row["failure_detail"]
    assert "not json" in row["failure_detail"], row["failure_detail"]
