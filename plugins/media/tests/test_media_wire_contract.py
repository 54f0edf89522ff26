"""Adversarial review of toolhost-media (issue #14): each test states a behaviour the seed's
media section (wire contract included) requires, which the plugin lacked at review time (each failed
before its fix).

Where a failure needs a fault a real loopback server cannot produce on demand (an artifact
store outage, a cancellation landing inside the commit or just after the body's last await),
the test wraps the real store, or the body's last awaited step, at exactly that point;
everything else is the fake TensorScale over HTTPS.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from media_support import PNG, FakeTensorScale, Handler, Reply, call
from toolhost import ArtifactOrigin, ArtifactTooLarge, Trust
from toolhost.testing import Harness, Run
from toolhost_media import messages

SCOPES = ("media.generate", "artifact.write", "artifact.read")
CHARGED = "been charged"

# The host's ArtifactStoreUnavailable (what an S3 or PostgreSQL artifact store raises when its
# backend is away) is not public API; reach it through its public sibling's base class.
_ARTIFACT_ERRORS: Sequence[type] = ArtifactTooLarge.__mro__[1].__subclasses__()
ArtifactStoreUnavailable = next(
    c for c in _ARTIFACT_ERRORS if c.__name__ == "ArtifactStoreUnavailable")


@pytest.fixture
def run(host: Harness) -> Iterator[Run]:
    r = host.start_run(scopes=SCOPES)
    yield r
    host.end_run(r)


def stored(host: Harness, run: Run, content: bytes, *, media_type: str = "image/png",
           name: str = "ref.png") -> str:
    return host.context(run=run).artifacts.write(
        origin=ArtifactOrigin.EXPORT, name=name, media_type=media_type, content=content,
        trust=Trust.INTERNAL_TOOL).id


def raw(status_line: bytes, headers: list[tuple[str, str]], body: bytes) -> Reply:
    """A reply written byte for byte (headers the fake's helpers cannot set)."""
    def reply(h: Handler) -> None:
        head = status_line + b"\r\n" + b"".join(
            f"{k}: {v}\r\n".encode() for k, v in headers) + b"\r\n"
        h.stream(iter([head, body]))
    return reply


# ---------------------------------------------------------------------------- the provider


def test_a_gzip_body_that_does_not_decode_is_an_invalid_response(
    host: Harness, server: FakeTensorScale
) -> None:
    """The adapter asks for identity, but httpx still decodes a Content-Encoding the server
    chose; a body that fails to decode raises httpx.DecodingError, which is not a
    TransportError, so it escapes the adapter's mapping as the host's INTERNAL_UNEXPECTED: no
    stable media code, and no warning that the (sent) request may have been charged."""
    body = b"\x89PNG\r\n\x1a\n this is not gzip " * 64
    server.reply = raw(b"HTTP/1.0 200 OK", [("Content-Type", "image/png"),
                                            ("Content-Encoding", "gzip"),
                                            ("Content-Length", str(len(body)))], body)
    outcome = call(host, "image.generate", {"prompt": "x"})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == messages.INVALID_RESPONSE, outcome.failure
    assert CHARGED in outcome.content
    assert outcome.failure.retryable is False


def test_an_artifact_store_outage_after_the_request_is_not_retryable(
    host: Harness, server: FakeTensorScale, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that fails once the provider has streamed the file (an S3 or PostgreSQL
    artifact store going away) surfaces as the host's ARTIFACT_STORE failure, which is
    retryable and says nothing of a charge: an agent would repeat a NON_IDEMPOTENT, billed
    generation blindly, which the seed forbids (D137)."""
    store = host.host.pipeline.artifacts
    begin = store.begin

    def failing_begin(*args: Any, **kwargs: Any) -> Any:
        upload = begin(*args, **kwargs)

        class Failing:
            bytes_written = property(lambda self: upload.bytes_written)
            write = staticmethod(upload.write)
            abort = staticmethod(upload.abort)

            def commit(self, now: dt.datetime) -> Any:
                raise ArtifactStoreUnavailable("object store unreachable")
        return Failing()

    monkeypatch.setattr(store, "begin", failing_begin)
    outcome = call(host, "image.generate", {"prompt": "x"})
    assert len(server.received) == 1  # the provider was asked (and may bill)
    assert outcome.failure is not None
    assert outcome.failure.retryable is False, outcome.failure
    assert CHARGED in outcome.content, outcome.content


def test_a_base_url_ending_in_a_bare_query_or_fragment_mark_is_refused(
    server: FakeTensorScale, bundle: Path, data_dir: Path
) -> None:
    """urlsplit reports an empty query for "https://h/?" (and an empty fragment for "#"), so
    base_url_problem accepts it; the adapter then appends the endpoint to the raw string and
    POSTs the key to "/?/v2/sensenova-u1.5/t2i", i.e. the origin's root, not the endpoint."""
    from media_support import PLUGINS, settings

    env = settings(server, bundle, TENSORSCALE_BASE_URL=server.base_url + "/?")
    with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as host:
        call(host, "image.generate", {"prompt": "x"})
    assert [r.path for r in server.received] in ([], ["/v2/sensenova-u1.5/t2i"])



def test_a_base_url_httpx_cannot_parse_is_not_configured(
    server: FakeTensorScale, bundle: Path, data_dir: Path
) -> None:
    """base_url_problem judges the URL with urlsplit, which accepts "https://256.1.1.1"; httpx
    refuses it at request time with InvalidURL, which is not a TransportError, so each call
    ends as INTERNAL_UNEXPECTED and ``toolhost check`` reports nothing wrong, instead of the
    provider_not_configured failure and readiness line the README promises."""
    from media_support import PLUGINS, settings
    from toolhost import Settings
    from toolhost_media import plugin

    url = "https://256.1.1.1"
    env = settings(server, bundle, TENSORSCALE_BASE_URL=url)
    with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as host:
        outcome = call(host, "image.generate", {"prompt": "x"})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == messages.NOT_CONFIGURED, outcome.failure
    assert plugin.toolhost_readiness(Settings(env=env)) != []


# ---------------------------------------------------------------------------- references


def test_a_corrupted_reference_is_unavailable_and_sends_nothing(
    host: Harness, server: FakeTensorScale, run: Run, data_dir: Path
) -> None:
    """The resolver raises ArtifactCorrupted for bytes that fail their checksum; the plugin
    catches only ArtifactUnavailable, so the call ends as INTERNAL_UNEXPECTED (no stable
    media code) rather than as the reference being unavailable."""
    content = PNG + b"corrupt me"
    ref = stored(host, run, content)
    (blob,) = [p for p in data_dir.rglob("*") if p.is_file() and p.read_bytes() == content]
    blob.write_bytes(content[:-1] + b"!")
    outcome = call(host, "image.generate", {"prompt": "x", "reference_image_ids": [ref]},
                   run=run)
    assert server.received == []
    assert outcome.failure is not None
    assert outcome.failure.reason_code == messages.REFERENCE_UNAVAILABLE, outcome.failure


@pytest.mark.parametrize("riff_size", [0, 4, 0xFFFFFFF0], ids=["zero", "tiny", "huge"])
def test_a_webp_whose_riff_size_disagrees_with_its_length_sends_nothing(
    host: Harness, server: FakeTensorScale, run: Run, riff_size: int
) -> None:
    """A WebP's RIFF header states the file's length less 8; the plugin checks only "RIFF" and
    "WEBP", so a header whose size contradicts the bytes (a truncated or spliced file) is
    accepted as WebP and sent."""
    body = b"WEBPVP8 " + b"\x02" * 200
    webp = b"RIFF" + riff_size.to_bytes(4, "little") + body
    ref = stored(host, run, webp, media_type="image/webp", name="r.webp")
    outcome = call(host, "image.generate", {"prompt": "x", "reference_image_ids": [ref]},
                   run=run)
    assert server.received == []
    assert outcome.failure is not None
    assert outcome.failure.reason_code == messages.REFERENCE_TYPE, outcome.failure


# ---------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(("tool", "arguments", "sent"), [
    ("image.generate", {"prompt": "x", "seed": 7.0}, {"seed": 7}),
    ("video.generate", {"prompt": "x", "duration_seconds": 10.0}, {"duration_seconds": 10}),
], ids=["seed-7.0", "duration-10.0"])
def test_integral_floats_reach_the_wire_as_integers_or_not_at_all(
    host: Harness, server: FakeTensorScale, tool: str, arguments: dict[str, Any],
    sent: dict[str, Any],
) -> None:
    """JSON Schema's "integer" (and an enum of 5 and 10) accept 7.0 and 10.0, and the body
    passes them on as floats: the wire contract's integer seed and duration_seconds become
    "seed": 7.0 and "duration_seconds": 10.0 (and a last frame index of 240.0)."""
    from media_support import MP4, ok

    server.reply = ok(MP4, "video/mp4") if tool == "video.generate" else server.reply
    outcome = call(host, tool, arguments)
    if outcome.failure is not None:  # refused as a schema failure: also acceptable
        assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
        assert server.received == []
        return
    (received,) = server.received
    for key, value in sent.items():
        assert type(received.body[key]) is type(value) and received.body[key] == value


def test_a_cancellation_seen_after_the_last_await_is_reported_as_cancelled(
    host: Harness, server: FakeTensorScale, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save() answers a cancellation it sees after the stream ended with its own
    ``raise asyncio.CancelledError``. The pipeline stops an async body through a
    call_soon_threadsafe that has not run yet when a stop pressed on another thread lands
    after the body's last await: the driver did not cancel the task itself, so it takes the
    body's CancelledError for one from outside and re-raises it, and the call ends with no
    outcome at all instead of tool.cancelled.run_cancelled (its invocation row is left
    RUNNING, for recovery to find). Simulated by setting the run's
    cancellation just after the body's last await returns, before the loop runs again."""
    import toolhost_media.generate as generate_module

    run = host.start_run()
    # The last await is the download's thread.
    download = generate_module._on_own_thread

    async def download_then_stop(work: Any, *, interrupt: Any) -> None:
        await download(work, interrupt=interrupt)
        run.cancellation.cancel()

    monkeypatch.setattr(generate_module, "_on_own_thread", download_then_stop)
    outcome = call(host, "image.generate", {"prompt": "x"}, run=run)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.cancelled.run_cancelled"
    assert host.host.attachments(run) == ()


def test_a_prompt_of_only_a_byte_order_mark_is_blank(
    host: Harness, server: FakeTensorScale
) -> None:
    """The schema's nonblank rule is ``"pattern": "\\S"``; JSON Schema patterns are ECMA-262,
    where U+FEFF is whitespace, so every conforming client reads "\ufeff" as blank. The host
    validates with Python's re (U+FEFF is not whitespace there) and the body's str.strip()
    agrees with it, so the invisible prompt is sent and billed."""
    outcome = call(host, "image.generate", {"prompt": "\ufeff"})
    assert server.received == []
    assert outcome.failure is not None
    assert outcome.failure.reason_code == messages.BLANK_PROMPT, outcome.failure

