"""What a tool receives: ``Services`` at construction, a ``ToolExecutionContext`` per call."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from toolhost._clock import Clock
    from toolhost._outcome import ToolOutput

__all__ = ["Principal", "Services", "ToolCallable", "ToolExecutionContext"]


@attrs.frozen
class Services:
    """Host ports a tool may need when it is built (the Clock above all)."""

    clock: Clock


@attrs.frozen
class Principal:
    """Who the run acts for, and the scopes granted to them."""

    id: str
    scopes: frozenset[str] = frozenset()


@attrs.frozen(kw_only=True)
class ToolExecutionContext:
    """Per-call context. Deliberately carries no database session.

    ``workspace`` and ``artifacts`` are the run's WorkspaceHandle and run-bound ArtifactWriter
    once the pipeline provides them; ``deadline`` is a monotonic instant, ``cancelled`` a flag
    the pipeline sets.
    """

    run_id: str
    principal: Principal
    workspace: Any = None
    artifacts: Any = None
    deadline: float | None = None
    cancellation: Any = None
    user_turn: str | None = None

    @property
    def scopes(self) -> frozenset[str]:
        return self.principal.scopes


class ToolCallable(Protocol):
    """The callable ``Tool.build`` returns. Sync or async; returns a ToolOutput."""

    def __call__(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> ToolOutput | Awaitable[ToolOutput]: ...
