"""The gateway's stdio transport to an upstream MCP server: newline-delimited JSON-RPC over a
child's stdin and stdout, read in linear time and bounded.

The SDK's own ``stdio_client`` joins the whole unfinished line to every 64 KiB chunk it reads,
so one 50 MiB result cost ~19 s of copying on this machine (over a minute beside other work),
and it holds a line of any length a server cares to send. Here a line grows in one buffer
until its newline (``LineFramer``), and a line past ``max_line_bytes``, or past the JSON values
a call's answer may hold (``mcp_bounds``), is dropped as it comes. A whole line is then held to
the budget of what it is: the answer to a call, to a listing, or anything else (``_Requests``,
which knows what each request sent asked for). A refused line's request (its id, read from the
line's head or tail, matched as the SDK matches ids) fails ``too_large`` alone. A refused line
that names no id ends the connection, and the supervisor starts the server again. Once parsed,
a line must answer the request whose budget it was held to: the SDK routes an answer by the id
its parser kept (the last of duplicate "id" members, or one spelled with escapes), and a line
that answers another ends the connection too. A line with a "method" member is the server's own
request or notification, wherever its members sit: it answers nothing, whatever its id. The rest
follows the SDK's transport and the MCP lifecycle's shutdown: the server gets a session of
its own (process group), and leaving closes its stdin, waits, then terminates and kills the
group (D312).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.abc

from toolhost._adapters.mcp_bounds import (
    MAX_CALL_VALUES,
    Budget,
    ValueCount,
    budget_for,
    too_many_values_words,
)
from toolhost._model.errors import ToolhostError
from toolhost._model.upstream import too_long_words

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["TOO_LONG_CODE", "UNREADABLE", "Line", "LineFramer", "LineTooLong",
           "stdio_transport", "wire_bytes"]

#: The JSON-RPC error this transport answers in a server's stead when the server's answer to
#: a request was too long to read (a code of the implementation-defined range).
TOO_LONG_CODE = -32099
#: How the SDK's error for an answer it could not read begins (its HTTP transport's words, a
#: PARSE_ERROR): this transport answers a request whose answer it could not parse the same way.
UNREADABLE = "Failed to parse JSON response: "
#: How long a server has to exit on its own once its stdin closed, and then its process group
#: once sent SIGTERM, before SIGKILL (the SDK's figures).
_EXIT_GRACE_S = 2.0
#: How long already accepted messages have to reach the server's stdin at the end.
_FLUSH_S = 0.5
_POLL_S = 0.01
#: How often a live connection checks that its server is still running: a child that
#: inherited the server's stdout keeps the pipe open after the server died.
_ALIVE_EVERY_S = 0.5
#: One read of the server's stdout: large reads keep a big result to few wake-ups.
_READ_BYTES = 1 << 20
#: How much of a line's head (and tail) is kept to find its request id.
_HEAD_BYTES = 256
_ID = rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,128}")'
#: A response's id at the head of its line, as servers write it ("jsonrpc" first, or "id").
_ID_AT_HEAD = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?' + _ID)
#: A response's id at the end of its line, as the TypeScript SDK writes it (``result`` first,
#: then "jsonrpc" and "id"), or with "jsonrpc" after it.
_ID_AT_TAIL = re.compile(_ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
#: What tells a head's top-level members: a bracket, or a string and whether a colon follows
#: it (a member's name). A string the head cuts short matches nothing, and no quote after its
#: own can then be read as a name's.
_TOKEN = re.compile(rb'[{}\[\]]|"((?:[^"\\]|\\.)*)"(\s*:)?')
#: How many requests sent and not answered yet are remembered (a cancelled call's answer may
#: still come, or never).
_REMEMBERED = 4096


class LineTooLong(ToolhostError):
    """A server's line grew past the transport's bound before its newline came, or held more
    than its budget allows (``mcp_bounds``)."""

    def __init__(self, size: int, head: bytes = b"", *, values: bool = False,
                 request_id: int | str | None = None) -> None:
        super().__init__(too_many_values_words(size) if values else too_long_words(size))
        self.size = size
        self.head = head
        #: The id of the request the line answers, where its head (or tail) names one.
        self.request_id = request_id if request_id is not None else _request_id(head)


def _names_method(head: bytes) -> bool:
    """Whether a line's head has a top-level "method" member, wherever it sits among the
    others (JSON's members have no order): a request or a notification, which answers nothing
    whatever id it has (a server's request has an id of its own)."""
    depth = 0
    for token in _TOKEN.finditer(head):
        if token[1] is None:
            depth += 1 if token[0] in b"{[" else -1
        elif depth == 1 and token[2] and token[1] == b"method":
            return True
    return False


def _request_id(head: bytes, tail: bytes = b"") -> int | str | None:
    """The id of the request a line with this head (and tail) answers, if it names one."""
    if _names_method(head):
        return None
    found = _ID_AT_HEAD.match(head) or (_ID_AT_TAIL.search(tail) if tail else None)
    if found is None:
        return None
    value = json.loads(found.group(1))
    return _matched(value) if isinstance(value, int | str) else None


def _matched(request_id: int | str) -> int | str:
    """``request_id`` as the SDK matches an answer to its request ("7" answers 7)."""
    from mcp.shared.dispatcher import coerce_request_id

    return coerce_request_id(request_id)


def _is_request(message: SessionMessage) -> bool:
    """Whether a parsed line is the server's own request or a notification: no answer."""
    from mcp_types import JSONRPCNotification, JSONRPCRequest

    return isinstance(message.message, JSONRPCRequest | JSONRPCNotification)


def _answer_to(message: SessionMessage) -> int | str | None:
    """The request a parsed line answers, as the SDK routes it (None: it answers none)."""
    from mcp_types import JSONRPCError, JSONRPCResponse

    found = message.message
    if isinstance(found, JSONRPCResponse | JSONRPCError) and found.id is not None:
        return _matched(found.id)
    return None


class Line(bytearray):
    """A line as read, with the JSON values it can hold (``ValueCount``), counted before it
    is parsed, and the request it was taken to answer, by its head or tail (``_Requests``)."""

    values: int = 0
    answers: int | str | None = None
    #: What was asked of ``answers`` (the method), given back if the line turns out no answer.
    asked: str | None = None


class LineFramer:
    """Cuts a byte stream into lines. A line spanning reads grows in one buffer, each byte
    copied into it once, and is given as that buffer (no second copy of a large line). A line
    past ``max_line_bytes``, or one that can hold more than ``max_values`` JSON values, is given
    as ``LineTooLong`` as soon as it is, and the rest of it skipped; blank lines are skipped
    (JSON-RPC has none to give)."""

    def __init__(self, max_line_bytes: int, max_values: int = MAX_CALL_VALUES) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_values = max_values
        self._held: Line | None = None
        self._count = ValueCount()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[Line | LineTooLong]:
        """What ``chunk`` completes: lines, and a ``LineTooLong`` for each refused one."""
        found: list[Line | LineTooLong] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._take(chunk, start, end, found, ends=True)
            start = end + 1
        if start < len(chunk):
            self._take(chunk, start, len(chunk), found, ends=False)
        return found

    def _take(self, chunk: bytes, start: int, end: int, found: list[Line | LineTooLong], *,
              ends: bool) -> None:
        if self._skipping:
            self._skipping = not ends
            return
        held = self._held
        refused = None
        if (len(held) if held is not None else 0) + end - start > self.max_line_bytes:
            refused = LineTooLong(self.max_line_bytes, self._head(chunk, start))
        else:
            self._count.feed(chunk, start, end)
            if self._count.values > self.max_values:
                refused = LineTooLong(self.max_values, self._head(chunk, start), values=True)
        if refused is not None:
            found.append(refused)
            self._held, self._skipping, self._count = None, not ends, ValueCount()
            return
        piece = memoryview(chunk)[start:end]
        if held is None:
            held = Line(piece)
        else:
            held += piece
        if not ends:
            self._held = held
            return
        held.values, self._held, self._count = self._count.values, None, ValueCount()
        if held and not held.isspace():
            found.append(held)

    def _head(self, chunk: bytes, start: int) -> bytes:
        held = self._held
        return bytes(held[:_HEAD_BYTES]) if held else chunk[start:start + _HEAD_BYTES]


class _Requests:
    """The requests sent to a server and not answered yet, by id, each with what was asked:
    what a line answering it may bring (``mcp_bounds.budget_for``). Also what the pages of the
    listing under way brought so far: a listing is held to its budget as a whole."""

    def __init__(self, call: Budget) -> None:
        self.call = call
        self._asked: dict[int | str, str] = {}
        self._listed_bytes = 0
        self._listed_values = 0

    def sent(self, message: Any) -> None:
        """``message`` went to the server; a request is remembered until its answer comes."""
        method, request_id = getattr(message, "method", None), getattr(message, "id", None)
        if not isinstance(method, str) or not isinstance(request_id, int | str):
            return
        if method == "tools/list" and not (getattr(message, "params", None) or {}).get("cursor"):
            self._listed_bytes = self._listed_values = 0  # a new listing, from its first page
        while len(self._asked) >= _REMEMBERED:
            del self._asked[next(iter(self._asked))]
        self._asked[_matched(request_id)] = method

    def answered(self, request_id: int | str | None) -> str | None:
        """What was asked of ``request_id``, forgotten now that a line answers it."""
        return self._asked.pop(request_id, None) if request_id is not None else None

    def admit(self, line: Line) -> Line | LineTooLong:
        """``line`` if it is within the budget of what its head or tail says it answers (then
        ``line.answers``), else why it is refused. Before it is parsed."""
        request_id = _request_id(bytes(line[:_HEAD_BYTES]), bytes(line[-_HEAD_BYTES:]))
        method = self.answered(request_id)
        if (refused := self._over(line, method, request_id)) is not None:
            return refused
        line.answers, line.asked = (request_id, method) if method is not None else (None, None)
        return line

    def settle(self, line: Line, message: SessionMessage | ValueError
               ) -> SessionMessage | ValueError | LineTooLong | None:
        """``message``, parsed of the admitted ``line``, if it answers what ``admit`` held it
        to; why it is refused if it answers a request whose budget it is past; None if it
        answers another request than its head or tail said (a duplicate or escaped "id": it
        was held to another's budget, and that request was forgotten): refused, and the
        connection ends. A line whose id neither its head nor its tail shows was held to the
        least budget, and is counted now with its listing, if it is a page of one. A request
        or notification whose "method" came past its head is no answer: what it was taken to
        answer is given back, and it is held to the least budget."""
        if isinstance(message, ValueError):
            return message  # routed nowhere: the session is told it could not be read
        if _is_request(message):
            if line.answers is not None:
                self._give_back(line)
            refused = self._over(line, None, None)
            if refused is not None:
                refused.request_id = None  # the id its head shows is its own: no call fails
            return refused or message
        answered = _answer_to(message)
        if line.answers is not None:
            return message if answered == line.answers else None
        method = self.answered(answered)
        return self._over(line, method, answered) or message

    def _give_back(self, line: Line) -> None:
        """Undo ``admit``'s taking ``line`` for the answer its head or tail named."""
        assert line.answers is not None and line.asked is not None
        self._asked[line.answers] = line.asked
        if line.asked == "tools/list":
            self._listed_bytes -= len(line)
            self._listed_values -= line.values
        line.answers = line.asked = None

    def _over(self, line: Line, method: str | None,
              request_id: int | str | None) -> LineTooLong | None:
        """Why ``line``, answering ``request_id`` (asked ``method``), is past its budget, if it
        is; else it counts with its listing, if it is a page of one."""
        budget = budget_for(method, self.call)
        size, values = len(line), line.values
        if method == "tools/list":
            size, values = size + self._listed_bytes, values + self._listed_values
        head = bytes(line[:_HEAD_BYTES])
        if size > budget.bytes:
            return LineTooLong(budget.bytes, head, request_id=request_id)
        if values > budget.values:
            return LineTooLong(budget.values, head, values=True, request_id=request_id)
        if method == "tools/list":
            self._listed_bytes, self._listed_values = size, values
        return None


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The parse of a large message makes up to a million objects, which the cyclic collector
    walked again and again (0.6 s instead of 0.16 s for a million empty arrays, GIL held).
    Nothing runs beside the parse (it holds the GIL), and it makes no cycles."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def message_of(line: bytes | bytearray) -> SessionMessage | ValueError:
    """A line as the SDK's message (``SessionMessage``), or why it is not one (the session
    surfaces it, as with the SDK's transport). Parsed by pydantic-core's JSON parser into Python
    objects, then validated: the same parser as the SDK's ``validate_json``, at a quarter of the
    memory and time, since that builds pydantic's own tree of every value first."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter
    from pydantic_core import from_json

    try:
        with _no_cycle_collection():
            parsed = from_json(line)
        return SessionMessage(jsonrpc_message_adapter.validate_python(parsed, by_name=False))
    except ValueError as exc:
        return exc


def _in_stead(request_id: int | str, code: int, why: str) -> SessionMessage:
    """The JSON-RPC error this transport answers ``request_id`` with in the server's stead,
    when the server's own answer could not be taken (too long, or not readable)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id,
                                       error=ErrorData(code=code, message=why)))


def wire_bytes(message: Any) -> bytes:
    """A JSON-RPC message (the SDK's model) as a line of UTF-8 JSON. A lone surrogate (what
    JSON's ``"\\ud800"`` decodes to) has no UTF-8, so the SDK's serializer refuses it: the
    message is then written with every non-ASCII character escaped, the same JSON value."""
    try:
        text: str = message.model_dump_json(by_alias=True, exclude_unset=True)
        return text.encode() + b"\n"
    except ValueError:
        return json.dumps(message.model_dump(mode="json", by_alias=True, exclude_unset=True),
                          separators=(",", ":")).encode() + b"\n"


def with_parent_death(argv: list[str], path: str | None) -> list[str]:
    """``argv`` run under util-linux's ``setpriv --pdeathsig KILL`` where there is one that
    takes it: the server, in a session of its own, is killed when the host dies, whatever
    ends it (SIGKILL, the OOM killer); a server that ignores its stdin's end outlived such a
    host (D335). Otherwise ``argv`` as it is (a host that exits in any other way stops its
    servers), and so for a command not found on the server's ``path``: starting it fails
    with its own name, not as setpriv's exit."""
    setpriv = _setpriv()
    if setpriv is None or shutil.which(argv[0], path=path) is None:
        return argv
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]


@functools.cache
def _setpriv() -> str | None:
    """setpriv's path, when it has ``--pdeathsig`` (util-linux 2.33 and later)."""
    found = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if found is None:
        return None
    try:
        shown = subprocess.run([found, "--help"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if b"--pdeathsig" in shown.stdout else None


@contextlib.asynccontextmanager
async def stdio_transport(command: str, args: Sequence[str], env: Mapping[str, str], *,
                          errlog: IO[str], max_line_bytes: int,
                          too_long: Callable[[LineTooLong], None],
                          ended: Callable[[], None] = lambda: None) -> AsyncIterator[Any]:
    """Start ``command`` and yield the SDK's transport streams to it. ``too_long`` is told of
    each line refused, past ``max_line_bytes`` or past its budget (``mcp_bounds``), before the
    connection ends, when it does. ``ended`` is told when the session's end of the stream is
    closed (the server exited, closed its stdout, or cannot be written to): nothing sent from
    then on is answered, and a caller told so need not send it."""
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage
    from mcp_types import PARSE_ERROR

    # The SDK's small default environment (PATH, HOME, ...) plus the server's own: never the
    # host's, so no TOOLHOST_* setting or other credential reaches it.
    environment = get_default_environment() | dict(env)
    process = await anyio.open_process(with_parent_death([command, *args],
                                                         environment.get("PATH")),
                                       env=environment, stderr=errlog, start_new_session=True)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    reader_done = anyio.Event()
    requests = _Requests(Budget(max_line_bytes, MAX_CALL_VALUES))

    async def read_messages() -> None:
        assert process.stdout is not None
        framer = LineFramer(max_line_bytes, requests.call.values)
        async with read_writer:
            try:
                while True:
                    for found in framer.feed(await process.stdout.receive(_READ_BYTES)):
                        if isinstance(found, LineTooLong):
                            requests.answered(found.request_id)
                            refused = found
                        elif isinstance(admitted := requests.admit(found), LineTooLong):
                            refused = admitted
                        else:
                            message = requests.settle(admitted, message_of(admitted))
                            if message is None:
                                return  # it answers another request than it said: it ends
                            if isinstance(message, ValueError) and admitted.answers is not None:
                                # Its head named the request: that request fails now, with the
                                # parser's words, rather than waiting out its deadline.
                                await read_writer.send(_in_stead(
                                    admitted.answers, PARSE_ERROR, f"{UNREADABLE}{message}"))
                                continue
                            if not isinstance(message, LineTooLong):
                                await read_writer.send(message)
                                continue
                            refused = message
                        too_long(refused)
                        if (request_id := refused.request_id) is None:
                            return  # whose answer it was is unknown: the connection ends
                        # The server's answer is dropped; its request fails in its stead.
                        await read_writer.send(_in_stead(request_id, TOO_LONG_CODE, str(refused)))
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                    OSError):
                pass  # the server ended, or the session did: the session sees the end
            finally:
                reader_done.set()
                ended()
                # A server blocked writing its stdout cannot read its stdin's end: drain.
                tasks.start_soon(_drain, process)

    async def write_messages() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    # Remembered before it is written: its answer may come at once.
                    requests.sent(session_message.message)
                    await process.stdin.send(wire_bytes(session_message.message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server cannot hear us: the session must know
            ended()
        finally:
            writer_done.set()

    async def watch_alive() -> None:
        # A server that died while a child of its holds its stdout open never sends the end
        # of the stream: without this its calls would wait out their deadlines. What it
        # wrote before it ended is read first (the end of the stream comes then, as a rule).
        while process.returncode is None:
            await anyio.sleep(_ALIVE_EVERY_S)
        with anyio.move_on_after(_EXIT_GRACE_S):
            await reader_done.wait()
        await read_writer.aclose()
        ended()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_messages)
        tasks.start_soon(write_messages)
        tasks.start_soon(watch_alive)
        try:
            yield read_stream, write_stream
        finally:
            # Shielded and bounded throughout: a cancelled caller neither leaks a live server
            # nor waits on one.
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH_S):
                    await writer_done.wait()
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _drain(process: anyio.abc.Process) -> None:
    assert process.stdout is not None
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                             anyio.BrokenResourceError, OSError):
        while True:
            await process.stdout.receive(_READ_BYTES)


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin and wait for the server; if it stays, SIGTERM its process group and wait
    for the whole group; SIGKILL what is left. A plain ``task.cancel()`` reaches through
    anyio's shield: cancelled anywhere in here, the group is killed at once."""
    assert process.stdin is not None and process.stdout is not None
    try:
        with contextlib.suppress(OSError, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError):
            await process.stdin.aclose()
        if not await _gone(process, _EXIT_GRACE_S, group=False):
            _signal_group(process, signal.SIGTERM)
            if not await _gone(process, _EXIT_GRACE_S, group=True):
                _signal_group(process, signal.SIGKILL)
                await _gone(process, _EXIT_GRACE_S, group=False)
    except BaseException:
        _signal_group(process, signal.SIGKILL)
        # The cancel was delivered once; waiting for the kill to be seen lets the process be
        # reaped here rather than warned about (a ResourceWarning) when it is collected.
        await _gone(process, _EXIT_GRACE_S, group=False)
        raise
    finally:
        # Not process.wait(): it also waits for the pipes' end, which a child of the server
        # that inherited them may hold. Closing our ends and the transport is what is left.
        with contextlib.suppress(OSError, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError):
            await process.stdout.aclose()
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        with contextlib.suppress(PermissionError, AttributeError):
            transport.close()  # type: ignore[union-attr]


def _signal_group(process: anyio.abc.Process, sent: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sent)


async def _gone(process: anyio.abc.Process, within_s: float, *, group: bool) -> bool:
    """Whether the server (and with ``group``, every process of its group) ended in time."""
    deadline = anyio.current_time() + within_s
    while True:
        if process.returncode is not None and not (group and _group_lives(process)):
            return True
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL_S)


def _group_lives(process: anyio.abc.Process) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, only not ours to signal
    return True
