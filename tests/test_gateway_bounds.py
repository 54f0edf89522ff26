"""What an upstream's message may cost the host once parsed (``_adapters/mcp_bounds.py``), not
only its bytes: against tests/gateway_hostile_upstream.py, over stdio and Streamable HTTP.

A message's bytes were bounded (129 MiB), but parsing made ~100 bytes of every ``[],``: one
12 MiB answer took 1.4 GB and held the GIL 6 s, past the call's deadline; an 8 MiB listing was
held whole, ~1 GB for the connection's life. The hosts whose memory is measured run in a process
of their own (``HOST``), so that the peak is theirs alone."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolhost._adapters.mcp_bounds import (
    LISTING,
    MAX_CALL_VALUES,
    OTHER,
    Budget,
    EventValues,
    Spending,
    ValueCount,
)
from toolhost._adapters.mcp_stdio import LineFramer, LineTooLong
from toolhost._adapters.mcp_upstream import KEPT_SCHEMA_BYTES, McpUpstreams, kept_schema
from toolhost._model.secrets import Secret
from toolhost._model.upstream import UpstreamServer
from toolhost._registration.upstream_schema import MAX_SCHEMA_BYTES, reviewed_schema

pytest.importorskip("mcp")

from gateway_support import free_port, port_open, processes_with, wait_for

HOSTILE = Path(__file__).with_name("gateway_hostile_upstream.py")
#: The refusal of a message past a call's values.
TOO_MANY = f"a message of more than {MAX_CALL_VALUES} JSON values"

# ------------------------------------------------------------------------------- the count

_OPENERS = b"[{,:"


def openers_outside_strings(data: bytes) -> int:
    """The reference: a byte at a time, a backslash escaping the next byte."""
    count, in_string, escaped = 0, False, False
    for byte in data:
        if escaped:
            escaped = False
        elif byte == 0x5C:
            escaped = True
        elif byte == 0x22:
            in_string = not in_string
        elif not in_string and byte in _OPENERS:
            count += 1
    return count


def values_in(value: Any) -> int:
    """Every value a parser makes of ``value``'s JSON: keys, members, elements, itself."""
    if isinstance(value, dict):
        return 1 + sum(1 + values_in(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(values_in(v) for v in value)
    return 1


def counted(data: bytes, cuts: list[int]) -> int:
    count = ValueCount()
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    for start, end in itertools.pairwise(points):
        count.feed(data, start, end)
    return count.values


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(alphabet=st.sampled_from('ab,:[]{}"\\\n\u00e9\U0001f600 ')),
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.text(alphabet=st.sampled_from('k,:"\\[{'), max_size=4), inner,
                      max_size=5),
    max_leaves=30)


@given(JSON, st.booleans(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_the_count_is_the_openers_outside_strings_however_the_bytes_are_cut(
        value: Any, ascii_only: bool, cuts: list[int]) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert counted(data, cuts) == openers_outside_strings(data)
    assert values_in(value) <= 1 + counted(data, cuts)


@given(st.binary(max_size=60).map(lambda b: b.replace(b"\\", b"")),
       st.lists(st.integers(min_value=0, max_value=60), max_size=8))
def test_without_escapes_any_bytes_count_as_the_reference_does(data: bytes,
                                                              cuts: list[int]) -> None:
    assert counted(data, cuts) == openers_outside_strings(data)


def test_brackets_in_a_long_text_are_not_values() -> None:
    """A result whose text is JSON (servers return that often) holds one value, however many
    brackets and commas its text has."""
    text = json.dumps([{"k": i, "s": 'say "hi"\\'} for i in range(20000)])
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "result": {"content": [
        {"type": "text", "text": text}]}}).encode() + b"\n"
    chunks = [line[i:i + 4096] for i in range(0, len(line), 4096)]
    framer = LineFramer(1 << 30, max_values=100)
    (found,) = [f for chunk in chunks for f in framer.feed(chunk)]
    assert not isinstance(found, LineTooLong)
    assert found.values == openers_outside_strings(line) < 20


def test_a_line_past_its_values_is_refused_as_it_comes_and_names_its_request() -> None:
    framer = LineFramer(1 << 30, max_values=1000)
    assert framer.feed(b'{"jsonrpc":"2.0","id":41,"result":{"a":[' + b"[]," * 400) == []
    (refused,) = framer.feed(b"[]," * 400)
    assert isinstance(refused, LineTooLong)
    assert (str(refused), refused.request_id) == ("a message of more than 1000 JSON values", 41)
    assert framer.feed(b"[]," * 100_000) == []  # the rest of it is skipped, not counted
    assert [bytes(f) for f in framer.feed(b"]}}\n{}\n")] == [b"{}"]


def test_a_requests_head_names_no_answer() -> None:
    """A server's own request has an id of its own: answering it in the server's stead
    failed the host's request of the same id."""
    assert LineTooLong(10, b'{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage"'
                       ).request_id is None
    assert LineTooLong(10, b'{"method":"ping","jsonrpc":"2.0","id":3').request_id is None
    assert LineTooLong(10, b'{"jsonrpc":"2.0","id":3,"result":{').request_id == 3


@pytest.mark.parametrize(("head", "answers"), [
    (b'{"jsonrpc":"2.0","id":3,"params":{},"method":"ping"', None),
    (b'{"id":3,"params":{"_meta":{"a":[1,{"b":"}"}]}},"jsonrpc":"2.0","method":"x"', None),
    # A "method" that is no member of the line itself names nothing: an answer's own.
    (b'{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"method":"GET"', 3),
    (b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"\\"method\\": 1', 3),
    (b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"a \\"}, \\"method\\":', 3),
])
def test_a_requests_head_names_no_answer_wherever_its_method_sits(
        head: bytes, answers: int | None) -> None:
    """JSON's members have no order: a server's request written ``id, params, method`` was
    taken for the answer to the host's request of the same id, and the connection ended."""
    assert LineTooLong(10, head).request_id == answers


def test_a_request_taken_by_its_head_for_a_listings_page_gives_the_listing_back() -> None:
    """Its "method" past the head, a server's request named the pending listing's id: once
    parsed it is no answer, so the listing is still awaited and the request not counted in it."""
    from types import SimpleNamespace

    from toolhost._adapters.mcp_stdio import _Requests, message_of

    requests = _Requests(Budget(2 * LISTING.bytes, MAX_CALL_VALUES))
    requests.sent(SimpleNamespace(method="tools/list", id=5, params=None))
    (asking,) = LineFramer(LISTING.bytes).feed(
        b'{"jsonrpc":"2.0","id":5,"params":{"_meta":{"pad":"%s"}},"method":"ping"}\n'
        % (b"x" * (OTHER.bytes - 100)))
    admitted = requests.admit(asking)
    assert not isinstance(admitted, LineTooLong) and admitted.answers == 5
    settled = requests.settle(admitted, message_of(admitted))
    assert not isinstance(settled, LineTooLong | ValueError) and settled is not None
    assert type(settled.message).__name__ == "JSONRPCRequest"
    (page,) = LineFramer(LISTING.bytes).feed(
        b'{"jsonrpc":"2.0","id":5,"result":{"tools":[],"pad":"%s"}}\n'
        % (b"x" * (LISTING.bytes - OTHER.bytes)))
    # Counted alone: with the request's bytes, the page would be past the listing's budget.
    listed = requests.admit(page)
    assert not isinstance(listed, LineTooLong) and listed.answers == 5


# ------------------------------------------------------------------- an event stream's data

#: What may stand in an event stream's lines: JSON's openers, a quote, the SSE field separator.
_TEXT = st.text(alphabet=st.sampled_from('[{,:" a\u00e9'), max_size=8)
_LINE_END = st.sampled_from(["\n", "\r", "\r\n"])
#: Lines the SSE parser drops, whatever they hold (backslashes and quotes included; no "a",
#: which would make "dat" a data line).
_DROPPED = st.builds(
    lambda name, sep, text: name + sep + text,
    st.sampled_from([":", "event", "id", "retry", "note", "dat", "datax", "DATA", " data", '"']),
    st.sampled_from([":", ": ", ""]), st.text(alphabet=st.sampled_from('[{,:"\\ '), max_size=8))


@st.composite
def _event(draw: st.DrawFn) -> str:
    """One event: its data (JSON text cut into data lines, or text with no backslash) among
    dropped lines, each line with its own line end."""
    if draw(st.booleans()):
        text = json.dumps(draw(JSON), ensure_ascii=draw(st.booleans()))
        # Never within an escape: an LF after its backslash would end the string there.
        places = [i for i in range(1, len(text)) if text[i - 1] != "\\"]
        cuts = sorted(draw(st.lists(st.sampled_from(places), max_size=3))) if places else []
        values = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]
    else:
        values = draw(st.lists(_TEXT, max_size=3))
    lines = []
    for value in values:
        lines += draw(st.lists(_DROPPED, max_size=2))
        lines.append("data" + (draw(st.sampled_from([":", ": "])) if value else "") + value)
    lines += draw(st.lists(_DROPPED, max_size=2))
    ends = draw(st.lists(_LINE_END, min_size=len(lines) + 1, max_size=len(lines) + 1))
    if (ends[-2:-1] == ["\r"] or not lines) and ends[-1] == "\n":
        ends[-1] = "\r"  # a blank line, not the LF of a CRLF (nor the last event's)
    return "".join(line + end for line, end in zip(lines, ends, strict=False)) + ends[-1]


def _event_data(stream: bytes) -> list[bytes]:
    """Each event's data, as the SDK's own SSE parser (httpx2's) reads ``stream``."""
    response = httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               content=stream, request=httpx2.Request("GET", "http://h/"))
    response.encoding = "utf-8"
    return [event.data.encode() for event in httpx2.EventSource(response)]


def _counted_events(stream: bytes, cuts: list[int], budget: int, *,
                    together: bool) -> tuple[str | None, Spending]:
    spending = Spending(Budget(1 << 40, budget))
    events = EventValues(spending, together=together)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    for start, end in itertools.pairwise(points):
        if (why := events.feed(stream[start:end])) is not None:
            return why, spending
    return None, spending


@given(st.lists(_event(), max_size=4).map(lambda e: "".join(e).encode()),
       st.lists(st.integers(min_value=0, max_value=600), max_size=12))
def test_an_event_streams_values_are_its_datas_however_the_bytes_are_cut(
        stream: bytes, cuts: list[int]) -> None:
    """Over HTTP every byte of an event stream was counted as JSON: a comment ``:"`` made the
    count believe the data after it was a string, and a 12 MiB answer of nested arrays was
    parsed again (1.4 GB). The count is now what the parser's data of each event holds."""
    counts = [counted(data, []) for data in _event_data(stream)]
    why, spending = _counted_events(stream, cuts, 1 << 40, together=True)
    assert why is None
    assert spending.earlier_values + spending.count.values == sum(counts)
    # Each event alone: refused exactly when one of them holds more than the budget.
    most = max(counts, default=0)
    assert _counted_events(stream, cuts, most, together=False)[0] is None
    if most:
        assert _counted_events(stream, cuts, most - 1, together=False)[0] == (
            f"a message of more than {most - 1} JSON values")


def test_a_quote_in_a_dropped_line_hides_no_data() -> None:
    data = b'{"a":[' + b"[]," * 1000 + b"[]]}"
    for dropped in (b':"', b'event: "x', b'id: "', b'retry: "', b'note: "', b'"', b'dat:"'):
        stream = dropped + b"\r\nevent: message\r\ndata: " + data + b"\r\n\r\n"
        (parsed,) = _event_data(stream)
        assert _counted_events(stream, list(range(0, len(stream), 7)), 1 << 40,
                               together=True)[1].earlier_values == counted(parsed, []) > 2000


def test_the_budgets_are_what_an_honest_server_needs() -> None:
    # 256 tools registered of a server, each schema up to the review's bound.
    assert LISTING.bytes == 256 * MAX_SCHEMA_BYTES
    assert KEPT_SCHEMA_BYTES == MAX_SCHEMA_BYTES
    assert OTHER.values < LISTING.values <= MAX_CALL_VALUES


# ------------------------------------------------------------------------ through a server

#: A host in a process of its own: starts one upstream, makes the calls it is given, and
#: prints what came back and how much its peak memory grew (``ru_maxrss``, KiB on Linux).
HOST = r"""
import asyncio, json, resource, sys, time
import mcp, mcp.client.streamable_http, mcp_types, httpx2, pydantic_core
from toolhost._adapters.mcp_upstream import McpUpstreams
from toolhost._model.secrets import Secret
from toolhost._model.upstream import UpstreamError, UpstreamServer

spec = json.loads(sys.argv[1])
if "url" in spec:
    server = UpstreamServer(name="h", url=spec["url"])
else:
    server = UpstreamServer(name="h", command=sys.executable, args=tuple(spec["args"]),
                            env={k: Secret(v) for k, v in spec.get("env", {}).items()})

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

upstreams = McpUpstreams((server,))
before = peak()
upstreams.start(60)
(status,) = upstreams.status()
report = {"state": status.state.value, "problem": status.problem, "tools": len(status.tools),
          "start_growth_kib": peak() - before, "calls": []}

async def call(tool, arguments):
    began = time.monotonic()
    try:
        found = await upstreams.call("h", tool, arguments, timeout_s=60)
        outcome = ["ok", found.text[:80]]
    except UpstreamError as exc:
        outcome = [exc.failure.value, exc.detail]
    return outcome + [time.monotonic() - began]

for tool, arguments in spec.get("calls", []):
    before = peak()
    outcome = asyncio.run(call(tool, arguments))
    report["calls"].append(outcome + [peak() - before])
upstreams.close()
print(json.dumps(report))
"""


@contextlib.contextmanager
def marked() -> Iterator[str]:
    """A mark for the upstream processes a test starts; whatever of them outlives the test
    is killed (and the test has failed then)."""
    mark = f"hostilemark-{os.getpid()}-{time.monotonic_ns()}"
    try:
        yield mark
    finally:
        left = processes_with(mark)
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        assert left == []


def hosted(spec: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", HOST, json.dumps(spec)], capture_output=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
    return report


def stdio(mark: str, **env: str) -> dict[str, Any]:
    return {"args": [str(HOSTILE), mark], "env": env}


def test_a_call_answer_of_nested_empty_arrays_is_refused_before_it_is_parsed() -> None:
    """12 MiB of ``[],``: its call failed only once the parse was done (or it was accepted),
    seconds with the GIL held, and the host's peak grew by 1.4 GB. It fails ``too_large`` as
    soon as a million values came, and the call beside it on the same connection is answered."""
    with marked() as mark:
        report = hosted({**stdio(mark), "calls": [["nested", {"mib": 12}],
                                                  ["echo", {"text": "after"}]]})
    refused, after = report["calls"]
    assert refused[:2] == ["too_large", TOO_MANY], refused
    assert refused[2] < 30, f"refused after {refused[2]:.1f} s"
    assert refused[3] < 300 * 1024, f"the peak grew by {refused[3] // 1024} MiB"
    assert after[:2] == ["ok", "echo {'text': 'after'}"]


def test_an_answer_whose_id_comes_last_is_held_to_a_calls_budget() -> None:
    """The TypeScript SDK writes ``result`` before the id: such an answer is still known as
    a call's, with a call's budget (250,000 values, past what any other message may hold);
    one past it names no request while it is read, so the connection ends for it."""
    with marked() as mark:
        report = hosted({**stdio(mark), "calls": [["wide", {"n": 50_000}],
                                                  ["nested", {"mib": 12, "id_last": True}]]})
    wide, refused = report["calls"]
    assert wide[:2] == ["ok", "wide"], wide
    assert refused[:2] == ["too_large", TOO_MANY], refused
    assert refused[3] < 300 * 1024


def test_a_listing_past_its_budget_is_refused_not_held() -> None:
    """1,024 tools whose schemas hold 8 MiB of nested empty arrays: the listing was parsed and
    kept, ~1 GB for the connection's life. The server is unreachable now, and says why."""
    with marked() as mark:
        report = hosted(stdio(mark, LISTING_MIB="8"))
    assert (report["state"], report["tools"]) == ("unreachable", 0), report
    assert report["problem"] == f"MCPError: a message of more than {LISTING.values} JSON values"
    assert report["start_growth_kib"] < 300 * 1024


@pytest.mark.parametrize("form", ["duplicate", "escaped"])
def test_a_line_that_answers_another_request_than_its_head_says_ends_the_connection(
        form: str) -> None:
    """The budget was chosen by the id at the line's head, the answer routed by the one the
    parser kept (the last of two, or one spelled with escapes): a listing held to a call's
    budget was kept, its 17 MiB description past a listing's 16 MiB, and the call forgotten,
    its own answer then taken as one nobody asked for. Now the connection ends for it."""
    with marked() as mark:
        report = hosted({**stdio(mark), "calls": [["two_ids", {"form": form}]]})
    (ended,) = report["calls"]
    assert ended[:2] == ["connection_lost", "the connection closed during the call"], ended


@pytest.mark.parametrize("form", ["string", "middle"])
@pytest.mark.parametrize("pages", [5, 6])
def test_a_listings_pages_count_together_whatever_their_ids_look_like(
        form: str, pages: int) -> None:
    """Pages of 3 MiB whose id was a string (the SDK takes "7" for 7) or stood neither first nor
    last were each held to the 4 MiB of a message nobody asked for, and never counted with
    their listing: 100 of them could keep 300 MiB. Five pages fit a listing's 16 MiB; six do
    not."""
    with marked() as mark:
        report = hosted(stdio(mark, PAGES=str(pages), PAGE_ID=form))
    if pages == 5:
        assert (report["state"], report["tools"]) == ("connected", 5), report
    else:
        assert (report["state"], report["tools"]) == ("unreachable", 0), report
        assert report["problem"] == f"MCPError: a message of more than {LISTING.bytes} bytes"


def test_a_schema_larger_than_the_review_takes_is_not_kept() -> None:
    """The review refuses it for its size, and the listing held it whole anyway: it is a
    stand-in now, which the review refuses in the same words."""
    with marked() as mark:
        upstreams = McpUpstreams((UpstreamServer(
            name="h", command=sys.executable, args=(str(HOSTILE), mark),
            env={"BIG_SCHEMA": Secret("200000")}),))
        try:
            upstreams.start(60)
            (status,) = upstreams.status()
        finally:
            upstreams.close()
    tools = {t.name: t for t in status.tools}
    members = [f"m{i:07d}" for i in range(200000 // 11)]
    listed = {"type": "object", "properties": {"v": {"enum": members}},
              "additionalProperties": False}
    size = len(json.dumps(listed, ensure_ascii=False).encode())
    big = tools["big"].input_schema
    shared = big[""][:-1]  # one string, referred to once for each 1,024 bytes
    assert "properties" not in big and len(shared) == size // 1024
    assert len({id(piece) for piece in shared}) == 1
    assert reviewed_schema(big) == reviewed_schema(listed) == (
        f"its input schema is {size} bytes, more than {MAX_SCHEMA_BYTES}")
    assert dict(tools["echo"].input_schema)["properties"]["text"] == {"type": "string"}


def test_an_upstream_schema_with_a_number_json_has_no_form_for_is_left_out() -> None:
    # An upstream's JSON may say NaN (pydantic's parser takes it): such a tool registered, and
    # every call of it raised out of the pipeline with no row (D401).
    for bound in (float("nan"), float("inf")):
        schema = {"type": "object", "properties": {"x": {"type": "number", "maximum": bound}},
                  "additionalProperties": False}
        assert reviewed_schema(schema) == "its input schema is not JSON"


# ---------------------------------------------------------------------------------- HTTP


@contextlib.contextmanager
def http_upstream(mark: str, **env: str) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen([sys.executable, str(HOSTILE), mark, "--http", str(port)],
                              env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: port_open(port))
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.parametrize("events", [False, True], ids=["json", "events"])
def test_an_http_answer_of_nested_empty_arrays_is_refused_before_it_is_parsed(
        events: bool) -> None:
    words = ("SSE stream failed: " if events else "Failed to parse JSON response: ") + TOO_MANY
    with marked() as mark, http_upstream(mark) as url:
        report = hosted({"url": url, "calls": [["nested", {"mib": 12, "events": events}],
                                               ["echo", {"text": "after", "events": events}]]})
    refused, after = report["calls"]
    assert refused[:2] == ["too_large", words], refused
    assert refused[3] < 300 * 1024, f"the peak grew by {refused[3] // 1024} MiB"
    assert after[0] == "ok", after


@pytest.mark.parametrize("listing", [False, True], ids=["call", "listing"])
def test_a_quote_in_an_event_streams_other_lines_hides_none_of_its_data(listing: bool) -> None:
    """Every byte of an event stream was counted as JSON: with a comment ``:"`` (or ``event:
    "x``, ``id: "7``, ...) before the data, the count took the data for a string, and a call's
    4 MiB of nested arrays, or a listing's, was parsed whole (~500 MiB; 1.4 GB for 12 MiB)."""
    words = f"SSE stream failed: a message of more than {MAX_CALL_VALUES} JSON values"
    env = {"FRAMING": "1", **({"EVENTS": "1", "LISTING_MIB": "4"} if listing else {})}
    with marked() as mark, http_upstream(mark, **env) as url:
        report = hosted({"url": url, "calls": [] if listing else [
            ["nested", {"mib": 4, "events": True}], ["echo", {"text": "after", "events": True}]]})
    if listing:
        assert (report["state"], report["tools"]) == ("unreachable", 0), report
        assert report["problem"] == f"MCPError: {words}"
        assert report["start_growth_kib"] < 300 * 1024
    else:
        refused, after = report["calls"]
        assert refused[:2] == ["too_large", words], refused
        assert refused[3] < 300 * 1024, f"the peak grew by {refused[3] // 1024} MiB"
        assert after[0] == "ok", after


def test_an_http_listing_past_its_budget_is_refused_not_held() -> None:
    with marked() as mark, http_upstream(mark, LISTING_MIB="8") as url:
        report = hosted({"url": url})
    assert (report["state"], report["tools"]) == ("unreachable", 0), report
    assert report["problem"] == ("MCPError: Failed to parse JSON response: a message of more "
                                 f"than {LISTING.values} JSON values")
    assert report["start_growth_kib"] < 300 * 1024


@pytest.mark.parametrize("framing", [False, True], ids=["plain", "framing"])
def test_the_listing_of_an_honest_server_still_arrives(framing: bool) -> None:
    """What is fine: a listing, a call answer of 50,000 records (id last), over HTTP too; and
    so as events among lines the parser drops, in two data lines each."""
    env = {"EVENTS": "1", "FRAMING": "1"} if framing else {}
    with marked() as mark, http_upstream(mark, **env) as url:
        report = hosted({"url": url, "calls": [["wide", {"n": 50_000}],
                                               ["wide", {"n": 50_000, "events": True}]]})
    assert (report["state"], report["tools"]) == ("connected", 3), report
    assert [c[:2] for c in report["calls"]] == [["ok", "wide"], ["ok", "wide"]]


def test_the_stand_in_differs_from_a_schema_the_review_took() -> None:
    """So a registered tool whose schema grew past the bound is disabled as changed."""
    small = {"type": "object", "properties": {}, "additionalProperties": False}
    assert kept_schema(small) is small
    grown = {**small, "description": "x" * KEPT_SCHEMA_BYTES}
    assert kept_schema(grown) != grown
