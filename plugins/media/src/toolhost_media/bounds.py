"""The seed's bounds for image.generate and video.generate (D144-D150), in one place.

These are versioned capability bounds, not runtime tuning knobs: the input schemas state
them, and the body and the adapter enforce the ones a schema cannot (byte sizes, signatures).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DURATIONS",
    "FRAMES_PER_SECOND",
    "IMAGE_CAP",
    "IMAGE_REFERENCES",
    "IMAGE_REFERENCE_LIMIT",
    "IMAGE_REFERENCE_TOTAL",
    "IMAGE_SIZES",
    "MAX_PROMPT",
    "MAX_SEED",
    "NONBLANK_PATTERN",
    "REFERENCE_ID_PATTERN",
    "VIDEO_CAP",
    "VIDEO_REFERENCES",
    "VIDEO_REFERENCE_LIMIT",
    "VIDEO_SIZES",
    "is_blank",
]

MiB: Final = 1024 * 1024

MAX_PROMPT: Final = 8000
#: Characters that show nothing yet are not whitespace to Python: zero width space, word
#: joiner, byte order mark (ECMA-262 counts it as whitespace), Mongolian vowel separator.
_INVISIBLE: Final = "\u180e\u200b\u2060\ufeff"
#: A nonblank prompt has a character that is neither whitespace nor invisible.
NONBLANK_PATTERN: Final = f"[^\\s{_INVISIBLE}]"


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: whitespace and invisible characters only."""
    return all(c.isspace() or c in _INVISIBLE for c in text)
MAX_SEED: Final = 2147483647

#: The first is the default.
IMAGE_SIZES: Final = (
    "1024x1024", "2048x1152", "1152x2048", "2496x1664", "1664x2496", "1504x2720",
    "2720x1504", "1824x2272", "2272x1824", "2048x2048", "1312x3136", "3136x1312",
)
VIDEO_SIZES: Final = ("1280x768", "768x1280", "1920x1088", "1088x1920", "576x1024")
#: video duration_seconds; the first is the default.
DURATIONS: Final = (5, 10)
#: LTX-2.5's frame rate: the last reference frame's index is duration_seconds * 24.
FRAMES_PER_SECOND: Final = 24

#: A generated stream's cap, enforced as its bytes arrive (below the store's own ceiling).
IMAGE_CAP: Final = 32 * MiB
VIDEO_CAP: Final = 256 * MiB

#: 1.1.0 references: how many, and the bytes each (and, for images, all together) may hold.
IMAGE_REFERENCES: Final = 8
IMAGE_REFERENCE_LIMIT: Final = 20 * MiB
IMAGE_REFERENCE_TOTAL: Final = 64 * MiB
VIDEO_REFERENCES: Final = 2
VIDEO_REFERENCE_LIMIT: Final = 10 * MiB

#: An artifact id as the host makes them: a UUID4 in hex form (32 lowercase hex digits).
REFERENCE_ID_PATTERN: Final = "^[0-9a-f]{32}$"
