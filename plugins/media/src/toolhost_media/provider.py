"""The ``MediaGenerationProvider`` port: a typed request in, the generated file's bytes out,
and a close lifecycle.

A provider validates what it streams (status, media type, a non-empty body with the right
signature, an end it can tell from a lost connection) and enforces the request's cap as bytes
arrive; every failure is a
``ToolFailure`` with one of ``messages``' provider codes and operator-only detail that never
holds the provider's response text or a credential. Reference bytes travel in the request
as bytes: encoding them for the wire (TensorScale wants data URIs) is the adapter's business,
so no argument, event, row or result ever holds them.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol

import attrs

from toolhost_media.bounds import IMAGE_CAP, VIDEO_CAP

__all__ = [
    "GenerationRequest",
    "ImageRequest",
    "MediaGenerationProvider",
    "ReferenceImage",
    "VideoRequest",
]


@attrs.frozen
class ReferenceImage:
    """One reference, already read and checked: its media type (from its signature) and bytes."""

    media_type: str
    content: bytes = attrs.field(repr=lambda c: f"<{len(c)} bytes>")


@attrs.frozen(kw_only=True)
class ImageRequest:
    """One image: text-only, or an edit of ``references`` (in order) when there are any."""

    prompt: str
    size: str
    seed: int | None = None
    references: tuple[ReferenceImage, ...] = ()

    media_type = "image/png"
    cap = IMAGE_CAP


@attrs.frozen(kw_only=True)
class VideoRequest:
    """One video; ``references`` are the first frame, then optionally the last."""

    prompt: str
    size: str
    duration_seconds: int
    seed: int | None = None
    references: tuple[ReferenceImage, ...] = ()

    media_type = "video/mp4"
    cap = VIDEO_CAP


GenerationRequest = ImageRequest | VideoRequest


class MediaGenerationProvider(Protocol):
    """Generates one file per request. Use it as ``with``; ``close`` releases it.

    ``stream`` is read on a thread of its own (``generate.save``), so a provider may block
    in it; ``interrupt`` is called from another thread when the call is cancelled and must
    make a blocked read return soon. ``expected_bytes`` is the size the provider declared for
    the file being streamed (its Content-Length), known once the first bytes are handed out;
    None when it declared none. It is only a hint for progress: the cap bounds the stream.
    """

    expected_bytes: int | None

    def stream(self, request: GenerationRequest) -> Generator[bytes, None, None]:
        """The generated file's bytes, checked while they arrive (at most ``request.cap``).
        Closing the iterator early (``contextlib.closing``) closes the in-flight response.
        """
        ...

    def interrupt(self) -> None:
        """From any thread: the stream under way stops soon, failing; nothing it read is
        handed out after."""
        ...

    def close(self) -> None:
        """Release the provider's connections."""
        ...

    def __enter__(self) -> MediaGenerationProvider: ...

    def __exit__(self, *exc: object) -> None: ...
