"""Every way the provider can fail ends with a static reason code and publishes nothing: a
redirect (not followed), 4xx, 5xx, a gateway timeout, a wrong type or signature, an empty
body, a stream past its cap, an unreachable or untrusted or misconfigured provider, a stalled
stream past the deadline, a provider timeout, and a run cancelled mid-stream."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from media_support import (
    JPEG,
    KEY,
    MP4,
    PLUGINS,
    PNG,
    FakeTensorScale,
    Handler,
    Reply,
    call,
    no_download_left,
    ok,
    redirect,
    settings,
    sized,
    stall,
    status,
    thinking,
)
from toolhost import Outcome, Secret, ToolFailure
from toolhost.testing import Harness, Run
from toolhost_media import messages
from toolhost_media.provider import ImageRequest
from toolhost_media.tensorscale import TensorScale

MiB = 1024 * 1024
CHARGED = "may already have been charged"


def failed(host: Harness, outcome: Outcome, code: str, *, retryable: bool = False) -> None:
    """Failed with ``code``, its static message byte for byte, nothing of the provider's in
    it, and no artifact published by the call."""
    assert outcome.failure is not None, outcome
    assert outcome.failure.reason_code == code, outcome.failure
    assert outcome.content == outcome.failure.message == messages.MESSAGES[code]
    assert outcome.failure.retryable is retryable
    assert "provider says" not in repr(host.record(outcome.invocation_id or ""))
    assert KEY not in repr(host.record(outcome.invocation_id or ""))
    no_download_left()


def attachments(host: Harness, run: Run) -> tuple[object, ...]:
    return host.host.attachments(run)


def generate(host: Harness, tool: str = "image.generate") -> tuple[Outcome, Run]:
    run = host.start_run()
    return call(host, tool, {"prompt": "x"}, run=run), run


@pytest.mark.parametrize(("reply", "code"), [
    (status(400), messages.PROVIDER_REJECTED),
    (status(401), messages.PROVIDER_REJECTED),
    (status(429), messages.PROVIDER_REJECTED),
    (status(500), messages.PROVIDER_FAILED),
    (status(503), messages.PROVIDER_FAILED),
    (status(504), messages.PROVIDER_TIMEOUT),
    (status(408), messages.PROVIDER_TIMEOUT),
    (status(202), messages.INVALID_RESPONSE),
    (ok(PNG, "text/html"), messages.INVALID_RESPONSE),
    (ok(PNG, "application/octet-stream"), messages.INVALID_RESPONSE),
    (ok(JPEG, "image/png"), messages.INVALID_RESPONSE),
    (ok(MP4, "image/png"), messages.INVALID_RESPONSE),
    (ok(b"", "image/png"), messages.INVALID_RESPONSE),
    (ok(PNG[:7], "image/png"), messages.INVALID_RESPONSE),
], ids=["400", "401", "429", "500", "503", "504", "408", "202", "html", "octet-stream",
        "jpeg-as-png", "mp4-as-png", "empty", "truncated-signature"])
def test_an_image_answer_that_is_not_a_png(
    host: Harness, server: FakeTensorScale, reply: Reply, code: str
) -> None:
    server.reply = reply
    outcome, run = generate(host)
    failed(host, outcome, code)
    assert attachments(host, run) == ()
    if code != messages.PROVIDER_REJECTED:
        assert CHARGED in outcome.content


@pytest.mark.parametrize("reply", [ok(PNG, "video/mp4"), ok(MP4, "image/png"),
                                   ok(b"", "video/mp4")], ids=["png", "wrong-type", "empty"])
def test_a_video_answer_that_is_not_an_mp4(
    host: Harness, server: FakeTensorScale, reply: Reply
) -> None:
    server.reply = reply
    outcome, run = generate(host, "video.generate")
    failed(host, outcome, messages.INVALID_RESPONSE)
    assert attachments(host, run) == ()


@pytest.mark.parametrize("split", [None, 7], ids=["whole", "across-two-writes"])
def test_an_answer_that_echoes_the_key_is_refused_and_nothing_is_stored(
    host: Harness, server: FakeTensorScale, split: int | None
) -> None:
    # Regression (issue #26): a provider echoing the API key inside a 200 PNG had the key
    # stored as an artifact, readable by the model and whoever got the file.
    body = PNG + b"tEXt comment " + KEY.encode() + b" end" + PNG[8:]
    cut = len(PNG) + 13 + (split or 0)
    server.reply = ok(body, "image/png") if split is None else sized_parts(
        [body[:cut], body[cut:]], "image/png")
    outcome, run = generate(host)
    failed(host, outcome, messages.INVALID_RESPONSE)
    assert attachments(host, run) == ()


def sized_parts(parts: list[bytes], content_type: str) -> Reply:
    """``parts`` written one after another, each a write of its own."""
    def reply(h: Handler) -> None:
        h.head(200, content_type, None)
        h.stream(iter(parts))
    return reply


def test_a_redirect_is_not_followed(host: Harness, server: FakeTensorScale) -> None:
    server.reply = redirect
    outcome, run = generate(host)
    failed(host, outcome, messages.INVALID_RESPONSE)
    assert [r.path for r in server.received] == ["/v2/sensenova-u1.5/t2i"]
    assert attachments(host, run) == ()


def test_a_stream_one_byte_past_the_image_cap_is_refused(
    host: Harness, server: FakeTensorScale
) -> None:
    server.reply = sized(PNG[:8], 32 * MiB + 1, "image/png")
    outcome, run = generate(host)
    failed(host, outcome, messages.STREAM_OVER_CAP)
    assert attachments(host, run) == ()


def test_an_endless_stream_is_cut_off_at_the_cap(host: Harness, server: FakeTensorScale) -> None:
    server.reply = sized(PNG[:8], 1024 * MiB, "image/png")
    outcome, run = generate(host)
    failed(host, outcome, messages.STREAM_OVER_CAP)
    assert attachments(host, run) == ()
    assert server.client_closed.wait(5)  # the client hung up rather than read on


def test_a_declared_length_past_the_video_cap_is_refused_before_reading(
    host: Harness, server: FakeTensorScale
) -> None:
    server.reply = sized(MP4[:8], 2 * MiB, "video/mp4", declared=256 * MiB + 1)
    outcome, run = generate(host, "video.generate")
    failed(host, outcome, messages.STREAM_OVER_CAP)
    assert outcome.failure is not None and outcome.failure.detail["declared"] is True
    assert attachments(host, run) == ()


def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("change", [
    lambda env: env.update(TENSORSCALE_BASE_URL=f"https://127.0.0.1:{unused_port()}"),
    lambda env: env.pop("TOOLHOST_CA_BUNDLE"),
], ids=["nothing-listening", "untrusted-certificate"])
def test_an_unreachable_provider_is_retryable(
    server: FakeTensorScale, bundle: Path, data_dir: Path,
    change: Callable[[dict[str, str]], object],
) -> None:
    env = settings(server, bundle)
    change(env)
    with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as host:
        outcome, run = generate(host)
        failed(host, outcome, messages.PROVIDER_UNREACHABLE, retryable=True)
        assert attachments(host, run) == ()
    assert server.received == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:9", "https://user:pw@example.test",
                                 "https://example.test/?x=1", "ftp://example.test"])
def test_a_base_url_that_is_not_plain_https_sends_nothing(
    server: FakeTensorScale, bundle: Path, data_dir: Path, url: str
) -> None:
    env = settings(server, bundle, TENSORSCALE_BASE_URL=url)
    with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as host:
        outcome, _ = generate(host)
        failed(host, outcome, messages.NOT_CONFIGURED)
        assert outcome.failure is not None
        assert outcome.failure.detail["problem"].startswith("TENSORSCALE_BASE_URL")
    assert server.received == []


def test_a_stalled_stream_past_the_deadline_publishes_nothing(
    host: Harness, server: FakeTensorScale
) -> None:
    server.reply = stall(PNG[:16], "image/png")
    run = host.start_run(timeout_s=1.0)
    outcome = call(host, "image.generate", {"prompt": "slow"}, run=run)
    # The host's deadline failure for a NON_IDEMPOTENT tool warns of the charge.
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.timeout.deadline_may_have_taken_effect"
    assert outcome.failure.retryable is False
    assert "charged" in outcome.content
    assert server.client_closed.wait(5)  # the response was closed, not left to run on
    assert attachments(host, run) == ()


def test_run_cancellation_mid_stream_closes_the_response(
    host: Harness, server: FakeTensorScale
) -> None:
    run = host.start_run()
    server.reply = stall(PNG[:16], "image/png", on_first=run.cancellation.cancel)
    outcome = call(host, "image.generate", {"prompt": "never mind"}, run=run)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.cancelled.run_cancelled"
    assert server.client_closed.wait(5)
    assert attachments(host, run) == ()


def test_run_cancellation_while_the_provider_works_closes_the_connection_at_once(
    host: Harness, server: FakeTensorScale
) -> None:
    """Cancelling the call before the provider answers (generating can take a minute) is the
    run's cancellation, and its connection does not wait out the read timeout
    (test_media_cancel: the interrupt at each stage of the download)."""
    run = host.start_run()
    server.reply = thinking(on_request=run.cancellation.cancel)
    outcome = call(host, "image.generate", {"prompt": "never mind"}, run=run)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.cancelled.run_cancelled"
    assert server.client_closed.wait(10)
    assert attachments(host, run) == ()
    no_download_left()


def test_the_adapter_maps_a_read_timeout_to_provider_timeout(
    host: Harness, server: FakeTensorScale
) -> None:
    """Outside a host's deadline: the adapter's own client timeout (the tool's timeout_s in
    a call; half a second here) ends a silent stream as a provider timeout."""
    server.reply = stall(PNG[:16], "image/png", trickle=False)
    client = host.services("toolhost-media").http(timeout=0.5)

    def drain() -> None:
        with TensorScale(client, Secret(KEY), server.base_url) as provider:
            request = ImageRequest(prompt="x", size="1024x1024")
            with contextlib.closing(provider.stream(request)) as chunks:
                for _ in chunks:
                    pass

    with pytest.raises(ToolFailure) as raised:
        drain()
    assert raised.value.reason_code == messages.PROVIDER_TIMEOUT
    assert raised.value.retryable is False
    assert raised.value.detail == {"error": "ReadTimeout"}


def test_the_adapter_refuses_a_plain_http_base_url(host: Harness) -> None:
    with host.services("toolhost-media").http(timeout=1) as client, \
            pytest.raises(ValueError, match="https://"):
        TensorScale(client, Secret(KEY), "http://127.0.0.1:9")
