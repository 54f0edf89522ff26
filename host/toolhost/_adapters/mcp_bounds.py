"""What one message of an upstream MCP server's may cost the host once it is parsed.

D312 and D313 bound a message's bytes as they arrive. Parsing JSON then makes Python objects
of them, and the parse holds the GIL from start to end. ``[],`` is 3 bytes of JSON and about 80
bytes once parsed (about 340 through pydantic's own JSON parse). So a 12 MiB answer of nested
empty arrays took 1.4 GB, and it froze every thread of the host for 6 s. The values a message can
hold are therefore counted as its bytes arrive (``ValueCount``; of an event stream, only what
its parser hands on to be parsed, ``EventValues``). A message past its budget is refused before
it is parsed, as one past its bytes is.

A message's budget depends on who sends it when, and on how long it is kept:

- an answer to ``tools/call`` comes once for each call the host makes (``call_budget``);
- a listing comes whenever the server says its tools changed, and is kept for the life of the
  connection (``LISTING``, for all the pages of one listing);
- anything else comes whenever the server likes: a notification, the answer to a ping or to the
  handshake, a request of the server's (``OTHER``).
"""

from __future__ import annotations

import re

import attrs

from toolhost._model.upstream import TOO_LONG_WORDS

__all__ = ["ENCODED_WORDS", "LISTING", "MAX_CALL_VALUES", "OTHER", "Budget", "EventValues",
           "Spending", "ValueCount", "budget_for", "encoded_words", "too_many_values_words"]


@attrs.frozen
class Budget:
    """The most one message (or one listing, all its pages) may bring."""

    bytes: int
    values: int


#: The JSON values of an answer to ``tools/call``. The gateway keeps up to ~8 MiB of structured
#: content (``KEPT_TEXT``), and records run about 6 bytes a value, so about 6 MiB of them fit
#: here. Text blocks are one value each, whatever their length. Parsed, this many values cost
#: at most ~80 MiB and ~0.2 s here through the stdio transport, about 4x that through the SDK's
#: HTTP client.
MAX_CALL_VALUES = 1 << 20
#: All the pages of one listing. The gateway registers at most 256 tools of a server, and the
#: review takes input schemas of at most 64 KiB (D281): 16 MiB. Schemas run about one value for
#: every 10 to 20 bytes, so 16 MiB is about a million values.
LISTING = Budget(bytes=16 << 20, values=1 << 20)
#: Every other message. What an honest server sends unasked is a notification (progress,
#: list_changed, a log line) or a short answer (a ping's, the handshake's with its instructions):
#: a few KiB.
OTHER = Budget(bytes=4 << 20, values=1 << 16)


def budget_for(method: str | None, call: Budget) -> Budget:
    """What an answer to a request of ``method`` may bring (None: not an answer we expect).
    ``call`` is the transport's own bound for a call's answer, which none exceeds."""
    chosen = call if method == "tools/call" else LISTING if method == "tools/list" else OTHER
    return Budget(min(chosen.bytes, call.bytes), min(chosen.values, call.values))


def too_many_values_words(limit: int) -> str:
    """How a message past its values is refused. It begins as one past its bytes does
    (``TOO_LONG_WORDS``): the adapter tells either as ``too_large``."""
    return f"{TOO_LONG_WORDS}{limit} JSON values"


#: How an answer that came encoded though it was asked for unencoded is refused: the bounds
#: count what arrives, which is not what is parsed then (the adapter tells it by these words).
ENCODED_WORDS = "an answer encoded "


def encoded_words(encoding: str) -> str:
    return f"{ENCODED_WORDS}{encoding!r}, which was not asked for"


#: Where each JSON value begins. Outside strings, every value but the message's first comes
#: right after one of these, and each of them comes before one value at most.
_OPENERS = (b"[", b"{", b",", b":")


class ValueCount:
    """The JSON values in a message's bytes so far, less one, fed in pieces as they arrive.

    A bracket, brace, comma or colon inside a string opens no value, so strings are followed. A
    backslash pair stands for one character, and a backslash before a quote stands for a quote,
    so neither ends a string. Bytes are ASCII here, so UTF-8 never hides a quote or a backslash.
    JSON allows a backslash only inside a string: after one outside a string the count may be
    off, but a parser stops at that byte, having made only what was counted before it. So
    the count bounds whatever a parser makes of the message, valid or not.
    """

    __slots__ = ("_escaped", "_in_string", "values")

    def __init__(self) -> None:
        self.values = 0
        self._in_string = False
        #: The last piece ended, inside a string, on a backslash that escapes the next byte.
        self._escaped = False

    def feed(self, data: bytes | bytearray, start: int = 0, end: int | None = None) -> None:
        """Count ``data[start:end]``, the next bytes of the message."""
        end = len(data) if end is None else end
        if start >= end:
            return
        if not self._escaped and data.find(b'"', start, end) < 0 \
                and data.find(b"\\", start, end) < 0:
            # No string begins or ends here: the whole piece is inside one, or outside all.
            if not self._in_string:
                self.values += sum(data.count(c, start, end) for c in _OPENERS)
            return
        piece = bytes(data[start:end])
        if self._escaped:
            piece, self._escaped = piece[1:], False
        if b"\\" in piece:
            piece = piece.replace(b"\\\\", b"")
            if piece.endswith(b"\\"):
                piece, self._escaped = piece[:-1], True
            piece = piece.replace(b'\\"', b"")
        parts = piece.split(b'"')
        outside = b"".join(parts[1 if self._in_string else 0::2])
        self.values += sum(outside.count(c) for c in _OPENERS)
        if len(parts) % 2 == 0:  # an odd number of quotes
            self._in_string = not self._in_string


@attrs.define
class Spending:
    """What a message brought so far against its budget, and what earlier messages it is
    counted with brought (the pages of one listing)."""

    budget: Budget
    earlier_bytes: int = 0
    earlier_values: int = 0
    size: int = 0
    count: ValueCount = attrs.field(factory=ValueCount)

    def feed(self, data: bytes | bytearray, start: int = 0, end: int | None = None) -> None:
        end = len(data) if end is None else end
        self.size += end - start
        if self.size + self.earlier_bytes <= self.budget.bytes:
            self.count.feed(data, start, end)

    def measure(self, size: int) -> None:
        """``size`` more bytes, none of them counted for values (an event stream's lines)."""
        self.size += size

    def refusal(self) -> str | None:
        """Why the message is refused, if it is past its budget."""
        if self.size + self.earlier_bytes > self.budget.bytes:
            return f"{TOO_LONG_WORDS}{self.budget.bytes} bytes"
        if self.count.values + self.earlier_values > self.budget.values:
            return too_many_values_words(self.budget.values)
        return None

    def carry(self) -> None:
        """The message ended and the next is counted with it (the next page of a listing)."""
        self.earlier_bytes += self.size
        self.earlier_values += self.count.values
        self.size, self.count = 0, ValueCount()

    def restart(self) -> None:
        """The message ended and the next is counted alone (the next event of a stream)."""
        self.size, self.count = 0, ValueCount()


#: Where a line of an event stream ends: CR, LF or CRLF, as its parser reads line ends.
_LINE_END = re.compile(rb"[\r\n]")
#: The field whose values are an event's data: the one line a parser hands on to be parsed.
#: (The SSE spec strips a byte order mark first in the stream; httpx2's parser does not, and
#: drops the line it begins: so is it here.)
_DATA = b"data"
#: Where in its line the stream is: at its start, in a field's name, in a data line's value,
#: in a line the parser drops.
_START, _NAME, _VALUE, _DROPPED = range(4)
#: The most of a chunk counted at once (less if the budget's bytes are fewer): an event that
#: begins and ends within one is within the budget's bytes.
_PIECE = 1 << 16
#: Blank lines one after another: the events between them hold nothing.
_BLANKS = re.compile(rb"\n\n\n+")
#: Whole lines, LF-ended, each looked at with the LF before it: a blank line is marked (made a
#: line holding a CR, which no line holds once its CRs are LFs), every other line but a data
#: line dropped, and a data line made an LF and its value. (Replaced by plain bytes: a
#: template with groups costs a Python call for each line.)
_BLANK = re.compile(rb"\n(?=\n)")
_OTHER = re.compile(rb"\n(?!\r|data[:\n])[^\n]+")
_NO_VALUE = re.compile(rb"\ndata(?=\n)")
#: Every byte but the openers and the CR that ends an event once its lines are kept.
_NOT_OPENERS = bytes(sorted(set(range(256)) - set(b"[{,:\r")))


class EventValues:
    """The JSON values of each event of an event stream, fed in pieces as they arrive, into
    ``spending`` (``together``: all the events as one message; else each alone).

    The SSE parser cuts the stream into lines at CR, LF or CRLF. A blank line ends an event. A
    line is split at its first colon into a field and a value; a ``data`` line's value is added
    to the event's data (after an LF when it has some), and every other line is dropped: a
    comment (``:...``), ``event``, ``id``, ``retry``, an unknown field. The data alone is
    parsed as JSON, so it alone is counted, its strings followed across its lines and never
    past its event: a quote in a dropped line turned every count after it off. An LF holds no
    value (it only ends an escape), so one before each value, the first too, counts the same,
    and so does the one space a parser strips after the colon. Every line of an event, dropped
    ones included, counts towards its bytes, its end as one byte.

    A line that spans pieces is followed a piece at a time (``_line``); the whole lines within
    a piece are counted together, with bytes operations (``_lines``): the parser's own work is
    a few operations a line, and so is this.
    """

    __slots__ = ("_after_cr", "_name", "_state", "spending", "together")

    def __init__(self, spending: Spending, *, together: bool) -> None:
        self.spending = spending
        self.together = together
        self._state = _START
        #: The field's name so far, while it may still be ``data`` (a few bytes at most).
        self._name = b""
        #: The last piece ended on a CR: an LF first in the next ends no other line.
        self._after_cr = False

    def feed(self, chunk: bytes) -> str | None:
        """Count ``chunk``, the stream's next bytes; why the event under way is refused, if it
        is past its budget (the events ``chunk`` ended before were within theirs)."""
        step = max(1, min(_PIECE, self.spending.budget.bytes))
        for start in range(0, len(chunk), step):
            if (why := self._piece(chunk[start:start + step])) is not None:
                return why
        return None

    def _piece(self, piece: bytes) -> str | None:
        start, size = 0, len(piece)
        if self._after_cr and piece[:1] == b"\n":
            start = 1  # the LF of a CRLF, counted with its CR
        self._after_cr = False
        first = _LINE_END.search(piece, start)
        if first is None:
            if start < size:
                self._line(piece, start, size)
            self.spending.measure(size - start)
            return self.spending.refusal()
        stop = first.start()
        if start < stop:
            self._line(piece, start, stop)
        self.spending.measure(stop - start + 1)
        start = self._past(piece, stop)
        if self._line_ends() and (why := self._event_ends()) is not None:
            return why
        last = max(piece.rfind(b"\n"), piece.rfind(b"\r"))
        if last >= start:  # whole lines after the first: counted together
            end = self._past(piece, last)
            if (why := self._lines(piece[start:end])) is not None:
                return why
            start = end
        if start < size:
            self._line(piece, start, size)
            self.spending.measure(size - start)
        return self.spending.refusal()

    def _past(self, piece: bytes, end: int) -> int:
        """Where the line end at ``end`` (a CR or an LF) ends."""
        if piece[end] != 0x0D:
            return end + 1
        if end + 1 == len(piece):
            self._after_cr = True  # a CRLF's LF may come first in the next piece
            return end + 1
        return end + 2 if piece[end + 1] == 0x0A else end + 1

    def _line(self, piece: bytes, start: int, stop: int) -> None:
        """The next bytes of the line under way, ``piece[start:stop]`` (no line end)."""
        state = self._state
        if state == _START:
            state = _DROPPED if piece[start] == 0x3A else _NAME  # a colon first: a comment
        if state == _NAME:
            colon = piece.find(b":", start, stop)
            name = self._name + piece[start:min(stop if colon < 0 else colon, start + 8)]
            if not _DATA.startswith(name):
                state = _DROPPED
            elif colon < 0:
                self._name = name
            elif name == _DATA:
                self._data_begins()
                state, start = _VALUE, colon + 1
            else:
                state = _DROPPED
        self._state = state
        if state == _VALUE:
            self.spending.count.feed(piece, start, stop)

    def _line_ends(self) -> bool:
        """The line under way ended: whether it was blank."""
        state, name = self._state, self._name
        self._state, self._name = _START, b""
        if state == _NAME and name == _DATA:  # ``data`` with no colon: no value
            self._data_begins()
        return state == _START

    def _data_begins(self) -> None:
        self.spending.count.feed(b"\n")  # the LF the parser puts between two values

    def _event_ends(self) -> str | None:
        if (why := self.spending.refusal()) is not None:
            return why
        if self.together:
            self.spending.carry()
        else:
            self.spending.restart()
        return None

    def _lines(self, lines: bytes) -> str | None:
        """Count ``lines``, whole lines each with its end, the first at a line's start."""
        if b"\r" in lines:
            lines = lines.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        after = b"\n" + lines
        kept = _OTHER.sub(b"", _BLANK.sub(b"\n\r", _BLANKS.sub(b"\n\n", after)))
        kept = _NO_VALUE.sub(b"\n", kept).replace(b"\ndata:", b"\n")
        events = kept.split(b"\n\r")  # each event's data, an LF before each value
        self.spending.count.feed(events[0])  # the end of the event under way
        if len(events) == 1:
            self.spending.measure(len(lines))
            return None
        first, last = after.find(b"\n\n") + 1, after.rfind(b"\n\n") + 1
        self.spending.measure(first)
        if (why := self._event_ends()) is not None:
            return why
        if self.together:
            self.spending.measure(last - first)
        # The events within: each holds at most its openers, so one with fewer than its budget
        # allows is within it, and one with none adds nothing to a listing.
        opened = list(map(len, kept.translate(None, _NOT_OPENERS).split(b"\r")))[1:-1]
        least = 0 if self.together else self.spending.budget.values
        if max(opened, default=0) > least:
            for data, most in zip(events[1:-1], opened, strict=True):
                if most > least:
                    self.spending.count.feed(data)
                    if (why := self._event_ends()) is not None:
                        return why
        self.spending.count.feed(events[-1])  # the event now under way
        self.spending.measure(len(lines) - last)
        return None
