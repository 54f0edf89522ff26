"""The run-bound artifact writer a tool and the pipeline write through, its streaming form,
the view of it one call's body is given, and the conversation-scoped resolver a tool reads
references through (D63, D64).
"""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable
from types import TracebackType

from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactRef,
    ArtifactUnavailable,
    NewArtifact,
)
from toolhost._model.spec import Trust
from toolhost._model.workspace import CallScope
from toolhost._pipeline.attachments import ATTACHED_ORIGINS
from toolhost._ports.artifacts import ArtifactStore, ArtifactUpload
from toolhost._ports.clock import Clock

__all__ = [
    "ArtifactResolver",
    "CallArtifactWriter",
    "RunArtifactStream",
    "RunArtifactWriter",
]

# --------------------------------------------------------------------------------------------
# The run-bound writer
# --------------------------------------------------------------------------------------------


class RunArtifactWriter:
    """What tools (``ToolExecutionContext.artifacts``) and the pipeline write artifacts through.

    Bound to one run (and optionally one conversation and the run's principal) so a tool cannot
    write into another run's artifacts or under another principal. Applies the identity rule:
    writing the same (origin, name, media type, content) while the run's earlier artifact is
    live at ``clock.now()`` returns that artifact's ref and stores nothing. What is written
    without an ``expires_at`` expires the store's ``retention`` after it is written (never, when
    that is None). Safe to share between threads.
    """

    def __init__(
        self,
        store: ArtifactStore,
        run_id: str,
        clock: Clock,
        conversation_id: str | None = None,
        principal_id: str | None = None,
        live: Callable[[], None] | None = None,
    ) -> None:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("run_id must be a non-empty string")
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._conversation_id = conversation_id
        self._principal_id = principal_id
        #: Raises (``RunEnded``) once the run has ended: checked before an attachment is
        #: published, so a late call adds nothing to an ended run (D529).
        self._live = live
        # What this writer exported or generated (the files attached to the run's reply), in
        # order, each once: what the call's answer links. One writer serves one call.
        self._attached: dict[str, ArtifactRef] = {}
        self._attached_lock = threading.Lock()

    @property
    def attached(self) -> tuple[ArtifactRef, ...]:
        """The attachments written through this writer (reused ones too), in order."""
        with self._attached_lock:
            return tuple(self._attached.values())

    def _check_live(self, origin: ArtifactOrigin) -> None:
        # Only the run's attachments: a captured output (step 12) is the call's own row's.
        if self._live is not None and origin in ATTACHED_ORIGINS:
            self._live()

    def _attach(self, origin: ArtifactOrigin, ref: ArtifactRef) -> ArtifactRef:
        if origin in ATTACHED_ORIGINS:
            with self._attached_lock:
                self._attached.setdefault(ref.id, ref)
        return ref

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def conversation_id(self) -> str | None:
        return self._conversation_id

    @property
    def principal_id(self) -> str | None:
        return self._principal_id

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
        """Store ``content`` (a str is encoded UTF-8) for this run, or reuse the live twin.

        Raises what ``NewArtifact`` and ``ArtifactStore.put`` raise. On reuse the earlier
        artifact keeps its own expiry; only its trust may be lowered to ``trust``.
        """
        data = content.encode("utf-8") if isinstance(content, str) else content
        # One reading of the clock: the creation instant, and what the default expiry counts from.
        now = self._clock.now()
        new = self._new(origin=origin, name=name, media_type=media_type, trust=trust,
                        expires_at=self._expiry(expires_at, lambda: now))
        self._check_live(origin)
        record = self._store.put_or_reuse(new, data, now=now)
        return self._attach(origin, record.ref)

    def stream(
        self,
        *,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        trust: Trust,
        max_bytes: int,
        expires_at: _dt.datetime | None = None,
    ) -> RunArtifactStream:
        """A streamed write for this run of at most ``max_bytes``, published only on commit::

            with writer.stream(origin=..., name=..., media_type=..., trust=...,
                               max_bytes=32 * 1024 * 1024) as s:
                for chunk in response.iter_bytes():
                    s.write(chunk)
                ref = s.commit()

        The upload begins on entering the block (so an unentered stream leaves nothing behind)
        and is aborted on leaving it uncommitted, however it is left. ``commit`` applies the
        identity rule at ``clock.now()``, like ``write``. The default expiry counts from entering
        the block (a stream lasts a tool's timeout at most; retention is days).
        """
        def begin() -> ArtifactUpload:
            # Run on entering the block: the default expiry counts from there, and a stream
            # never entered neither checks nor stages anything.
            new = self._new(origin=origin, name=name, media_type=media_type, trust=trust,
                            expires_at=self._expiry(expires_at, self._clock.now))
            return self._store.begin(new, max_bytes=max_bytes)

        return RunArtifactStream(begin, self._clock,
                                 committed=lambda ref: self._attach(origin, ref),
                                 publishing=lambda: self._check_live(origin))

    def _new(self, *, origin: ArtifactOrigin, name: str, media_type: str, trust: Trust,
             expires_at: _dt.datetime | None) -> NewArtifact:
        # The run, conversation and principal are the writer's: a tool names only the rest.
        return NewArtifact(
            run_id=self._run_id, conversation_id=self._conversation_id,
            principal_id=self._principal_id, origin=origin, name=name,
            media_type=media_type, trust=trust, expires_at=expires_at,
        )

    def _expiry(
        self, expires_at: _dt.datetime | None, now: Callable[[], _dt.datetime]
    ) -> _dt.datetime | None:
        # A tool's own expiry wins; the store's retention fills in only when it gives none
        # (and only then is the clock read, so a scripted clock sees no extra reading).
        if expires_at is not None:
            return expires_at
        retention = self._store.retention
        return None if retention is None else now() + retention


class RunArtifactStream:
    """A run-bound streamed write (``RunArtifactWriter.stream``); use it as a context manager.

    ``write`` appends bytes (past ``max_bytes`` it raises ``ArtifactTooLarge`` and the stream
    is aborted), ``commit`` publishes and returns the ``ArtifactRef``, ``abort`` discards.
    Leaving the ``with`` block without committing, or by an exception, aborts: an interrupted
    or failed stream leaves no artifact. One producer per stream; an ``abort`` from another
    thread (a cancellation) is safe.
    """

    def __init__(
        self,
        begin: Callable[[], ArtifactUpload],
        clock: Clock,
        *,
        committed: Callable[[ArtifactRef], ArtifactRef] = lambda ref: ref,
        publishing: Callable[[], None] = lambda: None,
    ) -> None:
        self._begin = begin
        self._clock = clock
        self._committed = committed
        #: Asked just before publishing: raising leaves the stream uncommitted (aborted).
        self._publishing = publishing
        self._lock = threading.Lock()
        self._upload: ArtifactUpload | None = None
        self._entered = False

    def __enter__(self) -> RunArtifactStream:
        with self._lock:
            if self._entered:
                raise ArtifactError("an artifact stream can be entered once")
            self._entered = True
            self._upload = self._begin()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A no-op after commit; otherwise this is what makes "no commit, no artifact" hold.
        self.abort()

    @property
    def bytes_written(self) -> int:
        """How many bytes the stream has accepted so far."""
        return 0 if self._upload is None else self._upload.bytes_written

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; see ``ArtifactUpload.write``."""
        self._started().write(chunk)

    def commit(self) -> ArtifactRef:
        """Publish what was written (or reuse the run's live twin) and return its ref."""
        upload = self._started()
        self._publishing()
        return self._committed(upload.commit(self._clock.now()).ref)

    def abort(self) -> None:
        """Discard what was written. Idempotent; a no-op after commit."""
        with self._lock:
            upload = self._upload
        if upload is not None:
            upload.abort()

    def _started(self) -> ArtifactUpload:
        with self._lock:
            upload = self._upload
        if upload is None:
            raise ArtifactError("an artifact stream is used inside a with block")
        return upload


class CallArtifactWriter:
    """The run's writer as one call's body has it (``context.artifacts``): writes, and a
    stream's entry and commit, are handed on while the call runs (``CallScope``) and refused
    with ``CallEnded`` once it has ended, whatever the origin. A body abandoned at its
    deadline, or a thread it started, would otherwise publish files no answer links (a timed
    out call's, or one past its answer's ``attachments``). The pipeline's own step 12 writes
    through the writer itself."""

    __slots__ = ("_scope", "_writer")

    def __init__(self, writer: RunArtifactWriter, scope: CallScope) -> None:
        self._writer = writer
        self._scope = scope

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
        self._scope.check()
        return self._writer.write(origin=origin, name=name, media_type=media_type,
                                  content=content, trust=trust, expires_at=expires_at)

    def stream(
        self,
        *,
        origin: ArtifactOrigin,
        name: str,
        media_type: str,
        trust: Trust,
        max_bytes: int,
        expires_at: _dt.datetime | None = None,
    ) -> _CallArtifactStream:
        self._scope.check()
        return _CallArtifactStream(self._writer.stream(
            origin=origin, name=name, media_type=media_type, trust=trust, max_bytes=max_bytes,
            expires_at=expires_at), self._scope)


class _CallArtifactStream:
    """A stream of ``CallArtifactWriter``'s: entered and committed only while its call runs;
    refused, it is aborted on leaving the block, as any uncommitted stream is."""

    __slots__ = ("_scope", "_stream")

    def __init__(self, stream: RunArtifactStream, scope: CallScope) -> None:
        self._stream = stream
        self._scope = scope

    def __enter__(self) -> _CallArtifactStream:
        self._scope.check()
        self._stream.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stream.__exit__(exc_type, exc, tb)

    @property
    def bytes_written(self) -> int:
        return self._stream.bytes_written

    def write(self, chunk: bytes) -> None:
        self._stream.write(chunk)

    def commit(self) -> ArtifactRef:
        self._scope.check()
        return self._stream.commit()

    def abort(self) -> None:
        self._stream.abort()


# --------------------------------------------------------------------------------------------
# The conversation-scoped resolver
# --------------------------------------------------------------------------------------------

# Generated, exported and (once claimed) uploaded files are what a user could point a tool at.
# A captured tool output is the host's own overflow bookkeeping, possibly holding text the tool
# fetched from outsiders: letting a later call read it back would launder it past step 12.
_REFERENCEABLE = frozenset(
    {ArtifactOrigin.EXPORT, ArtifactOrigin.MODEL_OUTPUT, ArtifactOrigin.UPLOAD}
)


class ArtifactResolver:
    """Decides whether a caller may use an artifact by id, and reads it if so (D63).

    Every rule is checked on the record, before any content is opened, and every refusal is
    one ``ArtifactUnavailable`` whose ``reason`` says which rule (for operators). In order:
    the artifact exists; it belongs to the caller's principal; it belongs to the caller's
    conversation, or, for a caller outside any conversation, to the caller's run; it is live at
    ``clock.now()``; it is an export or a model output, or an upload the user has sent (claimed);
    and, for ``read``, it is at most ``max_bytes`` long. Bytes are the store's verified read:
    ``ArtifactCorrupted`` propagates rather than damaged content being returned.
    """

    def __init__(self, store: ArtifactStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def resolve(
        self,
        artifact_id: str,
        *,
        principal_id: str,
        run_id: str,
        conversation_id: str | None,
    ) -> ArtifactRecord:
        """The artifact's record if the caller may use it; raises ``ArtifactUnavailable``.

        ``ValueError`` for a caller without a principal or run (an empty or non-string id): a
        missing principal must never match an artifact written without one.
        """
        _check_caller(principal_id, run_id, conversation_id)
        # The id usually comes from the model; whatever it is, a bad one is just not found.
        if not isinstance(artifact_id, str) or not artifact_id:
            raise ArtifactUnavailable(repr(artifact_id), "not_found")
        try:
            record = self._store.get(artifact_id)
        except ArtifactNotFound:
            raise ArtifactUnavailable(artifact_id, "not_found") from None
        except ArtifactCorrupted:  # its row, edited behind the store's back (D252)
            raise ArtifactUnavailable(artifact_id, "damaged_record") from None
        if record.principal_id != principal_id:
            raise ArtifactUnavailable(artifact_id, "foreign_principal")
        if conversation_id is not None:
            if record.conversation_id != conversation_id:
                raise ArtifactUnavailable(artifact_id, "other_conversation")
        elif record.run_id != run_id:
            raise ArtifactUnavailable(artifact_id, "other_run")
        if not record.live_at(self._clock.now()):
            raise ArtifactUnavailable(artifact_id, "expired")
        if record.origin not in _REFERENCEABLE:
            raise ArtifactUnavailable(artifact_id, "ineligible_origin")
        if record.origin is ArtifactOrigin.UPLOAD and not record.claimed:
            raise ArtifactUnavailable(artifact_id, "unclaimed_upload")
        return record

    def read(
        self,
        artifact_id: str,
        *,
        principal_id: str,
        run_id: str,
        conversation_id: str | None,
        max_bytes: int,
    ) -> bytes:
        """The artifact's checksum-verified bytes if the caller may use it and it fits.

        Refused (``ArtifactUnavailable``, reason ``too_large``) from the record's size when it
        is over ``max_bytes``, so an oversized artifact is never opened. ``TypeError`` or
        ``ValueError`` for a ``max_bytes`` that is not a non-negative int.
        """
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError(f"max_bytes must be an int, got {type(max_bytes).__name__}")
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        record = self.resolve(
            artifact_id, principal_id=principal_id, run_id=run_id,
            conversation_id=conversation_id,
        )
        if record.size > max_bytes:
            raise ArtifactUnavailable(record.id, "too_large")
        # The store's read is bounded by the record's size (checked just above) and verified.
        # Bytes that fail their checksum are unavailable to the caller like any refusal (a
        # tool declares one code for it); the reason on the row tells the operator.
        try:
            return self._store.read(record.id)
        except ArtifactCorrupted:  # the store said "not found" for content purged meanwhile
            raise ArtifactUnavailable(record.id, "corrupted") from None
        except ArtifactNotFound:  # purged (by another host too) since it was resolved
            raise ArtifactUnavailable(record.id, "not_found") from None


def _check_caller(principal_id: str, run_id: str, conversation_id: str | None) -> None:
    for label, value in (("principal_id", principal_id), ("run_id", run_id)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"the caller's {label} must be a non-empty string")
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise ValueError("the caller's conversation_id must be None or a non-empty string")
