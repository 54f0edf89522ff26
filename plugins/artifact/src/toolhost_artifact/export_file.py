"""Exporting one workspace file: its bytes streamed from the Workspace port into the run's
artifacts, bounded by ``EXPORT_CEILING``, at the trust its provenance earns.

The path goes to ``context.workspace`` exactly as the model wrote it: this module resolves,
joins and opens nothing, and never catches ``WorkspaceEscape`` (pipeline step 9 turns a refused
path into the host's one validation failure, as for the workspace tools).

Trust follows the bytes. A file this run's tools wrote (TOOL_WRITTEN) exports as INTERNAL_TOOL,
anything else as EXTERNAL_UNTRUSTED. Provenance is asked of the path before the read (to pick
the stream's trust) and of the descriptor actually read after it (before the commit): a file
replaced or changed while it was read, or read through a directory swapped in for the read,
is not the run's file and must not keep the higher trust. A stream's trust is fixed when it
begins, so that case aborts the stream (nothing published) and exports again at
EXTERNAL_UNTRUSTED.
"""

from __future__ import annotations

from typing import NamedTuple

from toolhost import (
    ArtifactOrigin,
    ArtifactRef,
    ArtifactTooLarge,
    Provenance,
    ToolExecutionContext,
    ToolFailure,
    Trust,
    WorkspaceIsDirectory,
    WorkspaceNotFound,
    media_type_for,
    provenance_of,
)
from toolhost_artifact import names
from toolhost_artifact.messages import NO_SUCH_PATH, NOT_A_FILE, TOO_LARGE, UNSAFE_FILE_NAME

__all__ = ["CHUNK_SIZE", "EXPORT_CEILING", "ExportCancelled", "Exported", "export_file"]

#: The most bytes one export may hold: 64 MiB (the ``file_too_large`` message says so). Below the
#: artifact store's own ceiling (512 MiB) and the media tools' 256 MiB video bound, because an
#: export is a file the model chose to hand the owner, attached to a reply: a report, a table,
#: an image, a short recording, not a disk image. Past it the call fails ``file_too_large`` and
#: nothing is published (the stream aborts at the write that crosses it, so at most one chunk
#: past the ceiling is read). Read at each call, so tests lower it.
EXPORT_CEILING = 64 * 1024 * 1024

#: Bytes per read: the artifact store's own read chunk, so a 64 MiB export is 64 reads.
CHUNK_SIZE = 1024 * 1024


class ExportCancelled(Exception):
    """The call was cancelled (its deadline passed, or its run was cancelled) mid-export.

    Raised only to leave the stream uncommitted, so nothing is published after the call ended:
    the pipeline has already given the call its timeout or cancellation outcome and discards
    whatever the body does next.
    """


class Exported(NamedTuple):
    """What an export published: its ref, and the trust its artifact was stored with. (A
    NamedTuple: a dataclass costs milliseconds to build at import, on every ``toolhost
    check``.)"""

    ref: ArtifactRef
    trust: Trust


def export_file(path: str, context: ToolExecutionContext) -> Exported:
    """Export the workspace file at ``path`` into the run's artifacts (origin EXPORT), named
    after its last path component, with the table's media type for that name.

    Exporting the same unchanged file again in the run returns the same ref and stores nothing
    (the run-bound writer's identity rule, applied at commit).
    """
    if context.workspace.provenance(path) is Provenance.TOOL_WRITTEN:
        ref = _stream(path, context, Trust.INTERNAL_TOOL)
        if ref is not None:
            return Exported(ref, Trust.INTERNAL_TOOL)
        # Changed while it was read: whoever changed it chose these bytes, not this run.
    ref = _stream(path, context, Trust.EXTERNAL_UNTRUSTED)
    assert ref is not None  # only an INTERNAL_TOOL stream gives up on a provenance change
    return Exported(ref, Trust.EXTERNAL_UNTRUSTED)


def _stream(path: str, context: ToolExecutionContext, trust: Trust) -> ArtifactRef | None:
    """One pass: the file's bytes into one artifact stream, committed; None (nothing
    published) when ``trust`` is INTERNAL_TOOL and the file stopped being TOOL_WRITTEN."""
    workspace = context.workspace
    chunks = workspace.read_chunks(path, CHUNK_SIZE)
    try:
        try:
            # The reader is lazy: the first chunk is what opens the file, so a missing file or a
            # directory fails here, before any artifact stream exists.
            first = next(chunks, None)
        except WorkspaceNotFound:
            raise ToolFailure(NO_SUCH_PATH) from None
        except WorkspaceIsDirectory:
            raise ToolFailure(NOT_A_FILE) from None
        # The handle accepted the path and it is a file, so its last component is a name;
        # the person gets the file under it, so it meets the content export's name rule.
        name = path.rpartition("/")[2]
        problem = names.problem(name)
        if problem is not None:
            raise ToolFailure(UNSAFE_FILE_NAME, detail={"problem": problem})
        with context.artifacts.stream(
            origin=ArtifactOrigin.EXPORT, name=name, media_type=media_type_for(name).name,
            trust=trust, max_bytes=EXPORT_CEILING,
        ) as stream:
            try:
                if first is not None:
                    stream.write(first)
                    for chunk in chunks:
                        if context.cancellation.cancelled:
                            raise ExportCancelled
                        stream.write(chunk)
            except ArtifactTooLarge:
                # The stream aborted itself at the write that crossed the ceiling.
                raise ToolFailure(TOO_LARGE, detail={"ceiling": EXPORT_CEILING}) from None
            if trust is Trust.INTERNAL_TOOL and provenance_of(chunks) is not (
                    Provenance.TOOL_WRITTEN):
                return None  # leaving the block uncommitted aborts the stream
            if context.cancellation.cancelled:
                raise ExportCancelled
            return stream.commit()
    finally:
        # The port types the reader as an Iterator; the handle's is a generator, and closing
        # it closes the file's descriptor now rather than whenever it is collected.
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


