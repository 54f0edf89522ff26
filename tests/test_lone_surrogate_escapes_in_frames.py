"""A frame whose strings hold a lone surrogate escape (``"x\\ud83dy"``: valid JSON under RFC
8259, what JavaScript's ``JSON.stringify`` writes for a string cut inside a pair) is a request
like any other: over stdio its call reaches the pipeline, whose step 4 refuses the arguments
with a row, as ``toolhost call`` does (D45, D17); where the SDK's own parse cannot read it (its
stdio transport, streamable HTTP) it is answered with the request's id, never left waiting.

Real servers: ``toolhost serve`` subprocesses driven with raw frames on stdin, and
``toolhost serve --http`` driven with raw POSTs, as the neighbouring tests of frames do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import run
from test_http_serve import ADA, deployment, post
from test_mcp_server import (  # noqa: F401 - the fixture, asked for by name
    INVALID_REQUEST,
    PARSE_ERROR,
    Served,
    assert_no_traceback,
    calculate,
    finish,
    initialized,
    read_frames,
    served,
    write,
)

from toolhost._mcp.frames import LONE_SURROGATE, read_json

#: Request 7: math.calculate with an expression cut inside a surrogate pair, as a JS client
#: sends it (json.dumps writes the same escape for the lone surrogate).
CUT_CALL = json.dumps(calculate(7, "6 * 7 \ud83d"))


def test_the_standard_parser_reads_a_frame_whose_only_fault_is_lone_surrogates() -> None:
    assert read_json(CUT_CALL)["params"]["arguments"] == {"expression": "6 * 7 \ud83d"}
    assert read_json(CUT_CALL.encode())["id"] == 7
    # An escaped backslash before "ud800" is plain text, read by pydantic-core as it was.
    assert read_json(r'["\\ud800"]') == ["\\ud800"]
    # Another fault as well: still not JSON; nor more depth than pydantic-core reads.
    for text in (CUT_CALL + ",", CUT_CALL.replace('"id"', "id"),
                 "[" * 300 + '"\\ud800"' + "]" * 300):
        with pytest.raises(ValueError):
            read_json(text)


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_lone_surrogate_in_a_calls_arguments_is_answered_by_id(
        served: Served, stdio: str) -> None:  # noqa: F811 - the fixture
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
    write(process, CUT_CALL)
    (answer,) = read_frames(process, 1)
    assert answer["id"] == 7
    if stdio == "auto":
        # The pipeline's answer: step 4 refuses the arguments, with a row (below).
        assert answer["result"]["isError"] is True
        assert answer["result"]["_meta"]["toolhost/reasonCode"] == (
            "tool.invalid_arguments.schema")
    else:
        # The SDK's transport parses the line itself and cannot: answered, by id, not run.
        assert answer["error"] == {"code": -32602, "message": LONE_SURROGATE}
    # Outside a call's arguments a lone surrogate is echoed, looked up or logged: refused by id
    # (none, when it is in the id: an answer carrying it could not be written). With another
    # fault it is still not JSON; with an unusable id, still no id. The server carries on.
    named = json.dumps({**calculate(9, "1"), "params": {"name": "math.\ud800", "arguments": {}}})
    write(process, named, json.dumps({"jsonrpc": "2.0", "id": "a\ud800", "method": "ping"}),
          CUT_CALL + ",", CUT_CALL.replace('"id": 7', '"id": 1.5'), calculate(8, "17 * 23"))
    by_name, by_id, not_json, unusable, answer = read_frames(process, 5)
    assert by_name == {"jsonrpc": "2.0", "id": 9,
                       "error": {"code": -32602, "message": LONE_SURROGATE}}
    assert (by_id, not_json, unusable) == (INVALID_REQUEST, PARSE_ERROR, INVALID_REQUEST)
    assert (answer["id"], answer["result"]["content"][0]["text"]) == (8, "391")
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    refused = [("failed", "tool.invalid_arguments.schema")] if stdio == "auto" else []
    assert [(r["state"], r["reason_code"]) for r in served.rows()] == [
        *refused, ("succeeded", None)]


def test_a_lone_surrogate_over_http_is_answered_with_the_requests_id(tmp_path: Path) -> None:
    people = deployment(tmp_path)
    headers: dict[str, Any] = {"mcp-protocol-version": "2026-07-28"}

    async def journey() -> None:
        async with people.http_server() as url:
            answer = post(url, CUT_CALL.encode(), token=ADA, **headers)
            assert (answer.status_code, answer.json()) == (400, {
                "jsonrpc": "2.0", "id": 7,
                "error": {"code": -32602, "message": LONE_SURROGATE}})
            not_json = post(url, (CUT_CALL + ",").encode(), token=ADA, **headers)
            assert (not_json.status_code, not_json.json()) == (400, PARSE_ERROR)

    run(journey)
    assert people.invocations() == []
