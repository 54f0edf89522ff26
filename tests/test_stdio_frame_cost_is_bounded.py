"""What one stdio frame can cost ``toolhost serve`` is bounded by its JSON values, not only by its
bytes (D383's rule, for the frames the server reads). A review sent one ``tools/call`` line of
30 MiB, within the line bound then, whose arguments (or ``params._meta``) held 10M empty
objects: ~2.7 GB of peak memory and 10-45 s of the session's event loop, a ``ping`` behind it
answered after 93 s.

Real servers: ``toolhost serve`` subprocesses driven with raw frames on stdin, on both stdio
transports, their peak memory read from ``/proc``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types
from test_mcp_server import (  # noqa: F401 - the fixture, asked for by name
    PARSE_ERROR,
    Served,
    assert_no_traceback,
    finish,
    initialized,
    read_frames,
    served,
    write,
)

from toolhost._mcp.frames import MAX_FRAME_VALUES, holds_too_many_values, parse_frame

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="peak memory is read from /proc")

PING = {"jsonrpc": "2.0", "id": 9, "method": "ping"}


def _peak_mb(pid: int) -> float:
    """The process's peak resident memory so far (``VmHWM``), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = (row for row in status.splitlines() if row.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _call_holding(objects: int, where: str) -> bytes:
    """A ``tools/call`` line of math.calculate holding ``objects`` empty objects in a list, as
    an extra argument (which the schema refuses) or in ``params._meta``."""
    many = b"[" + b"{}," * (objects - 1) + b"{}]"
    if where == "arguments":
        params = b'{"name":"math.calculate","arguments":{"expression":"1","x":' + many + b"}}"
    else:
        params = b'{"name":"math.calculate","arguments":{"expression":"1"},"_meta":{"x":' \
            + many + b"}}"
    return b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + params + b"}"


@pytest.mark.parametrize(("stdio", "objects", "where"), [
    # 6 MiB: within the line's bytes, past its values.
    ("auto", 2_000_000, "arguments"), ("auto", 2_000_000, "_meta"),
    ("sdk", 2_000_000, "arguments"),
    # The review's line: 30 MiB, past the line's bytes now.
    ("auto", 10_000_000, "arguments"),
])
def test_a_frame_of_millions_of_values_is_refused_unparsed_and_the_session_reads_on(
        served: Served, stdio: str, objects: int, where: str) -> None:  # noqa: F811
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
    write(process, PING)
    read_frames(process, 1)
    before = _peak_mb(process.pid)
    started = time.monotonic()
    write(process, _call_holding(objects, where).decode(), PING)
    answers = read_frames(process, 2)
    took = time.monotonic() - started
    peak = _peak_mb(process.pid)
    # Loose bounds: parsed, the 6 MiB line alone took ~500 MB and over a second.
    assert peak - before < 120, (before, peak)
    assert took < 10, took
    # As docs/mcp.md's "Bad input" says: -32700, nothing of it run, and the server reads on.
    assert answers == [PARSE_ERROR, {"jsonrpc": "2.0", "id": 9, "result": {}}]
    code, _, err = finish(process)
    assert code == 0
    assert_no_traceback(err)
    assert served.rows() == []


def test_a_frame_within_the_values_is_read_as_before() -> None:
    arguments = {"expression": "1", "x": [0] * (MAX_FRAME_VALUES - 100)}
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "math.calculate", "arguments": arguments}})
    assert not holds_too_many_values(line)
    message = parse_frame(line)
    assert isinstance(message, types.JSONRPCRequest) and message.params is not None
    assert message.params["arguments"] == arguments


N = MAX_FRAME_VALUES


@pytest.mark.parametrize(("line", "too_many"), [
    ("[" + "0," * (N - 2) + "0]", False),  # N values exactly
    ("[" + "0," * N + "0]", True),
    # Brackets, braces, commas and colons inside a string open nothing, nor after an escaped
    # quote; after an escaped backslash the string has ended.
    ('["' + "[{,:" * N + '"]', False),
    ('["\\"' + "[" * N + '"]', False),
    ('["\\\\"' + "[" * N + "]", True),
    # Not JSON: a string never ended holds what follows, as a parser reads it (to its fault).
    ('["' + "[" * N, False),
])
def test_values_are_counted_outside_strings(line: str, too_many: bool) -> None:
    assert holds_too_many_values(line) is too_many
    assert holds_too_many_values(line.encode()) is too_many
