"""Files to the client: a run's artifacts as MCP resources.

When: a result carries files (``artifact.export``, ``image.generate``, ``video.generate``),
and when the client lists or reads resources. What: every file a call exported or generated is
a ``resource_link`` in its result, ``toolhost://artifacts/<id>`` with its name (its id when
the file name rule refuses the name: a person saves the file under it), media type and size;
``resources/list`` lists the session run's attachments in the order the run made them;
``resources/read`` returns one artifact's exact bytes (base64, as a blob: no charset can change
them) after the resolver's checks, the ones a tool's reference gets: the caller's principal,
its conversation (or run, outside one), expiry, an eligible origin (never a captured tool
output) and, as the bytes are read, their size and sha256.

Why a bound: a ``resources/read`` answer is one JSON-RPC message, so its bytes are in memory
as base64 text. Content is read from the store in chunks, each verified as it comes, and
encoded as it arrives; an artifact over ``MAX_RESOURCE_BYTES`` is refused from its record,
never opened (a video can be 256 MiB: ``toolhost artifacts get`` streams those).

A refusal is the protocol's error with a static message: ``-32002`` (resource not found) for
every reason an artifact is not this session's to read, so nobody can tell "exists but not
yours" from "does not exist"; the reason is in the server's log for the operator.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Iterable, Mapping
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError

from toolhost import MAX_ATTACHED_BYTES, ArtifactRef, ArtifactUnavailable, file_name_problem
from toolhost._composition import (
    ATTACHED_ORIGINS,
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    Host,
    Run,
    get_logger,
)

__all__ = [
    "ARTIFACT_URI_PREFIX",
    "MAX_RESOURCE_BYTES",
    "RESOURCE_NOT_FOUND",
    "RunResources",
    "artifact_uri",
    "handed_over_name",
    "resource_link",
]

ARTIFACT_URI_PREFIX = "toolhost://artifacts/"
#: The largest artifact one ``resources/read`` carries (as ~43 MiB of base64): the image
#: tools' own bound, and what a tool's text says is attached (``ArtifactRef.attachment_note``).
MAX_RESOURCE_BYTES = MAX_ATTACHED_BYTES
#: MCP's error code for a resource that does not exist (or, here, is not the caller's).
RESOURCE_NOT_FOUND = -32002

NOT_AVAILABLE = "No file with that URI is available to this session."
TOO_LARGE = ("That file is larger than a resource read carries (32 MiB). The operator can "
             "fetch it with toolhost artifacts get.")
DAMAGED = "That file's stored bytes no longer match their checksum, so they were not sent."
STORE_DOWN = "The file store cannot be reached right now. Try again later."
FAILED = "The server could not read that file."

#: Chunks read (and encoded) at a time: a multiple of 3, so each encodes without padding.
_CHUNK = 3 * 256 * 1024
_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def artifact_uri(artifact_id: str) -> str:
    return f"{ARTIFACT_URI_PREFIX}{artifact_id}"


def handed_over_name(name: str, artifact_id: str) -> str:
    """The name a stored file is handed to a person under (a resource's, the inbox's
    download): its own when the file name rule allows it, else its id. A record may hold a
    name the rule refuses (stored before the rule, or by a plugin that never asked); the id
    has no extension, so it claims no type."""
    return name if file_name_problem(name) is None else artifact_id


def resource_link(ref: Mapping[str, Any]) -> types.ResourceLink:
    """The ``resource_link`` content block of one attached file (its ``ArtifactRef`` JSON)."""
    artifact_id = str(ref["id"])
    return types.ResourceLink(
        type="resource_link", uri=artifact_uri(artifact_id),
        name=handed_over_name(str(ref["name"]), artifact_id),
        mime_type=str(ref["media_type"]), size=int(ref["byte_count"]),
    )


def _resource(ref: ArtifactRef) -> types.Resource:
    return types.Resource(uri=artifact_uri(ref.id), name=handed_over_name(ref.name, ref.id),
                          mime_type=ref.media_type, size=ref.byte_count)


def _artifact_id(uri: str) -> str | None:
    if not uri.startswith(ARTIFACT_URI_PREFIX):
        return None
    artifact_id = uri[len(ARTIFACT_URI_PREFIX):]
    return artifact_id if _ID.fullmatch(artifact_id) else None


class RunResources:
    """``resources/list`` and ``resources/read`` for the runs of one server's sessions."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._resolver = host.artifact_resolver()

    async def list(self, run: Run) -> types.ListResourcesResult:
        """The run's attachments still live, in the order the run made them, one page (an
        expired one is not listed: it could not be read)."""
        refs: Iterable[ArtifactRef] = await asyncio.to_thread(self._live_attachments, run)
        return types.ListResourcesResult(resources=[_resource(ref) for ref in refs])

    def _live_attachments(self, run: Run) -> tuple[ArtifactRef, ...]:
        now = self._host.clock.now()
        return tuple(record.ref for record in self._host.artifacts.list_run(run.id)
                     if record.origin in ATTACHED_ORIGINS and record.live_at(now))

    async def read(self, run: Run, uri: str) -> types.ReadResourceResult:
        """One artifact's exact bytes, if ``run``'s caller may read it.

        :raises MCPError: ``RESOURCE_NOT_FOUND`` with a static message for every refusal.
        """
        artifact_id = _artifact_id(uri)
        log = get_logger(run_id=run.id, artifact_id=artifact_id)
        if artifact_id is None:
            log.info("mcp.resource.refused", reason="not_an_artifact_uri")
            raise MCPError(code=RESOURCE_NOT_FOUND, message=NOT_AVAILABLE, data={"uri": uri})
        try:
            blob, record = await asyncio.to_thread(self._read, run, artifact_id)
        except ArtifactUnavailable as refused:
            log.info("mcp.resource.refused", reason=refused.reason)
            message = TOO_LARGE if refused.reason == "too_large" else (
                DAMAGED if refused.reason == "corrupted" else NOT_AVAILABLE)
            raise MCPError(code=RESOURCE_NOT_FOUND if refused.reason != "corrupted"
                           else types.INTERNAL_ERROR, message=message,
                           data={"uri": uri}) from None
        except ArtifactError as exc:  # the store itself (an object store unreachable)
            log.warning("mcp.resource.store_failed", error=type(exc).__name__)
            raise MCPError(code=types.INTERNAL_ERROR, message=STORE_DOWN,
                           data={"uri": uri}) from None
        except Exception as exc:  # never the exception's text: the operator reads it here
            log.error("mcp.resource.failed", exception=type(exc).__name__, error=str(exc))
            raise MCPError(code=types.INTERNAL_ERROR, message=FAILED, data={"uri": uri}) from None
        return types.ReadResourceResult(contents=[types.BlobResourceContents(
            uri=uri, mime_type=record.media_type, blob=blob)])

    def _read(self, run: Run, artifact_id: str) -> tuple[str, Any]:
        """The resolver's checks, then the content, verified chunk by chunk and encoded as it
        comes (on a worker thread: the store's reads block)."""
        # A damaged record (D252) cannot say whose the file is: the resolver answers it as
        # any file that is not the session's, never as the store being away.
        record = self._resolver.resolve(
            artifact_id, principal_id=run.principal.id, run_id=run.id,
            conversation_id=run.conversation_id)
        if record.size > MAX_RESOURCE_BYTES:
            raise ArtifactUnavailable(record.id, "too_large")
        encoded: list[bytes] = []
        try:
            with self._host.artifacts.read_chunks(record.id, _CHUNK) as chunks:
                # Every chunk but the last is a multiple of 3 bytes: the pieces join into one
                # valid base64 text.
                encoded.extend(base64.b64encode(chunk) for chunk in chunks)
        except ArtifactCorrupted:  # the store said "not found" for content purged meanwhile
            raise ArtifactUnavailable(record.id, "corrupted") from None
        except ArtifactNotFound:  # removed since the resolver read its record
            raise ArtifactUnavailable(record.id, "not_found") from None
        return b"".join(encoded).decode("ascii"), record
