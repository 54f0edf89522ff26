"""1.1.0's references: every failure is a static reason, and no request is sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from media_support import JPEG, MP4, PNG, FakeTensorScale, call, ok
from toolhost import ArtifactOrigin, Outcome, Trust
from toolhost.testing import Harness, Run
from toolhost_media import messages

MiB = 1024 * 1024
SCOPES = ("media.generate", "artifact.write", "artifact.read")


@pytest.fixture
def run(host: Harness) -> Iterator[Run]:
    r = host.start_run(scopes=SCOPES)
    yield r
    host.end_run(r)


def stored(host: Harness, run: Run, content: bytes, *, name: str = "ref.png",
           origin: ArtifactOrigin = ArtifactOrigin.EXPORT) -> str:
    return host.context(run=run).artifacts.write(
        origin=origin, name=name, media_type="image/png", content=content,
        trust=Trust.INTERNAL_TOOL).id


def refused(host: Harness, server: FakeTensorScale, run: Run, tool: str, ids: list[Any],
            code: str, **extra: Any) -> Outcome:
    outcome = call(host, tool, {"prompt": "x", "reference_image_ids": ids, **extra}, run=run)
    assert outcome.failure is not None, outcome
    assert outcome.failure.reason_code == code, outcome.failure
    assert outcome.content == host.host.messages[code]
    assert server.received == []  # nothing reached the provider
    assert [a.origin for a in host.host.pipeline.artifacts.list_run(run.id)
            if a.origin is ArtifactOrigin.MODEL_OUTPUT] == []
    return outcome


@pytest.mark.parametrize("tool", ["image.generate", "video.generate"])
def test_without_artifact_read_references_are_refused(
    host: Harness, server: FakeTensorScale, tool: str
) -> None:
    run = host.start_run(scopes=("media.generate", "artifact.write"))
    ref = stored(host, run, PNG)
    refused(host, server, run, tool, [ref], messages.REFERENCE_SCOPE)


def test_an_unknown_id(host: Harness, server: FakeTensorScale, run: Run) -> None:
    refused(host, server, run, "image.generate", ["0" * 32], messages.REFERENCE_UNAVAILABLE)


def test_another_runs_artifact(host: Harness, server: FakeTensorScale, run: Run) -> None:
    other = host.start_run(scopes=SCOPES)
    ref = stored(host, other, PNG)
    refused(host, server, run, "video.generate", [ref], messages.REFERENCE_UNAVAILABLE)


def test_another_conversations_artifact(host: Harness, server: FakeTensorScale) -> None:
    mine = host.start_run(scopes=SCOPES, conversation_id="c1")
    theirs = host.start_run(scopes=SCOPES, conversation_id="c2")
    ref = stored(host, theirs, PNG)
    refused(host, server, mine, "image.generate", [ref], messages.REFERENCE_UNAVAILABLE)


def test_a_captured_tool_output_is_not_a_reference(
    host: Harness, server: FakeTensorScale, run: Run
) -> None:
    ref = stored(host, run, PNG, origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE)
    refused(host, server, run, "image.generate", [ref], messages.REFERENCE_UNAVAILABLE)


def test_a_later_unavailable_reference_stops_the_whole_call(
    host: Harness, server: FakeTensorScale, run: Run
) -> None:
    refused(host, server, run, "image.generate", [stored(host, run, PNG), "f" * 32],
            messages.REFERENCE_UNAVAILABLE)


@pytest.mark.parametrize("content", [
    b"GIF89a" + b"\x00" * 64, b"plain text, named ref.png", b"", b"\x89PNG\r\n", b"RIFF\0\0\0\0WAVE",
], ids=["gif", "text", "empty", "short-png", "riff-not-webp"])
def test_bytes_that_are_not_png_jpeg_or_webp(
    host: Harness, server: FakeTensorScale, run: Run, content: bytes
) -> None:
    refused(host, server, run, "image.generate", [stored(host, run, content)],
            messages.REFERENCE_TYPE)


def test_an_image_reference_over_20_mib(host: Harness, server: FakeTensorScale, run: Run) -> None:
    big = stored(host, run, JPEG + b"\x00" * (20 * MiB + 1 - len(JPEG)))
    refused(host, server, run, "image.generate", [big], messages.REFERENCE_TOO_LARGE)


def test_a_video_reference_over_10_mib(host: Harness, server: FakeTensorScale, run: Run) -> None:
    big = stored(host, run, PNG + b"\x00" * (10 * MiB + 1 - len(PNG)))
    refused(host, server, run, "video.generate", [stored(host, run, PNG), big],
            messages.REFERENCE_TOO_LARGE)


def test_image_references_over_64_mib_together(
    host: Harness, server: FakeTensorScale, run: Run
) -> None:
    # 17 MiB each is allowed alone; the fourth passes 64 MiB.
    each = PNG + b"\x00" * (17 * MiB - len(PNG))
    ids = [stored(host, run, each, name=f"ref{i}.png") for i in range(4)]
    refused(host, server, run, "image.generate", ids, messages.REFERENCES_TOO_LARGE)


@pytest.mark.parametrize(("tool", "count"), [("image.generate", 9), ("video.generate", 3)])
def test_too_many_references(
    host: Harness, server: FakeTensorScale, run: Run, tool: str, count: int
) -> None:
    refused(host, server, run, tool, [stored(host, run, PNG)] * count,
            messages.TOO_MANY_REFERENCES)


@pytest.mark.parametrize("repeat", [[0, 0], [0, 1, 0], [0, 1, 2, 1]],
                         ids=["twice", "apart", "later"])
def test_an_image_reference_named_twice(
    host: Harness, server: FakeTensorScale, run: Run, repeat: list[int]
) -> None:
    """The same id twice (the same image, read and sent twice) was taken as two references."""
    ids = [stored(host, run, PNG, name=f"ref{i}.png") for i in range(3)]
    assert len(set(ids)) == 3
    outcome = refused(host, server, run, "image.generate", [ids[i] for i in repeat],
                      messages.DUPLICATE_REFERENCE)
    row = host.record(outcome.invocation_id or "")
    assert (row.reason_code, row.failure_detail) == (
        messages.DUPLICATE_REFERENCE, {"position": len(repeat) - 1})


def test_a_videos_first_and_last_frame_may_be_one_image(
    host: Harness, server: FakeTensorScale, run: Run
) -> None:
    """A loop: the same image is a video's first frame and its last, two frames, not two
    references to the same one; only image.generate refuses an id named twice."""
    server.reply = ok(MP4, "video/mp4")
    ref = stored(host, run, PNG)
    outcome = call(host, "video.generate", {"prompt": "x", "reference_image_ids": [ref, ref]},
                   run=run)
    assert outcome.ok, outcome
    assert [f["index"] for f in server.received[0].body["frames"]] == [0, 120]
    assert messages.DUPLICATE_REFERENCE not in {
        r.code for r in host.host.registry.resolve("video.generate", "1.1.0").tool.reasons}


@pytest.mark.parametrize("ref", [
    "https://example.test/cat.png", "../ref.png", "data:image/png;base64,AAAA",
    "0" * 31, "0" * 33, "A" * 32, 12,
], ids=["url", "path", "data-uri", "short", "long", "upper", "number"])
def test_anything_but_an_artifact_id_is_a_schema_failure(
    host: Harness, server: FakeTensorScale, run: Run, ref: Any
) -> None:
    refused(host, server, run, "image.generate", [ref], "tool.invalid_arguments.schema")


def test_references_are_not_part_of_1_0_0(
    host: Harness, server: FakeTensorScale, run: Run
) -> None:
    outcome = call(host, "image.generate",
                   {"prompt": "x", "reference_image_ids": [stored(host, run, PNG)]},
                   version="1.0.0", run=run)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert server.received == []
