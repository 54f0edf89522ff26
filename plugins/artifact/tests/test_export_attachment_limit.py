"""artifact.export's attachment bound (D364): an export over ``toolhost.MAX_ATTACHED_BYTES`` (32
MiB, the most a client fetches whole) is stored, not attached, and both its text and 2.0.0's
description say so (the description said every export "is attached to your reply")."""

from __future__ import annotations

from pathlib import Path

from artifact_support import Call
from toolhost import MAX_ATTACHED_BYTES as ATTACH_LIMIT
from toolhost_artifact import export_v1, export_v2

MiB = 1024 * 1024


def test_the_description_says_an_export_is_attached_only_up_to_the_limit() -> None:
    description = export_v2.SPEC.description
    assert 32 * MiB == ATTACH_LIMIT
    assert description.startswith(
        "Export a file to the owner: it is attached to your reply when it is at most 32 MiB; "
        "a larger one is stored, and the result says how the person can get it. "), description
    assert "It is attached to your reply." not in description
    # 1.0.0's text never said it was attached, so its pinned description is as it was.
    assert "attached" not in export_v1.SPEC.description


def test_an_export_past_the_limit_is_stored_and_its_text_matches_the_description(
    call: Call, root: Path,
) -> None:
    """A real export one byte past the limit (a sparse file: read, hashed and stored whole)."""
    with (root / "big.bin").open("wb") as f:
        f.truncate(ATTACH_LIMIT + 1)
    outcome = call({"path": "big.bin"})
    assert outcome.ok, outcome.to_json()
    ref = outcome.structured
    assert ref is not None and ref["byte_count"] == ATTACH_LIMIT + 1
    assert outcome.content == (
        f'Exported "big.bin" ({ATTACH_LIMIT + 1} bytes, application/octet-stream). It is too '
        f"large to attach to your reply (over 32 MiB): it is stored as artifact {ref['id']}, "
        f"which the person can ask the host's operator for (toolhost artifacts get "
        f"{ref['id']}).")
