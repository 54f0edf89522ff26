"""What a tool receives: ``Services`` once, at build; a ``ToolExecutionContext`` per call.

Every port they hand a tool is typed with a Protocol of ``toolhost._ports``, so a plugin depends
on the shape of what it is handed, never on the host's classes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from toolhost._model.data_layout import make_private_dirs
from toolhost._model.settings import Settings

if TYPE_CHECKING:
    import httpx

    from toolhost._model.outcome import ToolOutput
    from toolhost._model.secrets import Secret
    from toolhost._ports.cancellation import Cancellation
    from toolhost._ports.clock import Clock
    from toolhost._ports.http import HttpClients
    from toolhost._ports.tool_artifacts import ArtifactReader, ArtifactWriter
    from toolhost._ports.workspace import Workspace

__all__ = ["Principal", "Services", "ToolCallable", "ToolExecutionContext", "no_progress"]


@attrs.frozen
class Principal:
    """Who the run acts for, and the scopes granted to them."""

    id: str
    scopes: frozenset[str] = frozenset()


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
    _http_clients: Callable[[], HttpClients] | None = attrs.field(
        default=None, alias="http_clients", repr=False
    )

    @property
    def data_dir(self) -> Path:
        """This distribution's own directory under TOOLHOST_DATA_DIR, created on first use."""
        if self._data_dir is None:
            raise RuntimeError("these Services have no data directory (built outside a host)")
        make_private_dirs(self._data_dir)
        return self._data_dir

    def data_dir_of(self, distribution: str) -> Path:
        """Another distribution's directory (not created), for a public read API it offers
        over its own state: toolhost-people opens the email cache of toolhost-email here."""
        from toolhost._model.settings import plugin_data_dir

        return plugin_data_dir(self.data_dir.parent.parent, distribution)

    def secret(self, ref: str) -> Secret | None:
        """The credential for reference ``ref`` (``tensorscale`` → TENSORSCALE_API_KEY), as a
        value whose repr and every log show ``***``; None when it is not configured."""
        from toolhost._model.secrets import resolve_secret

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

    def _clients(self) -> HttpClients:
        if self._http_clients is None:
            raise RuntimeError("these Services have no HTTP clients (built outside a host)")
        return self._http_clients()


def no_progress(done: float, total: float | None = None, message: str | None = None) -> None:
    """Nobody watches this call: progress goes nowhere, at no cost."""


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
    #: Where ``progress`` goes: the host's reporter for this call when someone watches it
    #: (an MCP client that asked, a terminal), else nothing. A plugin's test may pass its own
    #: (``attrs.evolve(context, reporter=record)``, ``record(done, total, message)``) to see what
    #: the body reports.
    _reporter: Callable[[float, float | None, str | None], None] = attrs.field(
        default=no_progress, alias="reporter", repr=False, eq=False)

    @property
    def scopes(self) -> frozenset[str]:
        return self.principal.scopes

    def progress(self, done: float, total: float | None = None,
                 message: str | None = None) -> None:
        """Say how far this call has got: ``done`` of ``total`` (None when unknown), in the
        body's own unit (bytes, seconds, items), and a short ``message``. Callable from a sync
        body's thread and from an async body.

        Cheap and safe to call often: the host sends at most one update per 0.1 s of a call
        (the completing one, ``done == total``, always), and only to whoever asked (an MCP
        client that sent a progress token, ``toolhost call`` on a terminal). ``done`` must
        grow; an update that does not, or with wrong arguments, is dropped, never raised,
        and the host logs the first such. Nothing of it is recorded on the invocation row.
        """
        self._reporter(done, total, message)


#: The tool body: ``body(arguments, context)``, sync or async, returning a ToolOutput. An
#: ordinary function typed ``(Mapping[str, Any], ToolExecutionContext) -> ToolOutput`` (or
#: ``async def``) is one, whatever its parameters are called.
ToolCallable: TypeAlias = Callable[
    [Mapping[str, Any], ToolExecutionContext], "ToolOutput | Awaitable[ToolOutput]"
]
