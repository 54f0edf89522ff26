"""video.generate's attachment bound (D364): a video over 32 MiB (a stream may hold 256 MiB) was said
to be "attached to your reply", though no client can fetch more than 32 MiB from the reply
(MCP resources/read's bound, D223). Its text and the tool's description now follow the rule
artifact.export's do: attached up to ``toolhost.MAX_ATTACHED_BYTES``; past it, stored, and the text says how
the person gets it. The structured result's ``attached`` says the same (it was a const ``true``,
so it said every video was attached: D409).

The videos are real: the fake TensorScale streams them over loopback HTTPS into the store.
"""

from __future__ import annotations

from typing import Any

import pytest

from media_support import MP4, FakeTensorScale, call, sized
from toolhost import MAX_ATTACHED_BYTES as ATTACH_LIMIT
from toolhost.testing import Harness
from toolhost_media.bounds import IMAGE_CAP

MiB = 1024 * 1024


def _video(host: Harness, server: FakeTensorScale, size: int) -> tuple[str, dict[str, Any]]:
    server.reply = sized(MP4[:8], size, "video/mp4")
    outcome = call(host, "video.generate", {"prompt": "a long walk"})
    assert outcome.ok, outcome.to_json()
    structured: Any = outcome.structured
    assert structured["attached"] is (size <= ATTACH_LIMIT)
    assert structured["artifact"]["byte_count"] == size
    assert host.host.pipeline.artifacts.get(structured["artifact"]["id"]).size == size
    return outcome.content, structured["artifact"]


def test_a_video_past_the_limit_is_not_said_to_be_attached(
    host: Harness, server: FakeTensorScale,
) -> None:
    assert 32 * MiB == ATTACH_LIMIT
    content, ref = _video(host, server, ATTACH_LIMIT + 1)
    assert content == (
        f'Generated "{ref["name"]}" ({ATTACH_LIMIT + 1} bytes, video/mp4). It is too large to '
        f"attach to your reply (over 32 MiB): it is stored as artifact {ref['id']}, which the "
        f"person can ask the host's operator for (toolhost artifacts get {ref['id']}).")
    assert "attached to your reply" not in content


def test_a_video_of_exactly_the_limit_is_attached(host: Harness, server: FakeTensorScale) -> None:
    content, ref = _video(host, server, ATTACH_LIMIT)
    assert content == (f'Generated "{ref["name"]}" ({ATTACH_LIMIT} bytes, video/mp4). '
                       "It is attached to your reply.")


@pytest.mark.parametrize("version", ["1.0.0", "1.1.0"])
def test_the_video_description_says_attached_only_up_to_the_limit(
    host: Harness, version: str,
) -> None:
    description = host.host.registry.resolve("video.generate", version).spec.description
    assert ("The video is saved as an artifact and attached to your reply when it is at most "
            "32 MiB; a larger one is stored, and the result says how the person can get it."
            ) in description
    assert "attached to your reply. " not in description


def test_an_image_is_never_past_the_limit() -> None:
    """The image cap is the limit: an image's "attached" text is always true."""
    assert IMAGE_CAP <= ATTACH_LIMIT
