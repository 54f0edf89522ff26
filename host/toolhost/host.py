"""The composition root: discover plugins, register their tools, build the pipeline.

Nothing here runs at import time. ``load_host()`` does the work, once, when a command needs
it; tests build their own host from plugin objects with ``Host.from_plugins``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolhost.clock import Clock, SystemClock
from toolhost.outcome import Outcome
from toolhost.pipeline import Pipeline
from toolhost.plugins import (
    PluginSource,
    collect_contributions,
    discover,
    make_plugin_manager,
)
from toolhost.registration import Registered, register
from toolhost.registry import Registry
from toolhost.services import Principal, Services, ToolCallable, ToolExecutionContext
from toolhost.settings import Settings

__all__ = ["Host", "load_host"]


class Host:
    """A registry that passed registration, its message table, and the pipeline over them."""

    def __init__(
        self,
        registry: Registry,
        messages: Mapping[str, str],
        services: Services,
        settings: Settings,
    ) -> None:
        self.registry = registry
        self.messages = dict(messages)
        self.services = services
        self.settings = settings
        self._built: dict[tuple[str, str], ToolCallable] = {}
        self.pipeline = Pipeline(registry, self.messages, self._tool_callable)

    @classmethod
    def from_sources(
        cls,
        sources: Sequence[PluginSource],
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
    ) -> Host:
        """Register exactly these plugins. Raises PluginError or RegistrationRefused."""
        settings = settings if settings is not None else Settings()
        pm = make_plugin_manager(sources)
        registered, messages = register(collect_contributions(pm, settings))
        services = Services(clock=clock if clock is not None else SystemClock())
        return cls(Registry(registered), messages, services, settings)

    @classmethod
    def from_plugins(
        cls,
        plugins: Mapping[str, object],
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
    ) -> Host:
        """Register plugin objects that are not installed: ``{distribution: plugin}``."""
        sources = [PluginSource(distribution=d, name=d, plugin=p) for d, p in plugins.items()]
        return cls.from_sources(sources, settings=settings, clock=clock)

    def _tool_callable(self, registered: Registered) -> ToolCallable:
        # Built on first use, once: registration never constructs anything, and a command
        # that calls one tool pays for building one.
        key = (registered.spec.name, registered.spec.version)
        tool = self._built.get(key)
        if tool is None:
            tool = self._built[key] = registered.tool.build(self.services)
        return tool

    def context(self, *, run_id: str = "run-local", scopes: frozenset[str] = frozenset()) -> (
        ToolExecutionContext
    ):
        return ToolExecutionContext(run_id=run_id, principal=Principal("operator", scopes))

    async def invoke(
        self,
        name: str,
        arguments: Any,
        *,
        version: str | None = None,
        context: ToolExecutionContext | None = None,
    ) -> Outcome:
        return await self.pipeline.invoke(
            name, arguments, context if context is not None else self.context(), version=version
        )

    def invoke_sync(
        self,
        name: str,
        arguments: Any,
        *,
        version: str | None = None,
        context: ToolExecutionContext | None = None,
    ) -> Outcome:
        """The synchronous convenience wrapper the CLI uses."""
        import asyncio  # deferred: registration alone (`toolhost check`) never needs it

        return asyncio.run(self.invoke(name, arguments, version=version, context=context))


def load_host(settings: Settings | None = None, *, clock: Clock | None = None) -> Host:
    """Discover installed plugins (honouring TOOLHOST_PLUGINS) and register them."""
    settings = settings if settings is not None else Settings.from_environ()
    return Host.from_sources(discover(settings), settings=settings, clock=clock)
