"""A file is published only when its stream ended whole (D149), so the provider's answer must
mark its own end: a Content-Length or chunked framing. A body that ends only when the
connection closes cannot tell a finished file from a provider that died halfway (Python's ssl
reads a TLS close without close_notify as a clean end), so it is refused, invalid_response,
before a byte is stored. A framed answer cut short is a lost connection, and stores nothing.

Regression (adversarial review of toolhost-media, finding 1): a provider dying mid-body had
the truncated image or video published as whole, attached, and the call ``succeeded``.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from media_support import MP4, PNG, FakeTensorScale, Handler, Reply, call, no_download_left
from toolhost.testing import Harness, Run
from toolhost_media import messages

#: What the provider meant to send after the signature, and how much of the file it sends.
TAIL = b"\x11" * 200_000
SENT = 5000

MEDIA = [("image.generate", PNG + TAIL, "image/png"), ("video.generate", MP4 + TAIL, "video/mp4")]


def dies(h: Handler) -> None:
    """The provider's process dies: its kernel closes the socket (a FIN, no TLS close_notify)."""
    # The client may have gone first (ENOTCONN): the duplicate is closed all the same, or its
    # collection warns from the server's thread and fails whichever test runs then.
    with socket.socket(fileno=os.dup(h.connection.fileno())) as raw, \
            contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)


def ends(h: Handler) -> None:
    """The provider is done: the handler returns and the server closes the connection."""


def unframed(whole: bytes, content_type: str, then: Callable[[Handler], None],
             *, sent: int) -> Reply:
    """A 200 with neither Content-Length nor chunked framing: its body ends with the
    connection. ``sent`` bytes of ``whole`` go out, then ``then``."""
    def reply(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Connection", "close")
        h.end_headers()
        h.stream(iter([whole[:sent]]))
        then(h)
    return reply


def cut_short(whole: bytes, content_type: str, *, chunked: bool) -> Reply:
    """A framed 200 (the whole file's Content-Length, or chunks) whose provider dies after
    ``SENT`` bytes."""
    def reply(h: Handler) -> None:
        h.head(200, content_type, None if chunked else len(whole))
        h.stream(iter([whole[:SENT]]), last=False)
        dies(h)
    return reply


def nothing_stored(host: Harness, data_dir: Path, run: Run, sent: bytes) -> None:
    """No attachment, no staged upload left, and no file holding any of the provider's body."""
    assert host.host.attachments(run) == ()
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert [p for p in files if p.suffix == ".upload"] == []
    assert [p for p in files if sent[-64:] in p.read_bytes()] == []
    no_download_left()


@pytest.mark.parametrize("then", [ends, dies], ids=["connection-closed", "provider-died"])
@pytest.mark.parametrize(("tool", "whole", "content_type"), MEDIA, ids=["image", "video"])
def test_an_unframed_answer_is_refused_and_nothing_is_stored(
    host: Harness, server: FakeTensorScale, data_dir: Path, tool: str, whole: bytes,
    content_type: str, then: Callable[[Handler], None],
) -> None:
    server.reply = unframed(whole, content_type, then, sent=SENT)
    run = host.start_run()
    outcome = call(host, tool, {"prompt": "a lighthouse"}, run=run)
    assert outcome.failure is not None, f"published {outcome.structured}"
    assert outcome.failure.reason_code == messages.INVALID_RESPONSE, outcome.failure
    assert outcome.failure.detail == {"status": 200, "problem": "framing"}
    assert outcome.failure.retryable is False  # the provider was asked, and may bill
    nothing_stored(host, data_dir, run, whole[:SENT])


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(("tool", "whole", "content_type"), MEDIA, ids=["image", "video"])
def test_a_framed_answer_cut_short_is_a_lost_connection_and_nothing_is_stored(
    host: Harness, server: FakeTensorScale, data_dir: Path, tool: str, whole: bytes,
    content_type: str, chunked: bool,
) -> None:
    # Held before the fix too: the framing is what lets the client see the end is missing.
    server.reply = cut_short(whole, content_type, chunked=chunked)
    run = host.start_run()
    outcome = call(host, tool, {"prompt": "a lighthouse"}, run=run)
    assert outcome.failure is not None, f"published {outcome.structured}"
    assert outcome.failure.reason_code == messages.CONNECTION_LOST, outcome.failure
    nothing_stored(host, data_dir, run, whole[:SENT])


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_framed_answer_that_ends_whole_is_published(
    host: Harness, server: FakeTensorScale, chunked: bool,
) -> None:
    whole = PNG + TAIL

    def reply(h: Handler) -> None:
        h.head(200, "image/png", None if chunked else len(whole))
        h.stream(iter([whole[:SENT], whole[SENT:]]))

    server.reply = reply
    outcome = call(host, "image.generate", {"prompt": "a lighthouse"})
    assert outcome.ok, outcome
    assert outcome.structured["artifact"]["byte_count"] == len(whole)  # type: ignore[index]
