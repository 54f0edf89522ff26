"""What the suite runs on: the plugins of the distributions under test, loaded once per class.

Loading happens at collection (the per-tool checks are parametrized by what the plugins
return), so nothing here raises: a plugin that does not load, or a registration that is
refused, is recorded and reported by the check it belongs to, in the host's own one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from toolhost import _core_messages as core_messages
from toolhost._clock import Clock
from toolhost._host import Host
from toolhost._plugins import (
    HOST_DISTRIBUTION,
    Contribution,
    PluginError,
    PluginSource,
    collect_contributions,
    load_distributions,
    make_plugin_manager,
)
from toolhost._registration import RegistrationRefused
from toolhost._settings import Settings, normalize_dist_name
from toolhost._spec import Tool, ToolSpec
from toolhost_conformance.ambient import distribution_files, module_files

__all__ = ["Subject", "ToolUnderTest"]


@attrs.frozen
class ToolUnderTest:
    """One registered (name, version) and the distribution that returned it."""

    distribution: str
    tool: Tool

    @property
    def identity(self) -> str:
        spec = self.tool.spec
        return f"{getattr(spec, 'name', '?')}@{getattr(spec, 'version', '?')}"

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec


class Subject:
    """The distributions (installed) and plugin objects (not installed) under test.

    :param distributions: installed distribution names, loaded through
        ``toolhost._plugins.load_distributions`` (only these, not every installed plugin).
    :param plugins: ``{distribution: plugin object}`` for plugins that are not installed,
        registered exactly as ``Host.from_plugins`` does.
    :param settings: what ``toolhost_tools(settings)`` sees, so conditional tools can be on.
    :param clock: the host's clock for invocations (a FixedClock: runs are deterministic).
    :param origin: where the names came from (``"class"`` or ``"fixture"``), for messages.
    """

    def __init__(
        self,
        *,
        distributions: Sequence[str],
        plugins: Mapping[str, object],
        settings: Settings,
        clock: Clock,
        origin: str,
    ) -> None:
        self.distributions = tuple(distributions)
        self.plugins = dict(plugins)
        self.settings = settings
        self.clock = clock
        self.origin = origin
        #: Where the host keeps its stores; set before the host is first built.
        self.data_dir: Path | None = None
        self.load_error: str | None = None
        self.sources: list[PluginSource] = []
        self.contributions: list[Contribution] = []
        self._host: Host | None = None
        self._refusal: BaseException | None = None
        self._registered = False
        self._load()

    @property
    def label(self) -> str:
        return ", ".join(self.dist_names)

    @property
    def dist_names(self) -> list[str]:
        """Every distribution under test, installed ones first (normalized names)."""
        names = [normalize_dist_name(n) for n in self.distributions] + list(self.plugins)
        return list(dict.fromkeys(names))  # a name given twice is one distribution

    def _load(self) -> None:
        try:
            self.sources = (
                list(load_distributions(self.distributions)) if self.distributions else []
            )
            self.sources += [
                PluginSource(distribution=d, name=d, plugin=p) for d, p in self.plugins.items()
            ]
            pm = make_plugin_manager(self.sources)
            self.contributions = [
                c
                for c in collect_contributions(pm, self.settings)
                if c.distribution != HOST_DISTRIBUTION
            ]
        except PluginError as exc:
            self.load_error = str(exc)
            self._refusal = exc
        except Exception as exc:  # a host bug: reported by the registration check, with traceback
            self.load_error = f"loading crashed: {type(exc).__name__}: {exc}"
            self._refusal = exc

    # ------------------------------------------------------------------ static view

    @property
    def tools(self) -> list[ToolUnderTest]:
        """Every tool the plugins return, in contribution order (duplicates kept)."""
        return [ToolUnderTest(c.distribution, t) for c in self.contributions for t in c.tools]

    def messages_of(self, distribution: str) -> Mapping[str, Any]:
        for c in self.contributions:
            if c.distribution == distribution:
                return c.messages
        return {}

    def table(self) -> dict[str, str]:
        """The assembled message table; the union of contributions if registration refused."""
        host = self.host()
        if host is not None:
            return dict(host.messages)
        table = dict(core_messages.MESSAGES)
        for c in self.contributions:
            table.update({k: v for k, v in c.messages.items() if isinstance(v, str)})
        return table

    def files(self, distribution: str) -> list[Path]:
        """The modules to scan for ambient reads. Raises PackageNotFoundError if not installed."""
        if distribution in self.plugins:
            return module_files(self.plugins[distribution])
        return distribution_files(distribution)

    # ------------------------------------------------------------------ registration

    def host(self) -> Host | None:
        """The host over exactly these plugins, or None if loading or registration refused."""
        if not self._registered:
            self._registered = True
            if self._refusal is not None:  # the plugins did not load: nothing to register
                return None
            try:
                # The real composition path, end to end: load_distributions (done), then
                # Host.from_sources runs the hooks and the seven steps exactly as at startup.
                self._host = Host.from_sources(
                    self.sources, settings=self.settings, clock=self.clock,
                    data_dir=self.data_dir,
                )
            except (PluginError, RegistrationRefused) as exc:
                self._refusal = exc
            except Exception as exc:  # a host bug, or a plugin that breaks registration itself
                self._refusal = exc
        return self._host

    def close(self) -> None:
        """Release the host's stores, where the host offers a way to (``Host.close``)."""
        close = getattr(self._host, "close", None)
        if callable(close):
            close()

    def refusal(self) -> BaseException | None:
        """Why ``host()`` is None: the PluginError or RegistrationRefused (or a crash)."""
        self.host()
        return self._refusal

    def refusal_line(self) -> str | None:
        exc = self.refusal()
        if exc is None:
            return None
        if isinstance(exc, (PluginError, RegistrationRefused)):
            return str(exc)
        return f"registration crashed: {type(exc).__name__}: {exc}"
