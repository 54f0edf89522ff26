"""An approved call its client cancelled while it ran is never replayed (D371): the same call
again is a new call, and the person is asked again.

A real `toolhost serve` on stdio, driven with raw frames, serving the MCP fixture plugin with
one more tool: ``fxw.gated_slow``, EXTERNAL_WRITE/HIGH (every call asks for approval), whose
async body sleeps long enough to be cancelled."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from installed import install_fake_plugin

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_mcp_server import (
    FIXTURE_SOURCE,
    INITIALIZE,
    INITIALIZED,
    Served,
    assert_no_traceback,
    finish,
    read_frames,
    write,
)

from toolhost._model import host_reasons as core_messages

GATED_SLOW = '''
    async def gated_slow(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        import asyncio

        _log(settings, "gated started")
        await asyncio.sleep(30)
        return ToolOutput(structured={"recorded": True, "destination": arguments["destination"]},
                          content="recorded")

    gated = _spec("fxw.gated_slow", WRITE_IN, WRITE_OUT, side_effect=SideEffect.EXTERNAL_WRITE,
                  risk=Risk.HIGH, idempotency=Idempotency.NON_IDEMPOTENT, required_scopes=())
    return [Tool(WRITE, call=write), Tool(SLOW, call=slow), Tool(gated, call=gated_slow)]'''


@pytest.fixture
def served(tmp_path: Path) -> Any:
    source = FIXTURE_SOURCE.read_text()
    last = "    return [Tool(WRITE, call=write), Tool(SLOW, call=slow)]"
    assert last in source
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", source.replace(last, GATED_SLOW))
    served = Served(tmp_path, plugins="fake-mcp", site=site, FXW_LOG=str(tmp_path / "fxw.log"))
    yield served
    served.stop_leftovers()


def gated(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "fxw.gated_slow", "arguments": {"destination": "a"}}}


def test_an_approved_call_cancelled_while_it_ran_is_asked_again_not_replayed(
        served: Served) -> None:
    process = served.popen()
    write(process, {**INITIALIZE, "params": {**INITIALIZE["params"],
                                             "capabilities": {"elicitation": {"form": {}}}}})
    read_frames(process, 1)
    write(process, INITIALIZED, gated(2))
    (asked,) = read_frames(process, 1)
    assert asked["method"] == "elicitation/create"
    write(process, {"jsonrpc": "2.0", "id": asked["id"],
                    "result": {"action": "accept", "content": {"approve": True}}})
    log = Path(served.settings["FXW_LOG"])
    deadline = time.monotonic() + 30
    while not (log.exists() and log.read_text() == "gated started\n"):
        assert time.monotonic() < deadline, "the approved call never started"
        time.sleep(0.05)
    write(process, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 2, "reason": "the user stopped it"}})
    deadline = time.monotonic() + 30
    while served.rows()[0]["state"] == "running":
        assert time.monotonic() < deadline, "the cancellation was never recorded"
        time.sleep(0.05)
    # The same call again: the person is asked about a new invocation, not handed the
    # cancellation of the one they approved before.
    write(process, gated(3))
    (again,) = read_frames(process, 1)
    assert again.get("method") == "elicitation/create", json.dumps(again)[:300]
    write(process, {"jsonrpc": "2.0", "id": again["id"],
                    "result": {"action": "decline"}})
    (declined,) = read_frames(process, 1)
    assert declined["id"] == 3 and declined["result"]["isError"] is True
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    first, second = served.rows()
    assert (first["state"], first["reason_code"]) == ("failed", core_messages.RUN_CANCELLED)
    assert second["state"] == "denied" and second["id"] != first["id"]
    assert log.read_text() == "gated started\n"  # run once, never again
