"""The artifact ports a tool sees: the run-bound writer, its streaming form, and the
conversation-scoped reader."""

from __future__ import annotations

import datetime as _dt
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from toolhost._model.artifacts import ArtifactOrigin, ArtifactRef
    from toolhost._model.context import ToolExecutionContext
    from toolhost._model.spec import Trust

__all__ = ["ArtifactReader", "ArtifactStream", "ArtifactWriter"]


class ArtifactStream(Protocol):
    """A streaming artifact write: bytes publish only on ``commit``. Leaving the ``with``
    block without committing, or by an exception, aborts and leaves no artifact."""

    def write(self, chunk: bytes) -> None:
        """Append bytes. Past the stream's ``max_bytes`` it raises ArtifactTooLarge and the
        stream is aborted."""
        ...

    def commit(self) -> ArtifactRef:
        """Publish what was written and return its ref (the run's identical live artifact if
        one exists)."""
        ...

    def abort(self) -> None:
        """Discard what was written; nothing is published."""
        ...

    def __enter__(self) -> ArtifactStream: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class ArtifactWriter(Protocol):
    """The run-bound artifact writer (``context.artifacts``): a tool writes only into its own
    run. Writing identical (origin, name, media type, content) twice returns the same ref."""

    def write(
        self,
        *,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        content: bytes | str,
        trust: Trust,
        expires_at: _dt.datetime | None = None,
    ) -> ArtifactRef:
        """Store ``content`` whole (a str is encoded UTF-8)."""
        ...

    def stream(
        self,
        *,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        trust: Trust,
        max_bytes: int,
        expires_at: _dt.datetime | None = None,
    ) -> ArtifactStream:
        """A streaming write bounded by ``max_bytes``, published only on commit."""
        ...


class ArtifactReader(Protocol):
    """The conversation-scoped resolver (``services.artifacts``): an artifact is readable by a
    call only if it belongs to the call's principal and conversation (or, outside one, run),
    is live, and is an export, a model output or a claimed upload — never a captured tool
    output. Every refusal raises ``ArtifactUnavailable`` before a byte is read."""

    def read(self, artifact_id: str, context: ToolExecutionContext, *, max_bytes: int) -> bytes:
        """The checksum-verified bytes, at most ``max_bytes`` of them."""
        ...

