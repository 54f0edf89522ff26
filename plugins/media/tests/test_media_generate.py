"""Success for each TensorScale endpoint: the exact JSON the fake received, the Bearer header,
and the one artifact the call published (MODEL_OUTPUT, EXTERNAL_UNTRUSTED, the bytes sent)."""

from __future__ import annotations

import base64
from typing import Any

from media_support import JPEG, KEY, MP4, PNG, WEBP, FakeTensorScale, call, ok
from toolhost import ArtifactOrigin, Outcome, Trust
from toolhost.testing import DEFAULT_INSTANT, Harness, Run

SCOPES = ("media.generate", "artifact.write", "artifact.read")


def uri(media_type: str, content: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(content).decode()}"


def upload(host: Harness, run: Run, name: str, content: bytes, media_type: str) -> str:
    """An artifact this run exported (so the resolver lets the run's calls read it)."""
    ref = host.context(run=run).artifacts.write(
        origin=ArtifactOrigin.EXPORT, name=name, media_type=media_type, content=content,
        trust=Trust.INTERNAL_TOOL)
    return ref.id


def published(host: Harness, outcome: Outcome, content: bytes, media_type: str) -> None:
    """The result is exactly the ref and the confirmation; the artifact holds ``content``."""
    assert outcome.ok, outcome
    assert outcome.output_trust is Trust.EXTERNAL_UNTRUSTED
    structured: Any = outcome.structured
    assert set(structured) == {"artifact", "attached"} and structured["attached"] is True
    ref = structured["artifact"]
    extension = "png" if media_type == "image/png" else "mp4"
    kind = "image" if extension == "png" else "video"
    # The platform's name: the kind and the host clock's instant (the kit's FixedClock).
    stamp = DEFAULT_INSTANT.strftime("%Y%m%d-%H%M%S")
    assert ref["name"] == f"{kind}-{stamp}.{extension}"
    assert (ref["media_type"], ref["byte_count"]) == (media_type, len(content))
    assert outcome.content == (f'Generated "{ref["name"]}" ({len(content)} bytes, {media_type}).'
                               " It is attached to your reply.")
    store = host.host.pipeline.artifacts
    record = store.get(ref["id"])
    assert (record.origin, record.trust) == (ArtifactOrigin.MODEL_OUTPUT, Trust.EXTERNAL_UNTRUSTED)
    assert store.read(ref["id"]) == content


def the_request(server: FakeTensorScale, path: str) -> Any:
    (received,) = server.received
    assert received.path == path
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert received.headers["content-type"] == "application/json"
    return received.body


def test_text_to_image(host: Harness, server: FakeTensorScale) -> None:
    outcome = call(host, "image.generate", {"prompt": "a red fox", "seed": 7}, version="1.0.0")
    published(host, outcome, PNG, "image/png")
    assert the_request(server, "/v2/sensenova-u1.5/t2i") == {
        "prompt": "a red fox", "size": "1024x1024", "seed": 7}


def test_the_latest_version_without_references_is_text_to_image(
    host: Harness, server: FakeTensorScale
) -> None:
    run = host.start_run(scopes=("media.generate", "artifact.write"))  # no artifact.read
    outcome = call(host, "image.generate",
                   {"prompt": "p", "size": "3136x1312", "reference_image_ids": []}, run=run)
    assert outcome.version == "1.1.0"
    published(host, outcome, PNG, "image/png")
    assert the_request(server, "/v2/sensenova-u1.5/t2i") == {"prompt": "p", "size": "3136x1312"}
    assert [a.id for a in host.end_run(run).attachments] == [outcome.structured["artifact"]["id"]]  # type: ignore[index]


def test_edit_sends_the_references_in_order_as_data_uris(
    host: Harness, server: FakeTensorScale
) -> None:
    run = host.start_run(scopes=SCOPES)
    # Recorded media types are ignored: the signature decides (the JPEG is named .png).
    ids = [upload(host, run, "a.webp", WEBP, "image/webp"),
           upload(host, run, "b.png", JPEG, "image/png"),
           upload(host, run, "c.png", PNG, "image/png")]
    outcome = call(host, "image.generate",
                   {"prompt": "make it blue", "size": "2048x1152", "seed": 0,
                    "reference_image_ids": ids}, run=run)
    published(host, outcome, PNG, "image/png")
    assert the_request(server, "/v2/sensenova-u1.5/edit") == {
        "prompt": "make it blue", "size": "2048x1152", "seed": 0,
        "images": [uri("image/webp", WEBP), uri("image/jpeg", JPEG), uri("image/png", PNG)],
    }
    # The data URIs stay inside the adapter: the row holds the ids only.
    row = host.record(outcome.invocation_id or "")
    assert row.arguments["reference_image_ids"] == ids
    assert "base64" not in repr(row)


def test_text_to_video(host: Harness, server: FakeTensorScale) -> None:
    server.reply = ok(MP4, "video/mp4", length=True)
    outcome = call(host, "video.generate", {"prompt": "waves"}, version="1.0.0")
    published(host, outcome, MP4, "video/mp4")
    assert the_request(server, "/v2/ltx-2.5/fast") == {
        "prompt": "waves", "size": "1280x768", "duration_seconds": 5}


def test_video_with_first_and_last_frames(host: Harness, server: FakeTensorScale) -> None:
    server.reply = ok(MP4, "video/mp4; charset=binary")
    run = host.start_run(scopes=SCOPES)
    first, last = upload(host, run, "f.png", PNG, "image/png"), upload(
        host, run, "l.jpg", JPEG, "image/jpeg")
    outcome = call(host, "video.generate",
                   {"prompt": "walk", "size": "1088x1920", "duration_seconds": 10,
                    "seed": 2147483647, "reference_image_ids": [first, last]}, run=run)
    published(host, outcome, MP4, "video/mp4")
    assert the_request(server, "/v2/ltx-2.5/fast") == {
        "prompt": "walk", "size": "1088x1920", "duration_seconds": 10, "seed": 2147483647,
        "frames": [{"index": 0, "image": uri("image/png", PNG), "strength": 1},
                   {"index": 240, "image": uri("image/jpeg", JPEG), "strength": 1}],
    }


def test_video_with_a_first_frame_only(host: Harness, server: FakeTensorScale) -> None:
    server.reply = ok(MP4, "video/mp4")
    run = host.start_run(scopes=SCOPES)
    first = upload(host, run, "f.webp", WEBP, "image/webp")
    outcome = call(host, "video.generate", {"prompt": "walk", "reference_image_ids": [first]},
                   run=run)
    published(host, outcome, MP4, "video/mp4")
    assert the_request(server, "/v2/ltx-2.5/fast")["frames"] == [
        {"index": 0, "image": uri("image/webp", WEBP), "strength": 1}]


def test_an_image_of_exactly_the_cap_is_saved(host: Harness, server: FakeTensorScale) -> None:
    from media_support import sized

    server.reply = sized(PNG[:8], 32 * 1024 * 1024, "image/png")
    outcome = call(host, "image.generate", {"prompt": "big"})
    assert outcome.ok, outcome
    assert outcome.structured["artifact"]["byte_count"] == 32 * 1024 * 1024  # type: ignore[index]
