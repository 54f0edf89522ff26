"""The test kit for plugin authors (and the host's own suite), shipped as a pytest plugin.

Installed with toolhost (pytest11 entry point ``toolhost``), so a plugin's tests get, with no
import at all:

- ``toolhost_host``: a ``Harness`` over the plugins the ``toolhost_plugins`` fixture names (a
  conftest overrides it), with a FixedClock at ``DEFAULT_INSTANT``, its stores in a temporary
  data directory, and everything closed and removed afterwards;
- ``toolhost_settings``: the environment ``toolhost_tools(settings)`` sees (override it to
  turn conditional tools on).

``Harness.invoke(name, **arguments)`` runs one call through the real pipeline and returns its
``Outcome``; ``Harness.context()`` makes a ``ToolExecutionContext`` for calling a tool body
directly; ``Harness.tool(name)`` is the body as the host builds it. The port contract suites
(``ClockContract``, ``InvocationStoreContract``, ``ArtifactStoreContract``) hold any backend
to the port's contract; ``find_ambient_reads`` is the static determinism check. ``ForwardingWorkspace`` is the run's
real workspace in every call a test's subclass does not override (to watch or break a read),
``WatchedChunks`` a read it disturbs that still says whose bytes it read, and
``SwappingWorkspace`` the outsider who swaps a directory in for a read and back.

Registration as the host runs it at startup, step by step, for suites that check plugins
(toolhost-conformance uses exactly these): ``load_plugins`` loads distributions' entry points
the way the host does, ``contributions_of`` calls their hooks one plugin at a time,
``registration_problems`` lists every problem registration finds (``RegistrationProblem``,
by ``RegistrationStep``), and ``host_for`` builds a ``Host`` over the loaded plugins. A plugin
that does not load is a ``PluginError``; a host that refuses to start raises
``RegistrationRefused``.

Beyond the host, for tests of what an operator sees:

- ``run_toolhost(*args, data_dir=..., plugins=...)`` runs the ``toolhost`` command in a child
  process with its own data directory and an environment holding none of the machine's
  ``TOOLHOST_*`` settings nor an operator's configuration file; ``toolhost_command()`` is the
  command it runs, for a test that wraps it;
- ``loopback_tls_server(handler, directory)`` (and the ``toolhost_tls_server`` fixture, which
  stops it when the test ends) is an HTTPS ``LoopbackTLSServer`` on 127.0.0.1 with a
  certificate from a throwaway trustme CA, whose PEM (``server.ca_bundle``) is what
  ``TOOLHOST_CA_BUNDLE`` names;
- the hypothesis profile ``toolhost`` (hypothesis's defaults without the timing deadline, so
  a loaded machine does not fail a property test) is loaded for every test run, unless
  ``--hypothesis-profile``, a conftest or hypothesis's own ``ci`` profile chose another.

It imports pytest: use it from tests, never from a tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from toolhost._composition import Host, remove_tree
from toolhost._model.context import Principal, Services, ToolCallable, ToolExecutionContext
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.outcome import Outcome
from toolhost._model.runs import CancellationEvent, Run, RunOutcome
from toolhost._model.settings import Settings
from toolhost._ports.clock import Clock
from toolhost._registration.ambient import find_ambient_reads
from toolhost._registration.discovery import (
    Contribution,
    PluginError,
    PluginSource,
    collect_contributions,
    load_distributions,
    make_plugin_manager,
)
from toolhost._registration.refusals import (
    Registered,
    RegistrationProblem,
    RegistrationRefused,
    registration_problems,
)
from toolhost._registration.refusals import Step as RegistrationStep
from toolhost._testing.artifact_store_contract import ArtifactStoreContract
from toolhost._testing.cli import run_toolhost, toolhost_command
from toolhost._testing.clocks import DEFAULT_INSTANT, ClockExhausted, FixedClock, ScriptedClock
from toolhost._testing.contracts import ClockContract, InvocationStoreContract
from toolhost._testing.disks import file_size_limit, open_file_limit

# A hook of this pytest plugin (pytest finds it by name), not a name for tests to import.
from toolhost._testing.hypothesis_profile import pytest_configure as pytest_configure
from toolhost._testing.terminal import run_on_a_terminal
from toolhost._testing.tls import (
    LoopbackTLSServer,
    StartTLSServer,
    loopback_tls_server,
    toolhost_tls_server,
)
from toolhost._testing.workspaces import ForwardingWorkspace, SwappingWorkspace, WatchedChunks

if TYPE_CHECKING:
    import httpx

    from toolhost._pipeline.policy import Policy

__all__ = [
    "DEFAULT_INSTANT",
    "ArtifactStoreContract",
    "CancellationEvent",
    "ClockContract",
    "ClockExhausted",
    "Contribution",
    "FixedClock",
    "ForwardingWorkspace",
    "Harness",
    "Host",
    "InvocationState",
    "InvocationStoreContract",
    "LoopbackTLSServer",
    "PluginError",
    "PluginSource",
    "Registered",
    "RegistrationProblem",
    "RegistrationRefused",
    "RegistrationStep",
    "Run",
    "RunOutcome",
    "ScriptedClock",
    "StartTLSServer",
    "SwappingWorkspace",
    "WatchedChunks",
    "contributions_of",
    "file_size_limit",
    "find_ambient_reads",
    "host_for",
    "load_plugins",
    "loopback_tls_server",
    "open_file_limit",
    "registration_problems",
    "remove_tree",
    "run_on_a_terminal",
    "run_toolhost",
    "toolhost_command",
    "toolhost_host",
    "toolhost_plugins",
    "toolhost_settings",
    "toolhost_tls_server",
]


# ---------------------------------------------------------------------------- registration


def load_plugins(
    distributions: Iterable[str] = (), plugins: Mapping[str, object] | None = None,
) -> list[PluginSource]:
    """The plugins under test, loaded the way the host loads them at startup.

    :param distributions: installed distribution names (``"toolhost-math"``; a single name
        may be a string). Exactly their ``toolhost.plugins`` entry points are loaded, each on
        its own, not every installed plugin.
    :param plugins: ``{distribution: plugin object}`` for plugins that are not installed
        (a test fixture module, say).
    :return: one ``PluginSource`` per entry point or plugin object, installed ones first.
    :raises PluginError: a name no installed distribution provides an entry point for, or an
        entry point that fails to import; its message is the host's one line.
    """
    names = [distributions] if isinstance(distributions, str) else list(distributions)
    # No names, no metadata scan: plugin objects alone never read sys.path.
    sources = load_distributions(names) if names else []
    sources += [PluginSource(distribution=d, name=d, plugin=p) for d, p in (plugins or {}).items()]
    return sources


def contributions_of(
    sources: Sequence[PluginSource], settings: Settings | None = None,
) -> list[Contribution]:
    """What each distribution's hooks return (``toolhost_domains``, then
    ``toolhost_tools(settings)``), called one plugin at a time as at startup, merged per
    distribution. Nothing is validated here: that is ``registration_problems``.

    :raises PluginError: a plugin pluggy refuses, a misspelt or removed hookimpl, a hook that
        raises or returns the wrong type; the message names the distribution.
    """
    pm = make_plugin_manager(sources)
    return collect_contributions(pm, settings if settings is not None else Settings())


def host_for(
    plugins: Mapping[str, object] | Sequence[PluginSource],
    *,
    clock: Clock | None = None,
    settings: Settings | None = None,
    data_dir: Path | None = None,
    policy: Policy | None = None,
) -> Host:
    """A Host over ``{distribution: plugin}`` objects, or over the sources ``load_plugins``
    returned, registered exactly as at startup, with a FixedClock by default and its stores
    in ``data_dir`` (a fresh temporary directory, removed by ``close``, when omitted).

    :raises PluginError: a plugin that does not register or whose hook fails.
    :raises RegistrationRefused: registration refuses what the plugins return.
    """
    if isinstance(plugins, Mapping):
        sources = load_plugins(plugins=plugins)
    else:
        sources = list(plugins)
        if not all(isinstance(s, PluginSource) for s in sources):
            raise TypeError("host_for takes {distribution: plugin} or the list load_plugins() "
                            "returns (for installed names: host_for(load_plugins(names)))")
    return Host.from_sources(
        sources, clock=clock if clock is not None else FixedClock(DEFAULT_INSTANT),
        settings=settings, data_dir=data_dir, policy=policy,
    )


class Harness:
    """A real host over the plugins under test, driven synchronously from a test.

    Build one with ``Harness.over(...)`` (or take the ``toolhost_host`` fixture). Everything
    runs through the host's real pipeline and stores; use it as a context manager, or call
    ``close``, to release them.
    """

    def __init__(self, host: Host) -> None:
        self.host = host
        # The runs ``context`` started for a caller who never sees them, ended at ``close``:
        # a run that is never ended keeps its workspace (a mounted filesystem on a host that
        # sizes workspaces) after the process, in a data directory the test gave.
        self._own_runs: list[Run] = []

    @classmethod
    def over(
        cls,
        plugins: Mapping[str, object] | Sequence[str],
        *,
        settings: Mapping[str, str] | Settings | None = None,
        clock: Clock | None = None,
        data_dir: Path | None = None,
        policy: Policy | None = None,
        http_transport: httpx.BaseTransport | None = None,
        async_http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> Harness:
        """A harness over plugin objects that are not installed (``{distribution: module}``)
        or over installed distributions by name (``("toolhost-math",)``, loaded alone)."""
        if not isinstance(settings, Settings):
            settings = Settings(env=dict(settings or {}))
        if isinstance(plugins, Mapping):
            sources = load_plugins(plugins=plugins)
        else:
            sources = load_plugins(plugins)
        host = Host.from_sources(
            sources, settings=settings,
            clock=clock if clock is not None else FixedClock(DEFAULT_INSTANT),
            data_dir=data_dir, policy=policy, http_transport=http_transport,
            async_http_transport=async_http_transport,
        )
        return cls(host)

    # ------------------------------------------------------------------ calls

    def invoke(self, name: str, /, **arguments: Any) -> Outcome:
        """One call of the latest version through the pipeline, in a run of its own that
        enables every registered tool and grants every scope they require."""
        return self.call(name, arguments)

    def call(
        self, name: str, arguments: Any, *, version: str | None = None, run: Run | None = None,
        hold: bool = False,
    ) -> Outcome:
        """One call with full control: a pinned ``version``, a ``run`` of your own
        (``start_run``), arguments that need not be an object. ``hold``: a call that needs an
        approval waits for one given within the call (``approve(..., run=run)``), as an MCP
        client's form gives it, so its run does not pause."""
        return self.host.invoke_sync(name, arguments, version=version, run=run, hold=hold)

    def approve(self, invocation_id: str, approver: str = "tester", *,
                run: Run | None = None) -> Outcome:
        """Approve a paused call and run it: in ``run`` when the approval is given within the
        call (its workspace, deadline and cancellation), else as ``toolhost approve`` does."""
        return self.host.approve_sync(invocation_id, approver, run=run)

    def deny(self, invocation_id: str, reason: str = "denied in a test") -> Outcome:
        return self.host.pipeline.deny(invocation_id, "tester", reason)

    def record(self, invocation_id: str) -> InvocationRecord:
        """The invocation's durable row."""
        return self.host.pipeline.invocations.get(invocation_id)

    # ------------------------------------------------------------------ runs and contexts

    def start_run(
        self,
        *,
        scopes: Iterable[str] | None = None,
        enabled_tools: Iterable[str] | None = None,
        workspace: Path | str | None = None,
        principal: str | None = None,
        **options: Any,
    ) -> Run:
        """A run: ``scopes`` (default: every scope a registered tool requires),
        ``enabled_tools`` (default: every registered tool), ``workspace`` (an existing
        directory; default: a fresh one), ``principal`` (whose run: the id a token would
        give; default "tester" with scopes, else the local operator), and
        ``Host.start_run``'s other options (``pins``, ``timeout_s``, ``conversation_id``,
        ``user_turn``, ``run_id``)."""
        who = None
        if scopes is not None or principal is not None:
            granted = (frozenset(scopes) if scopes is not None
                       else frozenset(s for r in self.host.registry for s in r.tool.scopes))
            who = Principal("tester" if principal is None else principal, granted)
        tools = self.host.registry.names() if enabled_tools is None else enabled_tools
        return self.host.start_run(principal=who, enabled_tools=tools,
                                   workspace=workspace, **options)

    def end_run(self, run: Run) -> RunOutcome:
        """End the run (its fresh workspace is discarded); the files attached to its reply."""
        return self.host.end_run(run)

    def context(
        self,
        *,
        run: Run | None = None,
        timeout_s: float = 10.0,
        cancellation: CancellationEvent | None = None,
    ) -> ToolExecutionContext:
        """A context for calling a tool body directly, bound to ``run`` (default: a fresh run
        with a fresh workspace, ended when the harness closes): its workspace, its run-bound
        artifact writer, a deadline ``timeout_s`` from now, and a cancellation of its own (or
        ``cancellation``)."""
        if run is None:
            run = self.start_run()
            self._own_runs.append(run)
        return self.host.pipeline.context_for(
            run, deadline=self.host.deadline_in(timeout_s),
            cancellation=cancellation if cancellation is not None else CancellationEvent(),
        )

    def services(self, distribution: str) -> Services:
        """The Services the host builds ``distribution``'s tools with."""
        return self.host.services_for(distribution)

    def tool(self, name: str, version: str | None = None) -> ToolCallable:
        """The tool body as the host builds it (once per host)."""
        return self.host._tool_callable(self.host.registry.resolve(name, version))

    def run_body(self, name: str, arguments: Mapping[str, Any],
                 context: ToolExecutionContext | None = None) -> Any:
        """Call the body directly (no pipeline), awaiting it if it is async: what it returns,
        or the exception it raises."""
        result = self.tool(name)(arguments, context if context is not None else self.context())
        if asyncio.iscoroutine(result):
            return asyncio.run(result)
        return result

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """End the runs ``context`` started, then close the host. A run the test started
        (``start_run``) is the test's to end: one left paused is still live for the next
        harness over the same data directory, as a paused run is for the next process."""
        runs, self._own_runs = self._own_runs, []
        failed: Exception | None = None
        try:
            for run in runs:
                if self.host.closed:
                    break  # closed by the test: its workspaces went with it
                try:
                    self.host.release_run(run)
                except Exception as exc:  # the other runs, and the host, still close
                    failed = failed or exc
        finally:
            self.host.close()
        if failed is not None:
            raise failed

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def toolhost_plugins() -> Mapping[str, object] | Sequence[str]:
    """The plugins ``toolhost_host`` runs: override it in your conftest with
    ``{"your-dist": your_plugin_module}`` or ``("your-dist",)`` (installed)."""
    pytest.fail(
        "override the toolhost_plugins fixture in your conftest: return "
        '{"your-dist": plugin_module} or ("your-dist",)', pytrace=False,
    )


@pytest.fixture
def toolhost_settings() -> Mapping[str, str]:
    """The environment ``toolhost_tools(settings)`` sees; override it to turn conditional
    tools on (``{"AGENT_PEOPLE_ENABLED": "1"}``)."""
    return {}


@pytest.fixture
def toolhost_host(
    toolhost_plugins: Mapping[str, object] | Sequence[str],
    toolhost_settings: Mapping[str, str],
) -> Iterator[Harness]:
    """A Harness over ``toolhost_plugins`` with a temporary data directory, closed and
    removed after the test."""
    # No data_dir: the host makes a temporary one and removes it on close.
    with Harness.over(toolhost_plugins, settings=toolhost_settings) as harness:
        yield harness
