"""Artifacts as values: origins, the small ref a result carries, the full record, a new
artifact on its way into the store, errors.

The port is ``toolhost._ports.artifacts``; the SQLite store ``toolhost._adapters.sqlite_artifacts``;
the run-bound writer and the conversation-scoped resolver ``toolhost._pipeline.artifacts``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from typing import Any, ClassVar

import attrs

from toolhost._model.errors import ToolhostError
from toolhost._model.spec import Trust

__all__ = [
    "ARTIFACT_CEILING",
    "MAX_ATTACHED_BYTES",
    "ArtifactCorrupted",
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactOrigin",
    "ArtifactRecord",
    "ArtifactRef",
    "ArtifactStoreUnavailable",
    "ArtifactTooLarge",
    "ArtifactUnavailable",
    "NewArtifact",
    "PurgeReport",
    "as_utc",
    "as_utc_or_none",
]

ARTIFACT_CEILING = 512 * 1024 * 1024
#: The largest file a client fetches whole from a reply: one MCP ``resources/read`` carries it
#: as ~43 MiB of base64 in one JSON-RPC message (D223). A file past it is stored, and the
#: operator's ``toolhost artifacts get`` streams it, but it is not attached (D364).
MAX_ATTACHED_BYTES = 32 * 1024 * 1024

_UTC = _dt.UTC
_CHECKSUM = re.compile(r"^sha256:[0-9a-f]{64}$")
# type "/" subtype, optionally followed by parameters; deliberately loose (RFC 6838 tokens).
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;.*)?$")


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class ArtifactError(ToolhostError):
    """Base class of every artifact store failure."""


class ArtifactNotFound(ArtifactError, LookupError):
    """No artifact has this id."""

    def __init__(self, artifact_id: str) -> None:
        super().__init__(f"no artifact with id {artifact_id!r}")
        self.artifact_id = artifact_id


class ArtifactCorrupted(ArtifactError):
    """The stored content no longer matches its metadata (changed, truncated or missing).

    Raised instead of returning bytes: a reader never receives content that differs from what
    was written. ``reason`` is operator detail; it never contains the content itself.
    """

    def __init__(self, artifact_id: str, reason: str) -> None:
        super().__init__(f"artifact {artifact_id!r} is corrupted: {reason}")
        self.artifact_id = artifact_id
        self.reason = reason


class ArtifactStoreUnavailable(ArtifactError):
    """The store's backend did not serve a request: an object store unreachable, refusing or
    failing. Not the caller's fault and not the artifact's; a retry may succeed, and nothing
    was published. The message is one line for operators and never holds a credential."""


class ArtifactTooLarge(ArtifactError, ValueError):
    """The content is larger than the bound in force; nothing was stored.

    The bound is ``ARTIFACT_CEILING`` for ``put``, and the lower of that and the stream's
    ``max_bytes`` for a streamed upload (which is aborted by the write that crossed it).
    """

    def __init__(self, size: int, ceiling: int) -> None:
        super().__init__(f"artifact of {size} bytes exceeds the ceiling of {ceiling} bytes")
        self.size = size
        self.ceiling = ceiling


class ArtifactUnavailable(ArtifactError):
    """The resolver refused an artifact: it does not exist for this caller, or may not be read.

    One type for every refusal, so a caller cannot tell the model (or branch on) "exists but is
    not yours" apart from "does not exist"; the model only ever sees a static message. ``reason``
    is one of ``REASONS`` and is operator detail, for logs and the invocation row.
    """

    REASONS: ClassVar[frozenset[str]] = frozenset({
        "not_found",  # no artifact has this id
        "foreign_principal",  # it belongs to another principal (or to none)
        "other_conversation",  # the caller has a conversation and it is not the artifact's
        "other_run",  # the caller has no conversation and the artifact is not its run's
        "expired",  # not live at the resolver's clock
        "ineligible_origin",  # a captured tool output: never referenceable
        "unclaimed_upload",  # an upload the user has not sent yet
        "too_large",  # larger than the read's bound
        "corrupted",  # its stored bytes no longer match its checksum (an operator's alarm)
        "damaged_record",  # its record cannot be read (D252): whose it is cannot be known
    })

    def __init__(self, artifact_id: str, reason: str) -> None:
        if reason not in self.REASONS:
            raise ValueError(f"unknown unavailability reason {reason!r}")
        super().__init__(f"artifact {artifact_id!r} is unavailable: {reason}")
        self.artifact_id = artifact_id
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------


class ArtifactOrigin(enum.Enum):
    """How an artifact came to exist."""

    TOOL_OUTPUT_CAPTURE = "TOOL_OUTPUT_CAPTURE"  # the pipeline's step 12 captured a tool output
    EXPORT = "EXPORT"  # a tool exported something for the user
    MODEL_OUTPUT = "MODEL_OUTPUT"  # the model produced it
    UPLOAD = "UPLOAD"  # the user supplied it


def as_utc(value: _dt.datetime) -> _dt.datetime:
    # A naive datetime would smuggle the process's local zone in; refuse it like the Clock does.
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("artifact timestamps must be aware datetimes; got a naive one")
    return value.astimezone(_UTC)


def as_utc_or_none(value: _dt.datetime | None) -> _dt.datetime | None:
    return None if value is None else as_utc(value)


def _check_checksum(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not _CHECKSUM.fullmatch(value):
        raise ValueError(f"{attribute.name} must be 'sha256:' + 64 lowercase hex digits")


def _check_size(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative int")


def _nonempty_str(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string")


@attrs.frozen(kw_only=True)
class ArtifactRef:
    """The small handle a tool result or an excerpt marker carries instead of the content.

    ``to_json()`` is the ref as a tool's structured result shows it, and ``json_schema()`` the
    closed schema of that object, so every tool that returns a ref (artifact.export, the media
    tools) states and fills it the same way.
    """

    id: str = attrs.field(validator=_nonempty_str)
    name: str = attrs.field(validator=_nonempty_str)
    media_type: str = attrs.field(validator=_nonempty_str)
    byte_count: int = attrs.field(validator=_check_size)
    checksum: str = attrs.field(validator=_check_checksum)

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The closed JSON schema of ``to_json()``'s object (a new dict each time)."""
        return {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "media_type": {"type": "string"},
                "byte_count": {"type": "integer"},
                "checksum": {"type": "string"},
            },
            "required": ["id", "name", "media_type", "byte_count", "checksum"],
            "additionalProperties": False,
        }

    def to_json(self) -> dict[str, Any]:
        """``{id, name, media_type, byte_count, checksum}``, as ``json_schema()`` states it."""
        return {"id": self.id, "name": self.name, "media_type": self.media_type,
                "byte_count": self.byte_count, "checksum": self.checksum}

    def attachment_note(self) -> str:
        """What a tool's text says of a file it stored for the person: ``It is attached to
        your reply.``, or, past ``MAX_ATTACHED_BYTES``, that no client can open it from the
        reply and how the person gets it instead (D364)."""
        if self.byte_count > MAX_ATTACHED_BYTES:
            return (f"It is too large to attach to your reply (over 32 MiB): it is stored as "
                    f"artifact {self.id}, which the person can ask the host's operator for "
                    f"(toolhost artifacts get {self.id}).")
        return "It is attached to your reply."


@attrs.frozen(kw_only=True)
class ArtifactRecord:
    """Everything the store knows about one artifact. Timestamps are aware UTC.

    ``expires_at`` of None means the artifact never expires. Expiry only decides liveness (the
    identity rule and the resolver ignore expired artifacts); it does not delete content.
    ``principal_id`` is who the writing run acted for (None when the writer was not told).
    ``claimed`` is False only for an upload the user has not sent yet; the resolver refuses
    such an upload until ``ArtifactStore.claim``.
    """

    id: str = attrs.field(validator=_nonempty_str)
    run_id: str = attrs.field(validator=_nonempty_str)
    conversation_id: str | None = attrs.field(
        validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    origin: ArtifactOrigin = attrs.field(validator=attrs.validators.instance_of(ArtifactOrigin))
    name: str = attrs.field(validator=_nonempty_str)
    media_type: str = attrs.field(validator=_nonempty_str)
    size: int = attrs.field(validator=_check_size)
    checksum: str = attrs.field(validator=_check_checksum)
    trust: Trust = attrs.field(validator=attrs.validators.instance_of(Trust))
    created_at: _dt.datetime = attrs.field(converter=as_utc)
    expires_at: _dt.datetime | None = attrs.field(default=None, converter=as_utc_or_none)
    principal_id: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    claimed: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))

    @property
    def ref(self) -> ArtifactRef:
        """The handle to give out for this artifact."""
        return ArtifactRef(
            id=self.id,
            name=self.name,
            media_type=self.media_type,
            byte_count=self.size,
            checksum=self.checksum,
        )


    def live_at(self, now: _dt.datetime) -> bool:
        """Whether the artifact is live at ``now``: never expiring, or expiring after ``now``.

        An artifact whose ``expires_at`` equals ``now`` is already expired.
        """
        return self.expires_at is None or self.expires_at > as_utc(now)


@attrs.frozen(kw_only=True)
class NewArtifact:
    """Everything about an artifact to be stored except its content: what ``ArtifactStore``'s
    ``put``, ``put_or_reuse`` and ``begin`` take, as one value.

    Checked when made (so a store never sees an unchecked one): ``TypeError`` for an origin or
    trust that is not the enum or a ``claimed`` that is not a bool, ``ValueError`` for an
    empty run, name, conversation or principal id or a malformed media type, and what
    ``as_utc`` raises for an ``expires_at`` that is not an aware datetime (kept as UTC).
    Whether ``expires_at`` is after the creation instant is ``record``'s to check: the
    instant is the store's. ``claimed=False`` is an upload the user has not sent yet.
    """

    run_id: str
    origin: ArtifactOrigin
    name: str
    media_type: str
    trust: Trust
    conversation_id: str | None = None
    principal_id: str | None = None
    claimed: bool = True
    expires_at: _dt.datetime | None = attrs.field(default=None, converter=as_utc_or_none)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.origin, ArtifactOrigin):
            raise TypeError(f"origin must be an ArtifactOrigin, got {self.origin!r}")
        if not isinstance(self.trust, Trust):
            raise TypeError(f"trust must be a Trust, got {self.trust!r}")
        if not isinstance(self.claimed, bool):
            raise TypeError(f"claimed must be a bool, got {self.claimed!r}")
        for label, value in (("run_id", self.run_id), ("name", self.name)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{label} must be a non-empty string")
        for label, optional in (("conversation_id", self.conversation_id),
                                ("principal_id", self.principal_id)):
            if optional is not None and (not isinstance(optional, str) or not optional):
                raise ValueError(f"{label} must be None or a non-empty string")
        if not isinstance(self.media_type, str) or not _MEDIA_TYPE.fullmatch(self.media_type):
            raise ValueError(
                f"media_type must look like 'type/subtype', got {self.media_type!r}")

    def record(self, artifact_id: str, size: int, checksum: str,
               created_at: _dt.datetime) -> ArtifactRecord:
        """The record of this artifact with its content's ``size`` and ``checksum``.

        :raises ValueError: ``expires_at`` is not after ``created_at``.
        """
        if self.expires_at is not None and self.expires_at <= created_at:
            raise ValueError("expires_at must be after the artifact's creation instant")
        return ArtifactRecord(
            id=artifact_id, run_id=self.run_id, conversation_id=self.conversation_id,
            origin=self.origin, name=self.name, media_type=self.media_type, size=size,
            checksum=checksum, trust=self.trust, created_at=created_at,
            expires_at=self.expires_at, principal_id=self.principal_id, claimed=self.claimed,
        )


@attrs.frozen(kw_only=True)
class PurgeReport:
    """What one ``ArtifactStore.purge`` removed."""

    #: Expired artifacts (records) removed.
    artifacts: int
    #: The sum of their sizes (content shared with a kept artifact counts too).
    artifact_bytes: int
    #: Content objects removed because no remaining artifact referenced them.
    content_files: int
    #: Stale staged uploads removed (a process died before commit or abort).
    staged_uploads: int
    #: Bytes of storage released: the content objects' and the staged uploads'.
    freed_bytes: int
