"""1.1.0's reference images: read through the conversation-scoped resolver and checked, every
one, before any request is sent.

The resolver (``services.artifacts``) decides what a call may read (principal, run,
conversation, expiry, origin) and refuses an artifact over the read's bound from its record,
before opening it. This module adds the seed's rules for a reference (D147): artifact.read granted,
PNG, JPEG or WebP by signature (the bytes decide, never a name or a recorded media type), at
most so many bytes each and, for images, all together. Reads run on a worker thread (a
checksum-verified read of up to 64 MiB should not stall the event loop) and stop at the
call's cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from toolhost import ArtifactReader, ArtifactUnavailable, ToolExecutionContext, ToolFailure
from toolhost_media.messages import (
    REFERENCE_SCOPE,
    REFERENCE_TOO_LARGE,
    REFERENCE_TYPE,
    REFERENCE_UNAVAILABLE,
    REFERENCES_TOO_LARGE,
)
from toolhost_media.provider import ReferenceImage

__all__ = ["READ_SCOPE", "image_type", "read_references", "repeated_at"]

#: Reading a reference reads an artifact: checked when references are given (not a required
#: scope of 1.1.0, so a text-only 1.1.0 call needs exactly what 1.0.0 needs).
READ_SCOPE = "artifact.read"


def image_type(head: bytes) -> str | None:
    """The media type ``head`` (an image's first bytes) is by signature, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def repeated_at(ids: Sequence[str]) -> int | None:
    """The position of the first id in ``ids`` that an earlier one already named, or None."""
    seen: set[str] = set()
    for position, artifact_id in enumerate(ids):
        if artifact_id in seen:
            return position
        seen.add(artifact_id)
    return None


def riff_size_ok(content: bytes) -> bool:
    """Whether a WebP's RIFF header states its length: the size field counts every byte after
    the first eight (a padding byte aside), so a truncated or padded-out file is refused."""
    stated = int.from_bytes(content[4:8], "little")
    return stated + 8 == len(content) or (stated % 2 == 1 and stated + 9 == len(content))


async def read_references(
    ids: Sequence[str],
    context: ToolExecutionContext,
    reader: ArtifactReader | None,
    *,
    each: int,
    total: int,
) -> tuple[ReferenceImage, ...]:
    """The references in order, each checked; a ``ToolFailure`` at the first that fails.

    ``each`` bounds one reference, ``total`` all of them: each read asks the resolver for at
    most what is left of both, so no read opens more than could still be accepted.
    """
    if not ids:
        return ()
    if READ_SCOPE not in context.scopes:
        raise ToolFailure(REFERENCE_SCOPE)
    if reader is None:  # a host always hands one; Services built by hand may not
        raise ToolFailure(REFERENCE_UNAVAILABLE, detail={"reason": "no_resolver"})
    references: list[ReferenceImage] = []
    left = total
    for position, artifact_id in enumerate(ids):
        bound = min(each, left)
        try:
            content = await asyncio.to_thread(reader.read, artifact_id, context, max_bytes=bound)
        except ArtifactUnavailable as refused:
            detail = {"position": position, "reason": refused.reason}
            if refused.reason != "too_large":
                raise ToolFailure(REFERENCE_UNAVAILABLE, detail=detail) from None
            raise ToolFailure(REFERENCE_TOO_LARGE if bound == each else REFERENCES_TOO_LARGE,
                              detail=detail) from None
        media_type = image_type(content[:12])
        if media_type is None or (media_type == "image/webp" and not riff_size_ok(content)):
            raise ToolFailure(REFERENCE_TYPE, detail={"position": position})
        references.append(ReferenceImage(media_type, content))
        left -= len(content)
    return tuple(references)
