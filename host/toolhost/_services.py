"""What a tool receives: ``Services`` once, at build; a ``ToolExecutionContext`` per call.

Every port a tool touches is typed here with a Protocol, so a plugin depends on the shape of
what it is handed, never on the host's classes: ``Workspace`` (the run's WorkspaceHandle),
``ArtifactWriter`` and ``ArtifactStream`` (the run-bound writer and its streaming form),
``ArtifactReader`` (the conversation-scoped resolver) and ``Cancellation`` (this call's).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import attrs

from toolhost._settings import Settings

if TYPE_CHECKING:
    import httpx

    from toolhost._artifacts import ArtifactOrigin, ArtifactRef
    from toolhost._clock import Clock
    from toolhost._outcome import ToolOutput
    from toolhost._secrets import Secret
    from toolhost._spec import Trust
    from toolhost._workspace import Listing, Provenance, WriteResult

__all__ = [
    "ArtifactReader",
    "ArtifactStream",
    "ArtifactWriter",
    "Cancellation",
    "Principal",
    "Services",
    "ToolCallable",
    "ToolExecutionContext",
    "Workspace",
]


# ------------------------------------------------------------------------------ the ports


class Workspace(Protocol):
    """The run's workspace. Containment lives here, never in a tool: hand it the caller's
    path string as given. A rejected path raises ``WorkspaceEscape``, which tools do not
    catch (the pipeline turns it into the host's validation failure)."""

    def read(self, path: str) -> bytes:
        """The whole file. Raises WorkspaceEscape, WorkspaceNotFound, WorkspaceIsDirectory."""
        ...

    def read_chunks(self, path: str, chunk_size: int = ...) -> Iterator[bytes]:
        """The file's bytes in chunks, from one descriptor opened and type-checked once."""
        ...

    def write(self, path: str, data: bytes, *, provenance: Provenance = ...) -> WriteResult:
        """Write atomically, creating parent directories, and record ``provenance``."""
        ...

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        """Entries in bytewise order of their relative path, at most ``limit``."""
        ...

    def provenance(self, path: str) -> Provenance:
        """TOOL_WRITTEN or SANDBOX_WRITTEN while the file is still the one written; else
        UNKNOWN."""
        ...


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


class Cancellation(Protocol):
    """This call's cancellation: set when the call's deadline passes and when its run is
    cancelled. A sync body polls ``cancelled`` or blocks in ``wait``; a body that started a
    process group kills it when this is set."""

    @property
    def cancelled(self) -> bool:
        """Whether the call has been cancelled."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True if cancelled."""
        ...

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` (from any thread) on cancellation, at once if already cancelled;
        returns a function that removes it."""
        ...


# ------------------------------------------------------------------------------ the values


@attrs.frozen
class Principal:
    """Who the run acts for, and the scopes granted to them."""

    id: str
    scopes: frozenset[str] = frozenset()


class _HttpClients(Protocol):
    def client(self, *, timeout: float, headers: Mapping[str, str] | None = None) -> httpx.Client:
        ...

    def async_client(
        self, *, timeout: float, headers: Mapping[str, str] | None = None
    ) -> httpx.AsyncClient:
        ...


@attrs.frozen(kw_only=True)
class Services:
    """Host ports a tool may need when it is built, one set per distribution.

    ``clock`` is the only time a tool may read; ``settings`` the environment snapshot (typed
    flags: a plugin never reads ``os.environ``); ``data_dir`` a directory of the plugin's own
    distribution for durable state it owns (created on first access); ``artifacts`` the
    conversation-scoped resolver. ``secret(ref)`` and ``http(...)`` below.
    """

    clock: Clock
    settings: Settings = attrs.field(factory=Settings)
    artifacts: ArtifactReader | None = None
    _data_dir: Path | None = attrs.field(default=None, alias="data_dir")
    _http_clients: Callable[[], _HttpClients] | None = attrs.field(
        default=None, alias="http_clients", repr=False
    )

    @property
    def data_dir(self) -> Path:
        """This distribution's own directory under TOOLHOST_DATA_DIR, created on first use."""
        if self._data_dir is None:
            raise RuntimeError("these Services have no data directory (built outside a host)")
        self._data_dir.mkdir(parents=True, exist_ok=True)
        return self._data_dir

    def secret(self, ref: str) -> Secret | None:
        """The credential for reference ``ref`` (``tensorscale`` → TENSORSCALE_API_KEY), as a
        value whose repr and every log show ``***``; None when it is not configured."""
        from toolhost._secrets import resolve_secret

        return resolve_secret(self.settings, ref)

    def http(self, *, timeout: float, headers: Mapping[str, str] | None = None) -> httpx.Client:
        """An httpx client built by the host: no proxy variables (``trust_env=False``), no
        redirects followed, no automatic retries, this explicit timeout, and the extra trust
        roots of TOOLHOST_CA_BUNDLE. Close it (``with services.http(timeout=10) as c:``)."""
        return self._clients().client(timeout=timeout, headers=headers)

    def async_http(
        self, *, timeout: float, headers: Mapping[str, str] | None = None
    ) -> httpx.AsyncClient:
        """``http`` for an async body: an ``httpx.AsyncClient`` with the same guarantees."""
        return self._clients().async_client(timeout=timeout, headers=headers)

    def _clients(self) -> _HttpClients:
        if self._http_clients is not None:
            return self._http_clients()
        from toolhost._http import HttpClients

        return HttpClients(self.settings)


@attrs.frozen(kw_only=True)
class ToolExecutionContext:
    """Per call. Deliberately carries no database session.

    ``deadline`` is this call's effective deadline, a ``time.monotonic()`` instant:
    min(timeout_s, what is left of the run's). ``cancellation`` is this call's, set on that
    deadline and on run cancellation. ``user_turn`` is the current authenticated user turn,
    the one input at USER trust (None when the run has none).
    """

    run_id: str
    principal: Principal
    workspace: Workspace
    artifacts: ArtifactWriter
    deadline: float
    cancellation: Cancellation
    conversation_id: str | None = None
    user_turn: str | None = None

    @property
    def scopes(self) -> frozenset[str]:
        return self.principal.scopes


#: The tool body: ``body(arguments, context)``, sync or async, returning a ToolOutput. An
#: ordinary function typed ``(Mapping[str, Any], ToolExecutionContext) -> ToolOutput`` (or
#: ``async def``) is one, whatever its parameters are called.
ToolCallable: TypeAlias = Callable[
    [Mapping[str, Any], ToolExecutionContext], "ToolOutput | Awaitable[ToolOutput]"
]
