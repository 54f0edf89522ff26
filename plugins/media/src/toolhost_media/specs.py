"""The four ToolSpecs: image.generate and video.generate at 1.0.0 and 1.1.0 (D144-D146).

Classification exactly as the seed says: EXTERNAL_WRITE, HIGH, NON_IDEMPOTENT,
EXTERNAL_UNTRUSTED, ``media.generate`` and ``artifact.write``, not parallel, 1,800 s and
7,200 s, 4,096 bytes of result. Closed input schemas carry every bound the seed states; 1.1.0
adds ``reference_image_ids`` (artifact ids only, never URLs, paths or bytes). artifact.read is
not a required scope of 1.1.0: it is checked when references are given (``references``).
"""

from __future__ import annotations

from typing import Any

from toolhost import (
    ArtifactRef,
    Idempotency,
    Risk,
    SideEffect,
    ToolSpec,
    Trust,
)
from toolhost_media.bounds import (
    DURATIONS,
    IMAGE_REFERENCES,
    IMAGE_SIZES,
    MAX_PROMPT,
    MAX_SEED,
    NONBLANK_PATTERN,
    REFERENCE_ID_PATTERN,
    VIDEO_REFERENCES,
    VIDEO_SIZES,
)

__all__ = [
    "IMAGE_V1",
    "IMAGE_V2",
    "OUTPUT_SCHEMA",
    "SCOPES",
    "VIDEO_V1",
    "VIDEO_V2",
    "input_schema",
]

SCOPES = ("media.generate", "artifact.write")

_PROMPT = {
    "type": "string", "minLength": 1, "maxLength": MAX_PROMPT,
    # Nonblank: at least one character that is neither whitespace nor invisible. Spelled out,
    # because JSON Schema patterns are ECMA-262 (U+FEFF is whitespace there) and the host
    # validates with Python's re (it is not): both readings must refuse the same prompts.
    "pattern": NONBLANK_PATTERN,
    "description": "What to generate: at most 8000 characters.",
}
_SEED = {
    "type": "integer", "minimum": 0, "maximum": MAX_SEED,
    "description": "Optional seed (0 to 2147483647) to make a generation repeatable.",
}


def _references(limit: int, text: str) -> dict[str, Any]:
    return {
        "type": "array", "maxItems": limit, "description": text,
        "items": {"type": "string", "pattern": REFERENCE_ID_PATTERN},
    }


def input_schema(kind: str, *, references: bool) -> dict[str, Any]:
    """The closed input schema of ``kind`` ("image" or "video"), with or without 1.1.0's
    ``reference_image_ids``."""
    properties: dict[str, Any] = {"prompt": _PROMPT}
    if kind == "image":
        properties["size"] = {"type": "string", "enum": list(IMAGE_SIZES),
                              "default": IMAGE_SIZES[0], "description": "Width x height."}
    else:
        properties["size"] = {"type": "string", "enum": list(VIDEO_SIZES),
                              "default": VIDEO_SIZES[0], "description": "Width x height."}
        properties["duration_seconds"] = {"type": "integer", "enum": list(DURATIONS),
                                          "default": DURATIONS[0],
                                          "description": "Length: 5 or 10 seconds."}
    properties["seed"] = _SEED
    if references:
        properties["reference_image_ids"] = (
            _references(IMAGE_REFERENCES, "Up to 8 artifact ids of images to edit from, in "
                        "order (PNG, JPEG or WebP; 20 MiB each, 64 MiB together).")
            if kind == "image" else
            _references(VIDEO_REFERENCES, "The artifact id of the first frame, then "
                        "optionally of the last (PNG, JPEG or WebP; 10 MiB each).")
        )
    return {
        "type": "object", "properties": properties, "required": ["prompt"],
        "additionalProperties": False,
    }


#: The result: the artifact's reference and whether a client can open it from the reply (at
#: most toolhost.MAX_ATTACHED_BYTES; a larger video is stored only: D409), nothing else.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"artifact": ArtifactRef.json_schema(),
                   "attached": {"type": "boolean"}},
    "required": ["artifact", "attached"],
    "additionalProperties": False,
}

_CHARGED = (" Each call needs the user's approval and may be charged: do not repeat a call "
            "that failed after it was sent without asking the user.")
_IMAGE_TEXT = (
    "Generate one PNG image from a text prompt. size is one of " + ", ".join(IMAGE_SIZES)
    + " (default 1024x1024); seed makes a generation repeatable. The image is saved as an "
    "artifact and attached to your reply." + _CHARGED
)
# A video past toolhost.MAX_ATTACHED_BYTES is not attached (D364): the text says so.
_VIDEO_TEXT = (
    "Generate one MP4 video from a text prompt. size is one of " + ", ".join(VIDEO_SIZES)
    + " (default 1280x768); duration_seconds is 5 (default) or 10; seed makes a generation "
    "repeatable. The video is saved as an artifact and attached to your reply when it is at "
    "most 32 MiB; a larger one is stored, and the result says how the person can get it."
    + _CHARGED
)
_IMAGE_REFS = (
    " reference_image_ids: up to 8 artifact ids of images of this conversation (the user's "
    "uploads, or files generated or exported in it) to edit from, in order; PNG, JPEG or WebP."
)
_VIDEO_REFS = (
    " reference_image_ids: the artifact id of the first frame, then optionally of the last, "
    "from this conversation; PNG, JPEG or WebP."
)


def _spec(name: str, version: str, description: str, schema: dict[str, Any],
          timeout_s: int) -> ToolSpec:
    return ToolSpec.builtin(
        name=name,
        version=version,
        description=description,
        input_schema=schema,
        output_schema=OUTPUT_SCHEMA,
        side_effect=SideEffect.EXTERNAL_WRITE,
        risk=Risk.HIGH,
        idempotency=Idempotency.NON_IDEMPOTENT,
        output_trust=Trust.EXTERNAL_UNTRUSTED,
        required_scopes=SCOPES,
        timeout_s=timeout_s,
        maximum_output_bytes=4096,
    )


IMAGE_V1 = _spec("image.generate", "1.0.0", _IMAGE_TEXT,
                 input_schema("image", references=False), 1800)
IMAGE_V2 = _spec("image.generate", "1.1.0", _IMAGE_TEXT + _IMAGE_REFS,
                 input_schema("image", references=True), 1800)
VIDEO_V1 = _spec("video.generate", "1.0.0", _VIDEO_TEXT,
                 input_schema("video", references=False), 7200)
VIDEO_V2 = _spec("video.generate", "1.1.0", _VIDEO_TEXT + _VIDEO_REFS,
                 input_schema("video", references=True), 7200)
