"""What the suite runs on: the plugins of the distributions under test, loaded once per class.

Loading happens at collection (the per-tool checks are parametrized by what the plugins
return), so nothing here raises: a plugin that does not load is recorded and reported by the
``registration`` check in the host's own one line. Registration is the one source of its
rules: the problems are what ``registration_problems`` returns for exactly these
contributions, and each check reports its share of them, never a rule of its own.

Everything of the host used here is ``toolhost.testing``'s public registration kit
(``load_plugins``, ``contributions_of``, ``registration_problems``, ``host_for``): the suite
runs no private host code of its own, so a host refactor that keeps that kit keeps the suite.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from toolhost.testing import (
    PluginError,
    RegistrationRefused,
    contributions_of,
    host_for,
    load_plugins,
    registration_problems,
)
from toolhost_conformance.ambient import distribution_files, module_files

if TYPE_CHECKING:
    from toolhost import Clock, Settings, Tool, ToolSpec
    from toolhost.testing import (
        Contribution,
        Host,
        PluginSource,
        RegistrationProblem,
        RegistrationStep,
    )

__all__ = ["Subject", "ToolUnderTest"]


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalization, so ``Toolhost_Math`` and ``toolhost-math`` are one name."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


@attrs.frozen
class ToolUnderTest:
    """One registered (name, version) and the distribution that returned it."""

    distribution: str
    tool: Tool

    @property
    def identity(self) -> str:
        """``name@version``, spelled as registration labels its problems."""
        spec = self.tool.spec
        return f"{getattr(spec, 'name', '?')}@{getattr(spec, 'version', '?')}"

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec


class Subject:
    """The distributions (installed) and plugin objects (not installed) under test.

    :param distributions: installed distribution names, loaded through
        ``toolhost.testing.load_plugins`` (only these, not every installed plugin).
    :param plugins: ``{distribution: plugin object}`` for plugins that are not installed,
        registered exactly as ``toolhost.testing.host_for`` does.
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
        #: Why the plugins could not be loaded (one line), or None.
        self.load_error: str | None = None
        self.sources: list[PluginSource] = []
        self.contributions: list[Contribution] = []
        #: Every problem registration finds in the contributions, in step order.
        self.problems: list[RegistrationProblem] = []
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
            self.sources = load_plugins(self.distributions, self.plugins)
            self.contributions = contributions_of(self.sources, self.settings)
        except PluginError as exc:
            self.load_error = str(exc)
            self._refusal = exc
            return
        except Exception as exc:  # a host bug: reported by the registration check, with traceback
            self.load_error = f"loading crashed: {type(exc).__name__}: {exc}"
            self._refusal = exc
            return
        try:
            # Pure: the seven steps and the reasons check over exactly these contributions,
            # nothing constructed. The same list the host refuses to start with.
            self.problems = list(registration_problems(self.contributions))
        except Exception as exc:  # a host bug, or a contribution that breaks a step itself
            self._refusal = exc

    # ------------------------------------------------------------------ static view

    @property
    def tools(self) -> list[ToolUnderTest]:
        """Every tool the plugins return, in contribution order (duplicates kept)."""
        return [ToolUnderTest(c.distribution, t) for c in self.contributions for t in c.tools]

    def problems_at(
        self,
        step: RegistrationStep,
        *,
        tool: ToolUnderTest | None = None,
        distribution: str | None = None,
    ) -> list[RegistrationProblem]:
        """Registration's own problems at ``step``: those of one tool (its ``name@version``
        from its distribution), or those a distribution contributed."""
        found = [p for p in self.problems if p.step is step]
        if tool is not None:
            found = [
                p for p in found
                if p.tool == tool.identity and p.distribution == tool.distribution
            ]
        if distribution is not None:
            found = [p for p in found if p.distribution == distribution]
        return found

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
            if self.problems:
                self._refusal = RegistrationRefused(self.problems)
                return None
            try:
                # The real composition path, end to end: load_plugins (done), then host_for
                # runs the hooks and the seven steps exactly as at startup.
                self._host = host_for(
                    self.sources, settings=self.settings, clock=self.clock,
                    data_dir=self.data_dir,
                )
            except (PluginError, RegistrationRefused) as exc:
                # The hooks answered differently the second time (they should not).
                self._refusal = exc
            except Exception as exc:  # a host bug, or a plugin that breaks registration itself
                self._refusal = exc
        return self._host

    def close(self) -> None:
        """Release the host's stores (``Host.close``)."""
        if self._host is not None:
            self._host.close()

    def refusal(self) -> BaseException | None:
        """Why ``host()`` is None: the PluginError or RegistrationRefused (or a crash)."""
        self.host()
        return self._refusal

    def refusal_line(self) -> str | None:
        """The one line an operator reads when the host does not start (the first problem)."""
        exc = self.refusal()
        if exc is None:
            return None
        if isinstance(exc, (PluginError, RegistrationRefused)):
            return str(exc)
        return f"registration crashed: {type(exc).__name__}: {exc}"
