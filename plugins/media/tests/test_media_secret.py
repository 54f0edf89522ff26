"""The key, and the provider's response text, never reach the model, a row, a log or a file.

Calls that succeed and calls that fail every way the provider can make them fail (one echoes
the key and its own text back in a 401 body) run with logging at debug; then the outcomes,
the invocation rows, everything logged (structlog's output and the standard library's,
httpx's included) and every file under the data directory are searched for both.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from media_support import KEY, MP4, PLUGINS, FakeTensorScale, call, ok, settings, sized, status
from toolhost.testing import Harness

PROVIDER_TEXT = b"provider says KEY " + KEY.encode()


@pytest.fixture
def host(server: FakeTensorScale, bundle: Path, data_dir: Path) -> Iterator[Harness]:
    """The host logging at debug, so every event the pipeline can write is searched."""
    env = settings(server, bundle, TOOLHOST_LOG_LEVEL="debug")
    # The host configures logging only where nothing has yet (an earlier test's host did).
    structlog.reset_defaults()
    try:
        with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as harness:
            yield harness
    finally:
        structlog.reset_defaults()


def test_the_key_and_provider_text_appear_nowhere(
    host: Harness, server: FakeTensorScale, data_dir: Path,
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    replies = [
        ("image.generate", ok(b"\x89PNG\r\n\x1a\nprovider says hello", "image/png")),
        ("video.generate", ok(MP4, "video/mp4")),
        ("image.generate", status(401, PROVIDER_TEXT)),
        ("image.generate", status(500, PROVIDER_TEXT)),
        ("image.generate", ok(PROVIDER_TEXT, "image/png")),
        ("video.generate", ok(PROVIDER_TEXT, "text/plain")),
        ("image.generate", sized(b"\x89PNG\r\n\x1a\n" + PROVIDER_TEXT, 33 * 1024 * 1024,
                                 "image/png")),
    ]
    outcomes = []
    for tool, reply in replies:
        server.reply = reply
        outcomes.append(call(host, tool, {"prompt": "x"}))
    assert [o.ok for o in outcomes] == [True, True, False, False, False, False, False]
    assert len(server.received) == len(replies)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.received)

    rows = [host.record(o.invocation_id or "") for o in outcomes]
    seen = [json.dumps(o.to_json()) for o in outcomes] + [repr(r) for r in rows]
    logged = capfd.readouterr()
    seen += [logged.out, logged.err, caplog.text]
    # The logs were captured (so the search below looked at them): each call's id is there.
    assert all(str(o.invocation_id) in logged.out + logged.err + caplog.text for o in outcomes)
    for text in seen:
        assert KEY not in text
        assert "provider says" not in text
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert files
    for path in files:
        content = path.read_bytes()
        assert KEY.encode() not in content, path
    # The first reply's bytes are a (strange) PNG the call was right to store as the user's
    # file; that is the only place the provider's bytes may be, and they are content, not text
    # any model, row or log reads.
    holding = [p for p in files if b"provider says" in p.read_bytes()]
    assert len(holding) <= 1
