"""What one message of an upstream MCP server's may cost the host once it is parsed.

D312 and D313 bound a message's bytes as they arrive. Parsing JSON then makes Python objects
of them, and the parse holds the GIL from start to end. ``[],`` is 3 bytes of JSON and about 80
bytes once parsed (about 340 through pydantic's own JSON parse). So a 12 MiB answer of nested
empty arrays took 1.4 GB, and it froze every thread of the host for 6 s. The values a message can
hold are therefore counted as its bytes arrive (``ValueCount``). A message past its budget is
refused before it is parsed, as one past its bytes is.

A message's budget depends on who sends it when, and on how long it is kept:

- an answer to ``tools/call`` comes once for each call the host makes (``call_budget``);
- a listing comes whenever the server says its tools changed, and is kept for the life of the
  connection (``LISTING``, for all the pages of one listing);
- anything else comes whenever the server likes: a notification, the answer to a ping or to the
  handshake, a request of the server's (``OTHER``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

from toolhost._model.upstream import TOO_LONG_WORDS

__all__ = ["ENCODED_WORDS", "LISTING", "MAX_CALL_VALUES", "OTHER", "Budget", "Spending",
           "ValueCount", "budget_for", "encoded_words", "event_ends", "too_many_values_words"]


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


#: A blank line of an event stream, as the SSE parser reads line ends (CRLF, LF or CR): where an
#: event ends. Never seen where the parser sees none, so an event is never counted in parts.
_BLANK_LINE = re.compile(rb"\n\n|\r\r|\n\r|\r\n[\r\n]")


def event_ends(carried: bytes, chunk: bytes) -> Iterator[int]:
    """Where in ``chunk`` the events of an event stream end, ``carried`` being the last two
    bytes that came before it (a blank line is three bytes at most)."""
    resume = 0
    for found in _BLANK_LINE.finditer(carried + chunk[:2]):
        if found.end() > len(carried):
            resume = found.end() - len(carried)
            yield resume
    for found in _BLANK_LINE.finditer(chunk, resume):
        yield found.end()
