"""The reasons image.generate and video.generate may end with, each with its static message.

Messages carry the remedy and never the input, the provider's response or the credential.
Every failure after the request may have reached TensorScale (a timeout, a dropped
connection, a 5xx, an unusable answer, a stream past its cap) is not retryable and says the
request may have been charged: the provider bills a generation it started, and the seed
forbids a blind retry (D137, D146). An executor deadline is the host's own
``tool.timeout.deadline_may_have_taken_effect`` (every NON_IDEMPOTENT tool gets it), which
warns the same way; a run cancellation is the host's ``tool.cancelled.run_cancelled``.

One code, one message across both tools, so a message that differs by tool (the caps) names
both values.
"""

from __future__ import annotations

from toolhost import Reason, SchemaRule

__all__ = [
    "BLANK_PROMPT",
    "CONNECTION_LOST",
    "DUPLICATE_REFERENCE",
    "INVALID_RESPONSE",
    "MESSAGES",
    "NOT_CONFIGURED",
    "PROMPT_TOO_LONG",
    "PROVIDER_FAILED",
    "PROVIDER_REJECTED",
    "PROVIDER_TIMEOUT",
    "PROVIDER_UNREACHABLE",
    "REFERENCES_TOO_LARGE",
    "REFERENCE_SCOPE",
    "REFERENCE_TOO_LARGE",
    "REFERENCE_TYPE",
    "REFERENCE_UNAVAILABLE",
    "RETRYABLE",
    "STREAM_OVER_CAP",
    "TOO_MANY_REFERENCES",
    "reasons",
]

# Arguments (step 4 maps the schema's prompt rules to these; the body checks them again).
BLANK_PROMPT = "tool.invalid_arguments.blank_prompt"
PROMPT_TOO_LONG = "tool.invalid_arguments.prompt_too_long"
# 1.1.0 references, all checked before any request is sent.
TOO_MANY_REFERENCES = "tool.invalid_arguments.too_many_references"
DUPLICATE_REFERENCE = "tool.invalid_arguments.duplicate_reference"
REFERENCE_SCOPE = "tool.permission_denied.reference_scope"
REFERENCE_UNAVAILABLE = "tool.not_found.reference_unavailable"
REFERENCE_TYPE = "tool.invalid_arguments.reference_type"
REFERENCE_TOO_LARGE = "tool.invalid_arguments.reference_too_large"
REFERENCES_TOO_LARGE = "tool.invalid_arguments.references_too_large"
# The provider.
NOT_CONFIGURED = "tool.upstream_unavailable.provider_not_configured"
PROVIDER_UNREACHABLE = "tool.upstream_unavailable.provider_unreachable"
PROVIDER_REJECTED = "tool.upstream_rejected.provider_rejected"
PROVIDER_FAILED = "tool.upstream_unavailable.provider_failed"
PROVIDER_TIMEOUT = "tool.timeout.provider_timeout"
CONNECTION_LOST = "tool.upstream_unavailable.connection_lost"
INVALID_RESPONSE = "tool.output_invalid.invalid_response"
STREAM_OVER_CAP = "tool.output_too_large.stream_over_cap"

_CHARGED = ("The request may already have been charged: do not retry it blindly; ask the user "
            "how to proceed.")

MESSAGES: dict[str, str] = {
    BLANK_PROMPT: "prompt must contain text, not only whitespace.",
    PROMPT_TOO_LONG: "prompt is longer than 8000 characters. Shorten it.",
    TOO_MANY_REFERENCES: "Too many reference_image_ids: image.generate takes at most 8, "
    "video.generate at most 2 (the first frame, then the last).",
    DUPLICATE_REFERENCE: "reference_image_ids names the same image more than once: give "
    "image.generate each image's id once. Nothing was generated.",
    REFERENCE_SCOPE: "Reading reference images needs the artifact.read scope, which this run is "
    "not granted. Omit reference_image_ids, or ask the user for that access.",
    REFERENCE_UNAVAILABLE: "A reference image is not available: use the id of an image the user "
    "sent or a file generated or exported in this conversation. Nothing was generated.",
    REFERENCE_TYPE: "A reference is not a PNG, JPEG or WebP image. Nothing was generated.",
    REFERENCE_TOO_LARGE: "A reference image is too large: at most 20 MiB each for "
    "image.generate, 10 MiB each for video.generate. Nothing was generated.",
    REFERENCES_TOO_LARGE: "The reference images together are larger than the 64 MiB "
    "image.generate accepts. Use fewer or smaller images. Nothing was generated.",
    NOT_CONFIGURED: "Media generation is not configured correctly on this host, so nothing was "
    "sent. Tell the operator; do not retry.",
    PROVIDER_UNREACHABLE: "The media provider could not be reached, so nothing was sent. Try "
    "again later.",
    PROVIDER_REJECTED: "The media provider refused this request (its content, or this host's "
    "account). Do not retry it unchanged; ask the user how to proceed.",
    PROVIDER_FAILED: f"The media provider failed to generate the file. {_CHARGED}",
    PROVIDER_TIMEOUT: f"The media provider did not finish in time. {_CHARGED}",
    CONNECTION_LOST: f"The connection to the media provider broke during the request. {_CHARGED}",
    INVALID_RESPONSE: "The media provider's answer was not the PNG or MP4 file it should be, so "
    f"nothing was saved. {_CHARGED}",
    STREAM_OVER_CAP: "The generated file was larger than the 32 MiB an image (256 MiB a video) "
    f"may be, so nothing was saved. {_CHARGED}",
}

#: The one failure a caller may simply try again: nothing reached the provider.
RETRYABLE = frozenset({PROVIDER_UNREACHABLE})


_ARGUMENTS = Reason.from_table(MESSAGES, BLANK_PROMPT, PROMPT_TOO_LONG, schema_rules={
    BLANK_PROMPT: [SchemaRule("/prompt", "minLength"), SchemaRule("/prompt", "pattern")],
    PROMPT_TOO_LONG: [SchemaRule("/prompt", "maxLength")],
})
_PROVIDER = Reason.from_table(
    MESSAGES, NOT_CONFIGURED, PROVIDER_UNREACHABLE, PROVIDER_REJECTED, PROVIDER_FAILED,
    PROVIDER_TIMEOUT, CONNECTION_LOST, INVALID_RESPONSE, STREAM_OVER_CAP,
)


def reasons(*, references: bool, distinct: bool = False) -> tuple[Reason, ...]:
    """What one version declares: 1.0.0's, plus the reference reasons for 1.1.0; with
    ``distinct``, references named twice are refused too (image.generate's)."""
    if not references:
        return (*_ARGUMENTS, *_PROVIDER)
    return (
        *_ARGUMENTS,
        *Reason.from_table(
            MESSAGES, TOO_MANY_REFERENCES, *((DUPLICATE_REFERENCE,) if distinct else ()),
            REFERENCE_SCOPE, REFERENCE_UNAVAILABLE, REFERENCE_TYPE,
            REFERENCE_TOO_LARGE, REFERENCES_TOO_LARGE,
            schema_rules={TOO_MANY_REFERENCES: [SchemaRule("/reference_image_ids", "maxItems")]},
        ),
        *_PROVIDER,
    )
