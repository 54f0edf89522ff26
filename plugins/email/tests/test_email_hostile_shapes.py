"""Hostile shapes the fast reading (``split``) must survive as the parser does.

- A header section holding one long line that is no field: read in one pass (``findall``
  retried the field-name class at every position: a 40,000-character line took 25 s, a mail
  of a few hundred kilobytes minutes).
- Deep nesting: the parser's only bound was Python's recursion limit, met at a depth that
  depends on the caller's stack (the importing process and a worker differ), so one crafted
  message could be stored in one run and skipped in the next. ``MAX_NESTING`` makes the
  outcome depend on the message alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from toolhost_email.parse import Malformed, parse_message

_PROBE = textwrap.dedent("""
    from toolhost_email.parse import parse_message
    # A header section (it ends at the blank line) with one line that is no field: the parser
    # reads it as a missing header/body separator; any mail of that shape with a long
    # unwrapped base64 or URL line does the same.
    raw = b"Subject: x\\n" + b"a" * 200_000 + b"\\n\\nbody\\n"
    parse_message("owner@example.com", raw)
""")


def test_a_long_line_that_is_no_field_is_read_in_linear_time() -> None:
    # In a child: the regular expression engine cannot be interrupted from Python.
    try:
        subprocess.run([sys.executable, "-c", _PROBE], check=True, timeout=15)
    except subprocess.TimeoutExpired as exc:  # about 10 minutes with findall
        raise AssertionError("parse_message took over 15 s on a 200 kB message") from exc



def _nested(depth: int) -> bytes:
    inner = b"Content-Type: text/plain\n\ndeep\n"
    for i in range(depth):
        b = b"b%d" % i
        inner = (b"Content-Type: multipart/mixed; boundary=" + b + b"\n\n--" + b + b"\n"
                 + inner + b"\n--" + b + b"--\n")
    return (b"From: a@example.org\nSubject: s\nContent-Type: multipart/mixed; boundary=top\n\n"
            b"--top\nContent-Type: text/plain\n\nvisible\n--top\nContent-Type: message/rfc822\n\n"
            b"Subject: inner\n" + inner + b"\n--top--\n")


def _outcome_at(extra_frames: int, raw: bytes) -> str:
    if extra_frames:
        return _outcome_at(extra_frames - 1, raw)
    parsed = parse_message("owner@example.com", raw)
    return parsed.reason if isinstance(parsed, Malformed) else "stored"


def test_a_nested_message_is_read_the_same_at_any_call_depth() -> None:
    differs = [depth for depth in range(500, 1250, 50)
               if _outcome_at(0, raw := _nested(depth)) != _outcome_at(150, raw)]
    assert not differs, f"stored at one call depth, skipped at another: nesting {differs}"


def test_a_message_nested_past_the_bound_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # split read the enclosed message, found it too deep and left the whole message to the
    # parser, which read every level again: twice the cost of a hostile nesting (quadratic).
    from toolhost_email import parse

    read: list[bytes] = []
    parsebytes = parse._PARSER.parsebytes
    monkeypatch.setattr(parse._PARSER, "parsebytes", lambda raw: read.append(raw)
                        or parsebytes(raw))  # parse_message swallows what a spy raises
    for depth in (300, 1_100):  # the second past Python's recursion limit
        assert _outcome_at(0, _nested(depth)) == "undecodable"
    assert read == [], "the parser read again a message split had refused"


def test_nesting_past_the_bound_is_undecodable_and_within_it_is_stored() -> None:
    from toolhost_email.split import MAX_NESTING

    # The enclosing multipart, the message/rfc822 part and its own levels: _nested(d) is
    # d + 3 levels deep, so MAX_NESTING - 3 is exactly the bound (split refused it: its
    # count took the message/rfc822 part twice).
    assert _outcome_at(0, _nested(MAX_NESTING - 3)) == "stored"
    assert _outcome_at(0, _nested(MAX_NESTING - 2)) == "undecodable"
    assert _outcome_at(0, _nested(MAX_NESTING + 5)) == "undecodable"


def test_split_leaves_a_deep_multipart_to_the_parser_well_before_the_bound() -> None:
    # split refuses a nesting past MAX_NESTING itself, counting the levels of an enclosed
    # message as the parser does; that holds while it never builds a multipart tree as deep
    # as the bound (it leaves deeper ones to the parser, which counts them itself).
    from toolhost_email.split import _MAX_DEPTH, MAX_NESTING

    assert _MAX_DEPTH + 1 < MAX_NESTING


def test_a_long_from_line_is_skipped_a_block_at_a_time() -> None:
    # A readline() held the whole envelope line however long (40 MiB for a 15-byte message).
    import io

    from toolhost_email import mbox

    class Reads(io.BytesIO):
        largest = 0

        def read(self, size: int | None = -1) -> bytes:
            data = super().read(size)
            Reads.largest = max(Reads.largest, len(data))
            return data

        def readline(self, size: int | None = -1) -> bytes:
            raise AssertionError("a line read whole")

    envelope = b"From " + b"x" * (3 * (1 << 20)) + b"\n"
    file = Reads(envelope + b"Subject: s\n\nbody\n")
    assert list(mbox.messages(file, limit=1000)) == [b"Subject: s\n\nbody\n"]
    assert Reads.largest <= 1 << 20
