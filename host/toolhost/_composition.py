"""The composition root: discover plugins, register their tools, build the pipeline.

Nothing here runs at import time. ``load_host()`` does the work, once, when a command needs
it; tests build their own host from plugin objects with ``Host.from_plugins``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import attrs

# The clock and the settings are imported where they are used: ``toolhost --help`` imports
# this module for the front-end names below and should pay for nothing else.
# Registration (pluggy, the schemas: ~10 ms) and the tools' context are imported where a host
# is made (``discover``, ``make_plugin_manager`` and ``register`` below): a command that only
# reads the record (``Stores``) never needs them.
if TYPE_CHECKING:
    import httpx
    import pluggy

    from toolhost._adapters.fs_workspace import WorkspaceHandle
    from toolhost._adapters.http import HttpClients
    from toolhost._adapters.mcp_bounds import MAX_CALL_VALUES, ValueCount
    from toolhost._adapters.pg_routes import PostgresRouteTable
    from toolhost._adapters.run_workspaces import ApprovalRefusal, RunWorkspace, RunWorkspaces
    from toolhost._model.artifacts import ArtifactRef
    from toolhost._model.context import Principal, Services, ToolCallable
    from toolhost._model.outcome import Outcome, ToolFailure
    from toolhost._model.setting_spec import SettingSpec
    from toolhost._model.settings import Settings
    from toolhost._model.spec import Tool
    from toolhost._pipeline.pipeline import Pipeline
    from toolhost._pipeline.policy import Policy, PolicyDecision
    from toolhost._pipeline.steps import Prepared
    from toolhost._pipeline.telemetry import Telemetry
    from toolhost._ports.clock import Clock
    from toolhost._registration.discovery import Contribution
    from toolhost._registration.gateway import Gateway
    from toolhost._registration.readiness import ReadinessProbes
    from toolhost._registration.validator_cache import ValidatorCache

# What the front ends (``_cli``, ``_mcp``) import from the rest of the host, all of it from
# here (tests/test_architecture.py): the value types, errors and helpers they share. Each name
# loads on first use (PEP 562, as ``toolhost``'s public names do), so a command pays for the
# modules it uses and no more.
if TYPE_CHECKING:
    from toolhost._model import host_reasons, host_settings
    from toolhost._model.artifacts import (
        ARTIFACT_CEILING,
        ArtifactCorrupted,
        ArtifactError,
        ArtifactNotFound,
        ArtifactRecord,
        ArtifactStoreUnavailable,
    )
    from toolhost._model.convert import spec_to_json
    from toolhost._model.data_layout import default_data_dir
    from toolhost._model.digest import canonical_text, shown_text
    from toolhost._model.errors import ToolhostError, UsageError
    from toolhost._model.invocations import (
        InvocationNotFound,
        InvocationRecord,
        InvocationRecordDamaged,
        InvocationState,
        OwnerState,
    )
    from toolhost._model.nesting import MAX_ARGUMENT_DEPTH, nests_deeper
    from toolhost._model.printable import escaped, prints
    from toolhost._model.routes import HEARTBEAT_S, HostAddress, RoutesUnavailable
    from toolhost._model.runs import (
        MAX_DEADLINE_S,
        CancellationEvent,
        Run,
        RunOutcome,
        ToolCall,
        valid_run_id,
    )
    from toolhost._model.secrets import MASK
    from toolhost._model.settings import (
        SettingError,
        StoreUnavailable,
        is_secret_name,
        quoted_value,
        redact_url_password,
    )
    from toolhost._model.small_file import UnreadableFile, read_small_file
    from toolhost._pipeline.approvals import (
        ApprovalNotRecorded,
        ApprovalRefused,
        InvocationStateError,
        Resumed,
    )
    from toolhost._pipeline.artifacts import ArtifactResolver, RunArtifactWriter
    from toolhost._pipeline.attachments import ATTACHED_ORIGINS
    from toolhost._pipeline.execution import run_sync
    from toolhost._pipeline.log import apply_logging, get_logger
    from toolhost._pipeline.log import stderr as log_stderr
    from toolhost._pipeline.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
    from toolhost._pipeline.policy import PolicyAction, PolicyConfigError
    from toolhost._pipeline.progress import Progress, reporting
    from toolhost._pipeline.recovery import Recovered, RecoveryAction
    from toolhost._pipeline.rows import rows_in
    from toolhost._pipeline.tracing import continued_trace, parent_context
    from toolhost._pipeline.tracing import step as trace_step
    from toolhost._ports.artifacts import ArtifactStore, DamagedArtifact
    from toolhost._ports.invocations import InvocationStore
    from toolhost._ports.logins import EndedLogins
    from toolhost._ports.routes import RouteTable
    from toolhost._registration.discovery import (
        PluginError,
        PluginSource,
        installed_distributions,
    )
    from toolhost._registration.refusals import Registered, RegistrationRefused
    from toolhost._registration.registry import (
        PinError,
        Registry,
        UnknownTool,
        parse_pins,
        version_key,
    )

__all__ = [
    "ARTIFACT_CEILING",
    "ATTACHED_ORIGINS",
    "HEARTBEAT_S",
    "MASK",
    "MAX_ARGUMENT_DEPTH",
    "MAX_CALL_VALUES",
    "MAX_DEADLINE_S",
    "METRICS_CONTENT_TYPE",
    "UI_SECRET_BYTES",
    "ApprovalNotRecorded",
    "ApprovalRefused",
    "ArtifactCorrupted",
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactRecord",
    "ArtifactStore",
    "ArtifactStoreUnavailable",
    "CancellationEvent",
    "DamagedArtifact",
    "EndedLogins",
    "Host",
    "HostAddress",
    "InvocationNotFound",
    "InvocationRecord",
    "InvocationRecordDamaged",
    "InvocationState",
    "InvocationStateError",
    "InvocationStore",
    "OwnerState",
    "PinError",
    "PluginError",
    "PluginSource",
    "PolicyAction",
    "PolicyConfigError",
    "Progress",
    "ReadinessProbes",
    "Recovered",
    "RecoveryAction",
    "Registered",
    "RegistrationRefused",
    "Registry",
    "Resumed",
    "RouteTable",
    "RoutesUnavailable",
    "Run",
    "RunOutcome",
    "SettingError",
    "Settings",
    "StoreUnavailable",
    "Stores",
    "ToolCall",
    "ToolhostError",
    "UnknownTool",
    "UnreadableFile",
    "UsageError",
    "ValueCount",
    "apply_logging",
    "canonical_text",
    "check_artifact_store_settings",
    "claim_served",
    "continued_trace",
    "declared_settings",
    "default_data_dir",
    "determinism_scan",
    "escaped",
    "get_logger",
    "host_reasons",
    "host_settings",
    "installed_distributions",
    "is_secret_name",
    "load_host",
    "load_stores",
    "log_stderr",
    "mcp_server",
    "nests_deeper",
    "parent_context",
    "parse_pins",
    "prints",
    "quoted_value",
    "read_small_file",
    "readiness_probes",
    "redact_url_password",
    "remove_tree",
    "reporting",
    "rows_in",
    "run_sync",
    "shown_text",
    "spec_to_json",
    "start_gateway",
    "trace_step",
    "ui_secret",
    "valid_run_id",
    "version_key",
    "workspace_refusal",
]


def discover(settings: Settings) -> list[PluginSource]:
    """``toolhost._registration.discovery.discover``: every plugin the settings select."""
    from toolhost._registration.discovery import discover as discover_plugins

    return discover_plugins(settings)


def make_plugin_manager(sources: Sequence[PluginSource]) -> pluggy.PluginManager:
    """``toolhost._registration.discovery.make_plugin_manager``."""
    from toolhost._registration.discovery import make_plugin_manager as plugin_manager

    return plugin_manager(sources)


def register(contributions: Sequence[Contribution], *, cache: ValidatorCache | None = None,
             gateway: Contribution | None = None) -> tuple[list[Registered], dict[str, str]]:
    """``toolhost._registration.refusals.register``: the registrations and the message table,
    or RegistrationRefused."""
    from toolhost._registration.refusals import register as register_tools

    return register_tools(contributions, cache=cache, gateway=gateway)


def remove_tree(root: Path) -> None:
    """Remove a directory tree however deep it is (the test kit's ``remove_tree``):
    ``shutil.rmtree`` recurses once per level and fails on a tree a sandboxed command left."""
    from toolhost._adapters.fs_workspace import remove_tree as remove

    remove(root)


#: The most lines of ``Tool(describe=...)`` an approval shows: email.unsubscribe's largest
#: call (25 requests, one line each) is shown whole.
DESCRIBED_LINES: Final = 25
#: The most characters of one such line, after escaping.
DESCRIBED_CHARS: Final = 300
#: How long a describer may take: a person is waiting to read the call (D473).
DESCRIBE_TIMEOUT_S: Final = 5.0


def _described(line: str) -> str:
    from toolhost._model.printable import escaped

    # Escaped first: the bound is on what is shown, and nothing unprintable survives a cut.
    shown = escaped(line)
    return shown if len(shown) <= DESCRIBED_CHARS else shown[:DESCRIBED_CHARS - 1] + "…"


class Host:
    """A registry that passed registration, its message table, and the pipeline over them.

    The pipeline and its stores are built on first use, so ``toolhost check`` pays for
    registration and nothing else.
    """

    def __init__(
        self,
        registry: Registry,
        messages: Mapping[str, str],
        services: Services,
        settings: Settings,
        *,
        data_dir: Path | None = None,
        policy: Policy | None = None,
        http_transport: httpx.BaseTransport | None = None,
        async_http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.registry = registry
        self.messages = dict(messages)
        self.services = services
        self.settings = settings
        self._data_dir = data_dir
        # A data directory the host made for itself (none given) is the host's to remove.
        self._owns_data_dir = False
        self._policy = policy
        self._http_transports = (http_transport, async_http_transport)
        self._http: HttpClients | None = None
        self._built: dict[tuple[str, str], ToolCallable] = {}
        self._services: dict[str, Services] = {}
        self._pipeline: Pipeline | None = None
        self._run_workspaces: RunWorkspaces | None = None
        self._routes: PostgresRouteTable | None = None
        self._closed = False
        #: Stores opened before the host was made (``adopt``), for its pipeline.
        self._adopted: Stores | None = None
        #: The validators' code this start read and generated (``load_host``), written back
        #: once the stores opened: the data directory is then one the host uses (D325).
        self._validators_to_keep: ValidatorCache | None = None
        # What is made on first use (the data directory, the pipeline and its stores, each
        # tool's callable) is made once even when several threads, each with its own loop,
        # make their first call at the same moment.
        self._first_use = threading.RLock()
        #: Each loaded distribution's ``toolhost_settings`` (``toolhost config``, ``plugins``).
        self.declared_settings: Mapping[str, tuple[SettingSpec, ...]] = {}
        self._plugin_manager: pluggy.PluginManager | None = None
        #: The MCP gateway (``[mcp.servers.<name>]``): its servers' tools are in the registry.
        self.gateway: Gateway | None = None
        #: Told the new registry when the gateway added tools (``on_registry_changed``).
        self._registry_listeners: list[Callable[[Registry], None]] = []

    def _withdrawn(self, name: str) -> ToolFailure | None:
        """What a call of ``name`` fails with while the gateway has it disabled (D452)."""
        return self.gateway.refusal_of(name) if self.gateway is not None else None

    @classmethod
    def from_sources(
        cls,
        sources: Sequence[PluginSource],
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        data_dir: Path | None = None,
        policy: Policy | None = None,
        http_transport: httpx.BaseTransport | None = None,
        async_http_transport: httpx.AsyncBaseTransport | None = None,
        plugin_manager: pluggy.PluginManager | None = None,
        validator_cache: ValidatorCache | None = None,
        gateway: Gateway | None = None,
    ) -> Host:
        """Register exactly these plugins. Raises PluginError or RegistrationRefused.

        Without ``data_dir`` the stores live in a fresh temporary directory that ``close``
        removes (tests, conformance); ``load_host`` passes the operator's TOOLHOST_DATA_DIR.
        The transports, when given, serve every client ``Services.http`` builds (tests).
        ``plugin_manager``: ``make_plugin_manager(sources)`` already made (``toolhost check``
        shares it with its readiness probes). ``validator_cache``: the validators' generated
        code from earlier starts (``load_host`` reads it from the data directory); what is
        generated now is added to it, and written only by its owner's ``save``. ``gateway``:
        the MCP gateway, started; its tools register as the host's own, and ``close``
        closes it (a refused start closes it here).
        """
        try:
            host = cls._from_sources(sources, settings=settings, clock=clock, data_dir=data_dir,
                                     policy=policy, http_transport=http_transport,
                                     async_http_transport=async_http_transport,
                                     plugin_manager=plugin_manager,
                                     validator_cache=validator_cache, gateway=gateway)
        except BaseException:
            if gateway is not None:
                gateway.close()
            raise
        host.gateway = gateway
        if gateway is not None:
            gateway.on_tools_added(host.add_gateway_tools)
        return host

    @classmethod
    def _from_sources(
        cls, sources: Sequence[PluginSource], *, settings: Settings | None, clock: Clock | None,
        data_dir: Path | None, policy: Policy | None,
        http_transport: httpx.BaseTransport | None,
        async_http_transport: httpx.AsyncBaseTransport | None,
        plugin_manager: pluggy.PluginManager | None, validator_cache: ValidatorCache | None,
        gateway: Gateway | None,
    ) -> Host:
        from toolhost._adapters.system_clock import SystemClock
        from toolhost._model.context import Services
        from toolhost._model.settings import Settings
        from toolhost._registration.discovery import collect_contributions, collect_settings
        from toolhost._registration.registry import Registry

        settings = settings if settings is not None else Settings()
        pm = plugin_manager if plugin_manager is not None else make_plugin_manager(sources)
        declared = collect_settings(pm)
        for distribution, specs in declared.items():
            # What toolhost.toml's [plugins.<distribution>] sets, now that its keys are known.
            settings = settings.with_plugin_settings(distribution, specs)
        registered, messages = register(
            collect_contributions(pm, settings), cache=validator_cache,
            gateway=gateway.contribution() if gateway is not None else None)
        services = Services(clock=clock if clock is not None else SystemClock(), settings=settings)
        host = cls(Registry(registered), messages, services, settings, data_dir=data_dir,
                   policy=policy, http_transport=http_transport,
                   async_http_transport=async_http_transport)
        host.declared_settings = declared
        host._plugin_manager = pm
        return host

    @classmethod
    def from_plugins(
        cls,
        plugins: Mapping[str, object],
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        data_dir: Path | None = None,
        policy: Policy | None = None,
        http_transport: httpx.BaseTransport | None = None,
        async_http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> Host:
        """Register plugin objects that are not installed: ``{distribution: plugin}``."""
        from toolhost._registration.discovery import PluginSource

        sources = [PluginSource(distribution=d, name=d, plugin=p) for d, p in plugins.items()]
        return cls.from_sources(sources, settings=settings, clock=clock, data_dir=data_dir,
                                policy=policy, http_transport=http_transport,
                                async_http_transport=async_http_transport)

    # ------------------------------------------------------------------ composition

    @property
    def clock(self) -> Clock:
        return self.services.clock

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            with self._first_use:
                if self._data_dir is None:
                    import tempfile  # only a host without a data directory (tests) needs it

                    self._owns_data_dir = True
                    self._data_dir = Path(tempfile.mkdtemp(prefix="toolhost-"))
        return self._data_dir

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            with self._first_use:
                if self._pipeline is None:
                    self._pipeline = self._compose_pipeline()
        return self._pipeline

    def _compose_pipeline(self) -> Pipeline:
        from toolhost._adapters.system_clock import monotonic, new_invocation_id
        from toolhost._pipeline.pipeline import Pipeline
        from toolhost._pipeline.policy import policy_from_settings
        from toolhost._pipeline.telemetry import Telemetry

        policy = self._policy if self._policy is not None else policy_from_settings(
            self.settings.env)
        invocations, artifacts = (
            self._adopted.hand_over() if self._adopted is not None
            else _open_stores(self.settings, self.clock, policy, lambda: self.data_dir))
        self._adopted = None
        kept, self._validators_to_keep = self._validators_to_keep, None
        if kept is not None:
            kept.save()  # never an error: a cache that cannot be written is not written
        return Pipeline(
            registry=self.registry,
            messages=self.messages,
            build=self._tool_callable,
            policy=policy,
            invocations=invocations,
            artifacts=artifacts,
            clock=self.clock,
            new_id=new_invocation_id,
            monotonic=monotonic,
            workspace_for=self._approval_workspace,
            telemetry=Telemetry.from_settings(self.settings, monotonic),
            withdrawn=self._withdrawn,
        )

    def adopt(self, stores: Stores) -> None:
        """Compose the pipeline, when it is first used, over these stores of the same data
        directory, opened already (``approve`` looked its row up there before the plugins
        were loaded), rather than opening the stores again; closing them is the host's."""
        with self._first_use:
            if self._pipeline is None:
                self._adopted = stores

    @property
    def run_workspaces(self) -> RunWorkspaces:
        """Every run's workspace on this host (``toolhost._adapters.run_workspaces``): the
        generation a live run uses, whichever process of the host uses it."""
        if self._run_workspaces is None:
            with self._first_use:
                if self._run_workspaces is None:
                    from toolhost._adapters.run_workspaces import RunWorkspaces
                    from toolhost._adapters.sized_fs import SizedFilesystems

                    workspaces = self.data_dir / "workspaces"
                    # Owner only (also one an older version made): no other local user may
                    # reach a workspace, whose files a sandboxed command made as this
                    # process's user. A failure here resurfaces, reported, when a workspace is
                    # first created.
                    try:
                        workspaces.mkdir(mode=0o700, parents=True, exist_ok=True)
                        workspaces.chmod(0o700)
                    except OSError:
                        pass
                    # Each workspace made here holds its quota as a filesystem (D265).
                    self._run_workspaces = RunWorkspaces(
                        workspaces, SizedFilesystems(self.settings.workspace_quota_bytes))
        return self._run_workspaces

    @property
    def loaded_distributions(self) -> frozenset[str]:
        """The distributions whose plugins this host loaded (registered tools or not)."""
        if self._plugin_manager is None:
            return frozenset(r.distribution for r in self.registry)
        return frozenset(name.split(":", 1)[0]
                         for name, _ in self._plugin_manager.list_name_plugin())

    def add_gateway_tools(self, tools: Sequence[Tool]) -> None:
        """Register tools the MCP gateway found after the start (a server's changed listing,
        or a server reached late), through the same steps as at the start, each alone; the
        registry is replaced whole (readers holding the old one go on with it), and each
        ``on_registry_changed`` listener is told. Called on the gateway's listing thread."""
        from toolhost._registration.discovery import Contribution
        from toolhost._registration.gateway import GATEWAY_DISTRIBUTION
        from toolhost._registration.registry import Registry

        known = set(self.registry.names())
        fresh = tuple(t for t in tools if t.spec.name not in known)
        if not fresh:
            return
        # Compiled before the lock: a call's first use of a tool (``_tool_callable``) waits
        # on it, and only the swap needs it.
        registered, table = register([], gateway=Contribution(GATEWAY_DISTRIBUTION, (), fresh))
        with self._first_use:
            known = set(self.registry.names())
            registered = [r for r in registered if r.spec.name not in known]
            if not registered:
                return
            # The message table is shared with the pipeline: the new reasons land in it
            # before any call can resolve the new tools.
            self.messages.update(table)
            registry = Registry([*self.registry, *registered])
            self.registry = registry
            if self._pipeline is not None:
                self._pipeline.registry = registry
            listeners = list(self._registry_listeners)
        for listener in listeners:
            listener(registry)

    def on_registry_changed(self, listener: Callable[[Registry], None]) -> None:
        """Call ``listener(registry)`` (on the gateway's listing thread) after tools were
        added."""
        with self._first_use:
            self._registry_listeners.append(listener)

    def readiness(self) -> dict[str, list[str]]:
        """Each loaded distribution's ``toolhost_readiness`` lines (empty: ready), called one
        after another with these settings (``toolhost plugins``; ``check`` overlaps them).

        :raises PluginError: a hook raised or returned something else than lines.
        """
        from toolhost._registration.discovery import call_each
        from toolhost._registration.readiness import readiness_lines

        if self._plugin_manager is None:
            return {}
        found: dict[str, list[str]] = {}
        for name, lines in call_each(self._plugin_manager, "toolhost_readiness",
                                     {"settings": self.settings}).items():
            dist = name.split(":", 1)[0]
            found.setdefault(dist, []).extend(readiness_lines(dist, lines))
        return found

    def workspace_quota_problem(self) -> str | None:
        """Why the workspaces this host makes cannot hold their byte quota as filesystems of
        its size (D265), or None when they can: cheap, nothing is made or mounted."""
        from toolhost._adapters.sized_fs import SizedFilesystems

        return SizedFilesystems(self.settings.workspace_quota_bytes).problem()

    def data_directory_problem(self) -> str | None:
        """Why no command could use the data directory because a file stands in its place
        (or on its way), or None: cheap, nothing is made (``toolhost check``)."""
        from toolhost._model.data_layout import file_in_the_way

        directory = Path(self.data_dir)
        if not file_in_the_way(directory):
            return None
        import errno

        from toolhost._adapters.sqlite_db import unusable_directory

        # The line the stores' own start gives (NotADirectoryError: a file in the way).
        return str(unusable_directory(
            NotADirectoryError(errno.ENOTDIR, "Not a directory"), directory))

    def _approval_workspace(self, record: InvocationRecord) -> RunWorkspace:
        """The workspace a call approved (or run again by recovery) outside its run runs in
        (``RunWorkspaces.for_approval``): the operator's directory its row recorded is checked
        again by every rule ``call --workspace`` is checked by. A row no approval decided
        (one ``recover`` runs again) never paused, so it recorded no place: it runs in the run's
        live workspace wherever that is, as when it started (D561)."""
        from toolhost._adapters.run_workspaces import UnnamedRow

        recorded = (record.operator_directory if record.decided_at is not None
                    else UnnamedRow.ANY)
        return self.run_workspaces.for_approval(record.run_id, recorded,
                                                self._kept_directory_refusal)

    def approval_refusal(self, record: InvocationRecord) -> str | None:
        """Why an approval of ``record`` now would be refused, its run having ended here and
        the operator's directory it paused in no longer passing; None when it would run
        (``toolhost approve`` asks first: a refused call is then left awaiting approval)."""
        refused = self.approval_refused(record)
        return None if refused is None else refused.line

    def approval_refused(self, record: InvocationRecord) -> ApprovalRefusal | None:
        """``approval_refusal``, with the same refusal in words naming no directory where
        it has them (its run live elsewhere: the inbox's to a login not an admin, D458)."""
        return self.run_workspaces.approval_refused(record.run_id, record.operator_directory,
                                                    self._kept_directory_refusal)

    def _kept_directory_refusal(self, directory: Path) -> str | None:
        # The rules an operator's directory is held to where it is named (D411, D469, D478):
        # none of the host's places, no nesting with a live run or a served directory.
        return workspace_refusal("the operator's directory the call paused in",
                                 str(directory), self.settings, self.declared_settings)

    def fresh_workspace(self, run_id: str) -> WorkspaceHandle:
        """An empty workspace of its own, under the data directory, removed by ``discard``
        (a run's workspace is ``start_run``'s; this one belongs to nobody but its caller)."""
        from toolhost._adapters.fs_workspace import WorkspaceHandle

        return WorkspaceHandle(self.run_workspaces.detached_path(run_id), owned=True)

    def services_for(self, distribution: str) -> Services:
        """The Services a distribution's tools are built with: the host's clock and settings,
        that distribution's own data directory, the artifact resolver, the HTTP clients."""
        services = self._services.get(distribution)
        if services is None:
            from toolhost._model.settings import plugin_data_dir
            from toolhost._pipeline.artifacts import ArtifactResolver

            services = self._services[distribution] = attrs.evolve(
                self.services,
                data_dir=plugin_data_dir(self.data_dir, distribution),
                artifacts=_ContextReader(ArtifactResolver(self.pipeline.artifacts, self.clock)),
                http_clients=self._http_clients,
            )
        return services

    def describe_call(self, record: InvocationRecord) -> tuple[str, list[str]] | None:
        """What the row's tool says its call will do (``Tool(describe=...)``): the tool's
        distribution and its lines, each escaped and cut, for a person deciding on it; None
        when the tool is not registered here or describes nothing. A describer that fails
        or answers anything but lines gives one static line (and a warning in the log):
        neither its traceback nor its words reach the person."""
        from toolhost._model.printable import escaped
        from toolhost._pipeline.log import get_logger
        from toolhost._registration.registry import UnknownTool, UnknownVersion

        try:
            registered = self.registry.resolve(record.tool_name, record.tool_version)
        except (UnknownTool, UnknownVersion):
            return None
        describe = registered.tool.describe
        if describe is None:
            return None
        distribution = registered.distribution
        services = self.services_for(distribution)
        answer: list[Any] = []

        def ask() -> None:
            # Any exception, SystemExit and KeyboardInterrupt too: a describer's exit must
            # not end a server (the pipeline keeps a body's the same way).
            try:
                answer.append(describe(record.arguments, services, record.principal_id))
            except BaseException as exc:  # reported as one static line
                answer.append(exc)

        # On a thread of its own, waited for a bounded time: one that hangs leaves the person
        # a static line, not a command or a question that never comes.
        asking = threading.Thread(target=ask, name="toolhost-describe", daemon=True)
        asking.start()
        asking.join(DESCRIBE_TIMEOUT_S)
        said = answer[0] if answer else TimeoutError(
            f"describe took more than {DESCRIBE_TIMEOUT_S:g} s")
        if isinstance(said, BaseException | str | bytes) or not isinstance(
                said, Sequence) or not all(isinstance(line, str) for line in said):
            error = said if isinstance(said, BaseException) else TypeError(
                f"describe returned {type(said).__name__}, not lines")
            get_logger(invocation_id=record.id, tool=record.tool_name).warning(
                "tool.describe.failed", distribution=distribution, error=type(error).__name__,
                detail=escaped(str(error))[:DESCRIBED_CHARS])
            return distribution, [f"({distribution} could not describe this call; the log "
                                  "says why)"]
        lines = [_described(line) for line in said[:DESCRIBED_LINES]]
        if len(said) > DESCRIBED_LINES:
            lines.append(f"({len(said) - DESCRIBED_LINES} more lines not shown)")
        return distribution, lines

    def fetch(self, url: str, *, timeout: float = 10.0, limit: int = 1024 * 1024) -> bytes:
        """GET ``url`` with the host's own HTTP client (the rules a plugin's client has: no
        proxy variables, no redirects, no retries, ``TOOLHOST_CA_BUNDLE``): the body of a 200,
        at most ``limit`` bytes. :raises ValueError: any other status, or a longer body;
        httpx's errors for a request that failed."""
        with self._http_clients().client(timeout=timeout) as client, \
                client.stream("GET", url, headers=_UNENCODED) as response:
            return _body_of_200(response, f"GET {url}", limit)

    def post_form(self, url: str, form: dict[str, str], basic_auth: tuple[str, str] | None,
                  limit: int = 1024 * 1024, *, timeout: float = 10.0) -> bytes:
        """POST ``form`` (``application/x-www-form-urlencoded``) to ``url`` with HTTP Basic
        credentials (None: a public client's request, none), by the host's own HTTP client
        (the rules of ``fetch``): the body of a 200, at most ``limit`` bytes. :raises
        ValueError: any other status, or a longer body; httpx's errors for a request that
        failed."""
        import httpx

        with self._http_clients().client(timeout=timeout) as client, client.stream(
                "POST", url, data=form,
                auth=httpx.BasicAuth(*basic_auth) if basic_auth is not None else None,
                headers={"Accept": "application/json", **_UNENCODED}) as response:
            return _body_of_200(response, f"POST {url}", limit)

    def readable_by_others(self) -> list[tuple[Path, int, str]]:
        """The data directory and the record's database files that others may read, each
        with its mode and the ``chmod`` that closes it (``toolhost check`` and ``serve`` say
        so; nothing changes them but the operator)."""
        from toolhost._model.data_layout import readable_by_others

        return readable_by_others(self.data_dir)

    def ready(self) -> bool:
        """Whether the record and the artifact store answer now (``GET /readyz``): a row of
        each, and the artifact store's content where it has a server of its own (a bucket)."""
        from toolhost._adapters.artifact_store import JoinedArtifactStore

        try:
            self.pipeline.invocations.list(limit=1)
            artifacts = self.pipeline.artifacts
            if isinstance(artifacts, JoinedArtifactStore):  # every store the host composes
                return artifacts.ready()
            artifacts.list_artifacts(limit=1)  # a store the port alone describes: a row
        except Exception:
            return False
        return True

    def _http_clients(self) -> HttpClients:
        # One per host: its TLS context (with TOOLHOST_CA_BUNDLE) is built once.
        if self._http is None:
            from toolhost._adapters.http import HttpClients

            transport, async_transport = self._http_transports
            self._http = HttpClients(self.settings, transport=transport,
                                     async_transport=async_transport)
        return self._http

    def _tool_callable(self, registered: Registered) -> ToolCallable:
        # Built on first use, once: registration never constructs anything, and a command
        # that calls one tool pays for building one.
        key = (registered.spec.name, registered.spec.version)
        tool = self._built.get(key)
        if tool is None:
            with self._first_use:
                tool = self._built.get(key)
                if tool is None:
                    services = self.services_for(registered.distribution)
                    tool = self._built[key] = registered.tool.callable_for(services)
        return tool

    def route_table(self) -> RouteTable | None:
        """Where each MCP session of the hosts sharing this record lives (``serve --http``
        behind a balancer): on its PostgreSQL database; None on SQLite (one host)."""
        url = (self.settings.get("TOOLHOST_DATABASE_URL") or "").strip()
        if not url:
            return None
        if self._routes is None:
            with self._first_use:
                if self._routes is None:
                    self.pipeline  # noqa: B018 - the PostgreSQL client is installed, the URL checked
                    from toolhost._adapters.pg_routes import PostgresRouteTable

                    self._routes = PostgresRouteTable(url)
        return self._routes

    def async_http_client(self, *, timeout: httpx.Timeout,
                          limits: httpx.Limits | None = None) -> httpx.AsyncClient:
        """An async client with the host's HTTP rules (``fetch``'s); the caller closes it."""
        return self._http_clients().async_client(timeout=timeout, limits=limits)

    def close(self) -> None:
        """Close the stores' database connections, and remove the data directory if the host
        made it for itself, and the MCP gateway's sessions (their subprocesses, its thread).
        The host is unusable afterwards (``closed``)."""
        self._closed = True
        if self.gateway is not None:
            self.gateway.close()
            self.gateway = None
        if self._routes is not None:
            self._routes.close()
            self._routes = None
        if self._pipeline is not None:
            self._pipeline.close()
            self._pipeline = None
        if self._owns_data_dir and self._data_dir is not None:
            from toolhost._adapters.fs_workspace import remove_tree

            if self._run_workspaces is not None:
                self._run_workspaces.release_all()  # never remove under a mounted workspace
            remove_tree(self._data_dir)
            self._data_dir = None
            self._owns_data_dir = False

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ runs

    def start_run(
        self,
        *,
        principal: Principal | None = None,
        enabled_tools: Iterable[str] | None = None,
        pins: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        user_turn: str | None = None,
        workspace: Path | str | None = None,
        timeout_from: float | None = None,
    ) -> Run:
        """A run for the pipeline, live on this host until ``end_run``. Without a principal:
        the local operator, granted every scope a registered tool requires (the CLI's trust
        level). The run's workspace (``RunWorkspace``) is made on first use under the data
        directory, or is the existing directory ``workspace``; a run id already live here
        (``toolhost call --run``) goes on in the workspace it has. ``timeout_s`` is the run's
        deadline (a run live already keeps the earlier one), which also bounds a call of the
        run approved later, anywhere; it counts from ``timeout_from`` (an ``instant``, such as
        a command's start, before the host was loaded), or from now."""
        from toolhost._adapters.system_clock import monotonic, new_id
        from toolhost._model.context import Principal
        from toolhost._model.runs import Run, valid_run_id

        if principal is None:
            # Every scope the tools need: required ones and those a body checks for some
            # calls only (Tool.checked_scopes: media's references, people's source read).
            scopes = frozenset(s for r in self.registry for s in r.tool.scopes)
            principal = Principal("operator", scopes)
        if run_id is None:
            run_id = new_id()
        elif not valid_run_id(run_id):
            # A run id names the run's workspace directory: it must be a plain name.
            raise ValueError("run_id must be 1 to 128 letters, digits, '.', '_' or '-', "
                             "starting with a letter or digit")
        deadline_at = None
        if timeout_s is not None:
            import datetime as dt

            # The time since timeout_from (loading plugins, a gateway's connect) is spent
            # already: "from now" is when the caller gave the timeout, not after start-up.
            spent = 0.0 if timeout_from is None else max(0.0, monotonic() - timeout_from)
            deadline_at = self.clock.now() + dt.timedelta(seconds=timeout_s - spent)
        # A run already live (a named run's earlier command) keeps its earlier deadline.
        handle, deadline_at = self.run_workspaces.start(
            run_id, directory=Path(workspace) if workspace is not None else None,
            deadline_at=deadline_at)
        deadline = None
        if deadline_at is not None:
            deadline = monotonic() + (deadline_at - self.clock.now()).total_seconds()
        return Run(
            id=run_id,
            workspace=handle,
            principal=principal,
            enabled_tools=frozenset(enabled_tools) if enabled_tools is not None else None,
            pins=dict(pins or {}),
            deadline=deadline,
            deadline_at=deadline_at,
            conversation_id=conversation_id,
            user_turn=user_turn,
        )

    def new_id(self) -> str:
        """A fresh random identifier (32 lowercase hex digits), for what the host names itself."""
        from toolhost._adapters.system_clock import new_id

        return new_id()

    @staticmethod
    def instant() -> float:
        """The monotonic instant now, readable before a host is loaded: where a command's
        run deadline counts from (``start_run``'s ``timeout_from``)."""
        from toolhost._adapters.system_clock import monotonic

        return monotonic()

    def deadline_in(self, seconds: float) -> float:
        """A monotonic instant ``seconds`` from now (a run's or a hand-made context's deadline)."""
        from toolhost._adapters.system_clock import monotonic

        return monotonic() + seconds

    def end_run(self, run: Run) -> RunOutcome:
        """The run is over: its workspace is discarded (an operator's directory is kept) and
        it is no longer live on this host, and what it leaves the owner is returned: the
        files attached to its reply."""
        self.release_run(run)
        from toolhost._model.runs import RunOutcome

        return RunOutcome(run_id=run.id, attachments=self.attachments(run))

    def release_run(self, run: Run) -> None:
        """``end_run`` for a run nobody waits on (an MCP session that ended): its workspace
        is discarded and it is no longer live here; no store is asked for its files."""
        if run.workspace is not None:
            end = getattr(run.workspace, "end", None)
            (end if end is not None else run.workspace.discard)()

    def attachments(self, run: Run) -> tuple[ArtifactRef, ...]:
        """Every file the run has exported or generated so far (D90), in order."""
        return self.attachments_of(run.id)

    def attachments_of(self, run_id: str) -> tuple[ArtifactRef, ...]:
        """``attachments`` of the run with this id."""
        from toolhost._pipeline.attachments import attachments_of

        return attachments_of(self.pipeline.artifacts, run_id)

    def run_outcome(self, run: Run) -> RunOutcome:
        """What the run has left its owner so far, without ending it (a named run the next
        command goes on with): its workspace is let go of, and stays the run's."""
        if run.workspace is not None:
            close = getattr(run.workspace, "close", None)
            if close is not None:
                close()
        from toolhost._model.runs import RunOutcome

        return RunOutcome(run_id=run.id, attachments=self.attachments(run))

    def local_run(self, workspace: Path | str | None = None, *, run_id: str | None = None,
                  conversation_id: str | None = None, user_turn: str | None = None,
                  timeout_s: float | None = None, timeout_from: float | None = None) -> Run:
        """The CLI's run: every registered tool enabled (an operator naming a tool has chosen
        it) and every scope granted."""
        return self.start_run(enabled_tools=self.registry.names(), workspace=workspace,
                              run_id=run_id, conversation_id=conversation_id,
                              user_turn=user_turn, timeout_s=timeout_s,
                              timeout_from=timeout_from)

    # ------------------------------------------------------------------ calls

    async def invoke(
        self, name: str, arguments: Any, *, version: str | None = None, run: Run | None = None,
        hold: bool = False,
    ) -> Outcome:
        """One call through the pipeline (``Pipeline.invoke``; ``hold``: the caller asks for
        an approval within the call), in ``run`` or a local run of its own."""
        return await self.pipeline.invoke(
            run if run is not None else self.local_run(), name, arguments, version=version,
            hold=hold,
        )

    async def invoke_step(self, run: Run, calls: Sequence[ToolCall]) -> list[Outcome]:
        return await self.pipeline.invoke_step(run, calls)

    def invoke_sync(
        self, name: str, arguments: Any, *, version: str | None = None, run: Run | None = None,
        hold: bool = False,
    ) -> Outcome:
        """The synchronous convenience wrapper the CLI uses. Without a run, the call gets a
        local run of its own that ends (and discards its workspace) when the call does."""
        # Deferred: registration alone (`toolhost check`) never needs a loop.
        from toolhost._pipeline.execution import run_sync

        local = run is None
        run = run if run is not None else self.local_run()
        try:
            return run_sync(self.pipeline.invoke(run, name, arguments, version=version,
                                                 hold=hold))
        finally:
            if local:
                self.end_run(run)

    def approve_sync(self, invocation_id: str, approver: str, *,
                     run: Run | None = None) -> Outcome:
        from toolhost._pipeline.execution import run_sync

        return run_sync(self.pipeline.approve(invocation_id, approver, run=run))

    def recover(self, *, rerun: bool = True) -> list[Recovered]:
        """Settle the rows whose owning process is gone (``Pipeline.recover``), synchronously:
        ``toolhost recover``, and a server before it serves."""
        from toolhost._pipeline.execution import run_sync

        self.run_workspaces.sweep_detached()  # what killed approvers left, as their rows
        return run_sync(self.pipeline.recover(rerun=rerun))

    async def recover_cancellable(self, cancellation: CancellationEvent, *,
                                  rerun: bool = True) -> list[Recovered]:
        """``recover``, on the caller's loop, a call it runs again ending cancelled once
        ``cancellation`` is set (``toolhost recover``'s Ctrl-C, as ``approve``'s)."""
        self.run_workspaces.sweep_detached()
        return await self.pipeline.recover(rerun=rerun, cancellation=cancellation)

    def recover_interrupted(self, stopping: threading.Event | None = None) -> list[Recovered]:
        """``recover(rerun=False)`` on the calling thread, without a loop, until ``stopping``
        is set (``Recovery.recover_interrupted``): a server's periodic pass."""
        self.run_workspaces.sweep_detached()
        return self.pipeline.recover_interrupted(stopping)

    # ------------------------------------------------------------------ the front ends' record
    # The CLI and the MCP server reach the pipeline only through these (and the calls above),
    # so what they may do with a row is said here once (tests/test_architecture.py).

    def open(self) -> None:
        """Compose the pipeline now: the stores are opened and migrated, so a data directory,
        database or policy that cannot be used stops the caller here (StoreUnavailable)."""
        self.pipeline  # noqa: B018 - composing it opens the stores

    @property
    def invocations(self) -> InvocationStore:
        """The record's invocation store (the pipeline's)."""
        return self.pipeline.invocations

    @property
    def artifacts(self) -> ArtifactStore:
        """The record's artifact store (the pipeline's)."""
        return self.pipeline.artifacts

    @property
    def ended_logins(self) -> EndedLogins | None:
        """The record's logins of the approvals inbox logged out of, where its store keeps
        them (D324); None: a store without the optional port."""
        store = self.pipeline.invocations
        kept = hasattr(store, "end_login") and hasattr(store, "login_ended")
        return cast("EndedLogins", store) if kept else None

    @property
    def telemetry(self) -> Telemetry | None:
        """The pipeline's spans and metrics, or None when neither is configured."""
        return self.pipeline.telemetry

    def artifact_resolver(self) -> ArtifactResolver:
        """Who may read which artifact, as a tool's ``services.artifacts`` is asked."""
        from toolhost._pipeline.artifacts import ArtifactResolver

        return ArtifactResolver(self.pipeline.artifacts, self.clock)

    def artifact_writer(self, run: Run) -> RunArtifactWriter:
        """The artifact writer a call of ``run`` is given: bound to the run, its conversation
        and its principal."""
        from toolhost._pipeline.artifacts import RunArtifactWriter

        return RunArtifactWriter(self.pipeline.artifacts, run.id, self.clock,
                                 run.conversation_id, principal_id=run.principal.id)

    def row(self, invocation_id: str) -> InvocationRecord:
        """The invocation's row as it stands. :raises InvocationNotFound:"""
        return self.pipeline.row(invocation_id)

    def recorded(self, invocation_id: str) -> Outcome:
        """The outcome as the invocation's row records it. :raises InvocationNotFound:"""
        return self.pipeline.recorded(invocation_id)

    def rows_for(self, run_id: str, prepared: Prepared) -> list[InvocationRecord]:
        """The run's rows for exactly these prepared arguments, oldest first."""
        return self.pipeline.rows_for(run_id, prepared)

    def admit(self, run: Run, name: str) -> Registered:
        """Steps 1-3 alone (``Pipeline.admit``): the registration an unversioned call of
        ``name`` in ``run`` resolves to, or the ``ToolFailure`` it would be refused with."""
        return self.pipeline.admit(run, name)

    def check_scopes(self, principal: Principal, registered: Registered) -> None:
        """Step 3 alone: raises the ``ToolFailure`` a call would be refused with."""
        self.pipeline.check_scopes(principal, registered)

    def prepare(self, registered: Registered, arguments: Any) -> Prepared:
        """Step 4 alone: the validated arguments and their digest, or the ``ToolFailure``."""
        return self.pipeline.prepare(registered, arguments)

    def decide(self, registered: Registered) -> PolicyDecision:
        """Step 5 alone: what the policy decides for calls of this tool."""
        return self.pipeline.decide(registered)

    async def refuse(self, run: Run, name: str, arguments: Any,
                     reason: str | ToolFailure) -> Outcome:
        """End a call before it runs with one of the host's reasons, or a step's failure
        (``Pipeline.refuse``)."""
        return await self.pipeline.refuse(run, name, arguments, reason)

    def check_run_deadline(self, run: Run) -> None:
        """Step 8's check of the run's deadline alone (``Pipeline.check_run_deadline``)."""
        self.pipeline.check_run_deadline(run)

    async def approve(self, invocation_id: str, approver: str, *, run: Run | None = None,
                      cancellation: CancellationEvent | None = None) -> Outcome:
        """Approve a paused call and run it, once (``Pipeline.approve``)."""
        return await self.pipeline.approve(invocation_id, approver, run=run,
                                           cancellation=cancellation)

    async def resume(self, invocation_id: str, approver: str, *,
                     cancellation: CancellationEvent | None = None) -> Resumed:
        """``approve``, saying whether this call acted on the row (``Approvals.resume``)."""
        return await self.pipeline.resume(invocation_id, approver, cancellation=cancellation)

    def expire(self, invocation_id: str) -> Outcome:
        """End a call left waiting past its run's deadline, unrun (``Pipeline.expire``)."""
        return self.pipeline.expire(invocation_id)

    def deny(self, invocation_id: str, approver: str, reason: str) -> Outcome:
        """End a paused call ``denied`` (``Pipeline.deny``)."""
        return self.pipeline.deny(invocation_id, approver, reason)

    def denial(self, invocation_id: str, approver: str, reason: str) -> Resumed:
        """``deny``, saying whether this call acted on the row (``Approvals.denial``)."""
        return self.pipeline.denial(invocation_id, approver, reason)

    def pause(self, run: Run) -> None:
        """The run pauses: a call was left waiting for an approval (``Pipeline.pause``)."""
        self.pipeline.pause(run)

    def abandoned_bodies(self, principal_id: str) -> int:
        """How many of this principal's sync tool bodies their calls stopped waiting for
        still hold a worker thread (``Pipeline.abandoned_bodies``)."""
        from toolhost._pipeline.execution import abandoned

        return abandoned(principal_id)


@attrs.frozen
class _ContextReader:
    """``services.artifacts``: the resolver, asked with the caller's context."""

    resolver: Any

    def read(self, artifact_id: str, context: Any, *, max_bytes: int) -> bytes:
        return bytes(self.resolver.read(
            artifact_id, principal_id=context.principal.id, run_id=context.run_id,
            conversation_id=context.conversation_id, max_bytes=max_bytes,
        ))


def _open_stores(settings: Settings, clock: Clock, policy: Policy,
                 data_dir: Callable[[], Path]) -> tuple[InvocationStore, ArtifactStore]:
    """The record's two stores, opened as a pipeline starts: the log configured (structlog is
    imported only by the first event at its level), a policy an operator changed logged, the
    invocation store opened, then the artifact store. ``data_dir``: the data directory, asked
    for only when a store lives there.

    :raises StoreUnavailable, SettingError:
    """
    from toolhost._pipeline.log import configure_logging, logging_configured, secret_values

    if not logging_configured():
        # structlog's default prints to stdout, which `toolhost serve` uses as a transport.
        configure_logging(clock, level=settings.get("TOOLHOST_LOG_LEVEL") or "warning",
                          secrets=secret_values(settings.env))
    log_policy_changes(policy)
    invocations = _open_invocation_store(settings, data_dir)
    try:
        artifacts = _open_artifact_store(settings, data_dir, clock)
    except BaseException:
        close = getattr(invocations, "close", None)
        if close is not None:
            close()
        raise
    return invocations, artifacts


def _open_invocation_store(settings: Settings, data_dir: Callable[[], Path]) -> InvocationStore:
    """The record: PostgreSQL when TOOLHOST_DATABASE_URL is set, else SQLite in the data
    directory.

    A data directory or database that cannot be used stops the start here, as
    StoreUnavailable (one line naming the path, or the URL without its password), never
    as a traceback from a call.
    """
    url = (settings.get("TOOLHOST_DATABASE_URL") or "").strip()
    if url:
        from toolhost._model.settings import StoreUnavailable

        try:
            from toolhost._adapters.pg_invocations import (
                PostgresInvocationStore,
                checked_conninfo,
            )
        except ImportError as exc:
            raise StoreUnavailable(
                data_dir(), f"{settings.written('TOOLHOST_DATABASE_URL')} needs the PostgreSQL "
                f"client, which is not installed ({exc.name}): pip install "
                "'toolhost-core[postgres]'",
            ) from None
        try:
            checked_conninfo(url, 1, named=settings.named("TOOLHOST_DATABASE_URL"))
        except StoreUnavailable as exc:
            # A value libpq cannot parse is a wrong setting (exit 2, D253), not a database
            # that cannot be used (the store's own StoreUnavailable, exit 1).
            from toolhost._model.settings import SettingError

            raise SettingError(str(exc)) from None
        return PostgresInvocationStore(url)
    from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
    from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore

    conn = connect(data_dir() / DATABASE_NAME)
    try:
        return SQLiteInvocationStore(conn)
    except BaseException:
        conn.close()
        raise


def _open_artifact_store(settings: Settings, data_dir: Callable[[], Path],
                         clock: Clock) -> ArtifactStore:
    """The artifact store: content-addressed files under the data directory, or objects
    in the bucket ``TOOLHOST_ARTIFACT_STORE=s3://bucket/prefix`` names. Metadata goes
    where the content is shared: with a bucket and ``TOOLHOST_DATABASE_URL``, on that
    PostgreSQL database (so hosts on it share the bucket); otherwise in the data
    directory's database (files are one machine's, so their index is too). A bucket or
    database that cannot be used stops the start here, as StoreUnavailable (one line, no
    credential)."""
    from toolhost._adapters.sqlite_artifacts import open_artifact_store
    from toolhost._adapters.sqlite_db import unusable_directory

    url = (settings.get("TOOLHOST_ARTIFACT_STORE") or "").strip()
    database = (settings.get("TOOLHOST_DATABASE_URL") or "").strip()
    if url:
        check_artifact_store_settings(settings)
        if database:
            # The invocation store opened first, so the PostgreSQL client is installed.
            from toolhost._adapters.pg_artifacts import open_pg_s3_artifact_store

            return open_pg_s3_artifact_store(url, database, settings.env, clock,
                                             retention=settings.artifact_retention)
        from toolhost._adapters.s3_artifacts import open_s3_artifact_store

        return open_s3_artifact_store(url, settings.env, data_dir(), clock,
                                      retention=settings.artifact_retention)
    try:
        return open_artifact_store(data_dir(), clock, retention=settings.artifact_retention)
    except OSError as exc:  # the artifacts' directory under the data directory
        raise unusable_directory(exc) from None


#: The shortest TOOLHOST_HTTP_UI_SECRET taken (D526): anyone may get a cookie signed with a
#: key derived from it (the login form's), so a short one can be found offline and every
#: login forged with it.
UI_SECRET_BYTES = 32


def ui_secret(settings: Settings) -> bytes | None:
    """TOOLHOST_HTTP_UI_SECRET's bytes; None when unset (the server makes one of its own).
    Here, not in the server's config, so ``toolhost check`` refuses what ``serve --http``
    refuses without importing the MCP SDK.

    :raises SettingError: it is shorter than UI_SECRET_BYTES (one line naming where it was
        written, never its value)."""
    from toolhost._model.settings import SettingError

    name = "TOOLHOST_HTTP_UI_SECRET"
    configured = (settings.get(name) or "").strip().encode("utf-8", "surrogatepass")
    if configured and len(configured) < UI_SECRET_BYTES:
        raise SettingError(f"{settings.named(name)} must be at least {UI_SECRET_BYTES} "
                           f"bytes of a random string, not {len(configured)} (python3 -c "
                           "'import secrets; print(secrets.token_urlsafe(32))' makes one)")
    return configured or None


def check_artifact_store_settings(settings: Settings) -> None:
    """Refuse a bucket's settings its store would refuse: the S3 URL, its endpoint and the
    trust bundle. Checked here, where the settings know where each value was written, so a
    refusal names that (the stores read the environment's form) and shows no credential;
    ``toolhost check`` runs it too, as every command that opens the stores does.

    :raises SettingError, HttpConfigError: one line naming the setting.
    """
    url = (settings.get("TOOLHOST_ARTIFACT_STORE") or "").strip()
    if not url:
        return
    from toolhost._adapters.http import check_ca_bundle
    from toolhost._adapters.s3_artifacts import (
        S3Location,
        check_endpoint_url,
        endpoint_setting,
        shown_url,
    )

    S3Location.parse(url, named=settings.named_value("TOOLHOST_ARTIFACT_STORE", shown_url(url)))
    endpoint = endpoint_setting(settings.env)
    if endpoint is not None:
        name, value = endpoint
        check_endpoint_url(value, named=settings.named_value(name, shown_url(value)))
    check_ca_bundle(settings)



class Stores:
    """The record's two stores of the data directory (the invocations, the artifacts), opened
    as a pipeline opens them, without a plugin, a tool or a pipeline: what the commands that
    read or settle the record compose (``pending``, ``show``, ``deny``, ``artifacts list``,
    ``get`` and ``purge``, ``approve``'s lookup), so none of them pays for loading the plugins.
    """

    def __init__(self, settings: Settings, policy: Policy, clock: Clock | None = None) -> None:
        from toolhost._adapters.system_clock import SystemClock

        self.settings = settings
        self.clock = clock if clock is not None else SystemClock()
        self._policy = policy
        self._stores: tuple[InvocationStore, ArtifactStore] | None = None
        self._pipeline: Pipeline | None = None

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir

    def open(self) -> None:
        """Open both stores now (a command opens them before it does anything else, so a
        data directory that cannot be used stops it first). :raises StoreUnavailable,
        SettingError:"""
        if self._stores is None:
            self._stores = _open_stores(self.settings, self.clock, self._policy,
                                        lambda: self.data_dir)

    @property
    def invocations(self) -> InvocationStore:
        self.open()
        assert self._stores is not None
        return self._stores[0]

    @property
    def artifacts(self) -> ArtifactStore:
        self.open()
        assert self._stores is not None
        return self._stores[1]

    @property
    def pipeline(self) -> Pipeline:
        """A pipeline over these stores and no tool: it denies and reads rows (its ``denial``,
        ``row``), never runs a call, and its message table is the host's own."""
        if self._pipeline is None:
            from toolhost._adapters.system_clock import monotonic, new_invocation_id
            from toolhost._model.host_reasons import MESSAGES
            from toolhost._pipeline.pipeline import Pipeline
            from toolhost._pipeline.telemetry import Telemetry
            from toolhost._registration.registry import Registry

            self._pipeline = Pipeline(
                registry=Registry([]), messages=MESSAGES, build=_no_tool, policy=self._policy,
                invocations=self.invocations, artifacts=self.artifacts, clock=self.clock,
                new_id=new_invocation_id, monotonic=monotonic,
                telemetry=Telemetry.from_settings(self.settings, monotonic),
            )
        return self._pipeline

    def denial(self, invocation_id: str, approver: str, reason: str) -> Resumed:
        """End a paused call ``denied`` by a pipeline with no tool (``Approvals.denial``),
        saying whether this call acted on the row.

        :raises InvocationNotFound, InvocationStateError:
        """
        return self.pipeline.denial(invocation_id, approver, reason)

    def hand_over(self) -> tuple[InvocationStore, ArtifactStore]:
        """Both stores, opened, for a host's pipeline (``Host.adopt``): closing them is the
        pipeline's from now on, and ``close`` leaves them open."""
        self.open()
        assert self._stores is not None
        stores, self._stores, self._pipeline = self._stores, None, None
        return stores

    def close(self) -> None:
        """Close both stores' connections; the stores are unusable afterwards."""
        stores, self._stores, self._pipeline = self._stores, None, None
        for store in stores or ():
            close = getattr(store, "close", None)
            if close is not None:
                close()


def _no_tool(registered: Registered) -> ToolCallable:
    raise LookupError(f"{registered.spec.name} is not built by a pipeline without tools")


def log_policy_changes(policy: Policy) -> None:
    """Every cell an operator changed, logged when the pipeline is composed (at startup for
    a server); a loosened cell is a warning, written whatever ``TOOLHOST_LOG_LEVEL`` says (a
    call may run unapproved because of it, so no level may hide it)."""
    if not (policy.loosened or policy.tightened):
        return
    from toolhost._pipeline.log import get_logger, unfiltered_logger

    # The configured processors and stream, without the configured level's filter.
    always = unfiltered_logger()
    for cell in policy.loosened:
        always.warning("policy.loosened", cell=cell)
    log = get_logger()
    for cell in policy.tightened:
        log.info("policy.tightened", cell=cell)


def load_host(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    sources: Sequence[PluginSource] | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    keep_validators: bool = False,
    gateway: bool = True,
) -> Host:
    """Discover installed plugins (honouring TOOLHOST_PLUGINS and TOOLHOST_PLUGINS_EXCLUDE),
    or take ``sources`` already discovered, register them, and read the log level and the
    policy configuration, so a bad plugin or a bad setting refuses the start. The data
    directory is opened when the pipeline is first used (``host.pipeline``), which raises
    ``StoreUnavailable`` for one that cannot be used. The validators' code generated at an
    earlier start is read from ``cache/validators.json`` there (keyed by content, as D128's
    scan); with ``keep_validators`` (``toolhost check``) what is generated now is written
    back, even when registration refuses. Other starts write it back once their stores open
    (D325), never before, so a start refused over its data directory leaves it as it was.

    ``gateway=False`` (a command that runs no tool: ``pending``, ``show``, ``deny``,
    ``artifacts``, ``runs``) leaves toolhost.toml's MCP servers unstarted and their tools out.

    :raises PluginError, RegistrationRefused, PolicyConfigError, SettingError:
    """
    settings, policy = _checked(settings)
    from toolhost._registration.validator_cache import ValidatorCache

    cache = ValidatorCache(settings.data_dir / "cache" / "validators.json")
    try:
        found = discover(settings) if sources is None else sources
        host = Host.from_sources(found, settings=settings, clock=clock,
                                 data_dir=settings.data_dir, policy=policy,
                                 plugin_manager=plugin_manager, validator_cache=cache,
                                 gateway=start_gateway(settings) if gateway else None)
    finally:
        if keep_validators:
            cache.save()
    if not keep_validators:
        host._validators_to_keep = cache
    return host


def load_stores(settings: Settings | None = None, *, clock: Clock | None = None) -> Stores:
    """The record's stores (``Stores``), with the settings checked as ``load_host`` checks
    them, and no plugin discovered: a command that reads or settles the record. The stores
    open on first use, or at ``Stores.open``.

    :raises SettingError, PolicyConfigError:
    """
    settings, policy = _checked(settings)
    return Stores(settings, policy, clock)


def _checked(settings: Settings | None) -> tuple[Settings, Policy]:
    """The settings (default: the environment's) and the policy they set, each value a start
    reads checked now, so a bad one refuses every command's start in one line.

    :raises SettingError, PolicyConfigError:
    """
    from toolhost._model.settings import Settings
    from toolhost._pipeline.policy import PolicyConfigError, policy_from_settings

    settings = settings if settings is not None else Settings.from_environ()
    settings.log_level  # noqa: B018 - an unknown TOOLHOST_LOG_LEVEL refuses the start
    settings.artifact_retention  # noqa: B018 - so does a bad TOOLHOST_ARTIFACT_RETENTION_DAYS
    settings.workspace_quota_bytes  # noqa: B018 - and a bad TOOLHOST_WORKSPACE_QUOTA_BYTES
    try:
        policy = policy_from_settings(settings.env)
    except PolicyConfigError as exc:
        raise _located(settings, exc) from None
    return settings, policy


def start_gateway(settings: Settings, *, connect_s: float | None = None) -> Gateway | None:
    """The MCP gateway over ``toolhost.toml``'s ``[mcp.servers.<name>]``, connected (at most
    ``connect_s`` waited; by default as long as the slowest server's ``connect_timeout_s``), or
    None when no server is configured and enabled. A server not connected by then is absent
    (``toolhost check`` says why) and reconnects.

    :raises SettingError: servers are configured but the MCP SDK is not installed.
    """
    servers = settings.config.mcp_servers if settings.config is not None else ()
    if not any(s.enabled for s in servers):
        return None
    import importlib.util

    from toolhost._model.settings import SettingError

    if importlib.util.find_spec("mcp") is None:
        raise SettingError("[mcp.servers] needs the MCP SDK, which is not installed: "
                           "pip install 'toolhost-core[mcp]'")
    from toolhost._adapters.http import HttpClients
    from toolhost._adapters.mcp_upstream import McpUpstreams
    from toolhost._adapters.system_clock import monotonic
    from toolhost._registration.gateway import Gateway

    upstreams = McpUpstreams(tuple(servers), ssl_context=HttpClients(settings).ssl_context)
    gateway = Gateway(servers, upstreams, monotonic=monotonic)
    try:
        upstreams.start(connect_s)
    except BaseException:
        gateway.close()
        raise
    return gateway


def declared_settings(
    settings: Settings | None = None,
) -> tuple[Settings, dict[str, tuple[SettingSpec, ...]]]:
    """The settings with every loaded plugin's ``[plugins.<distribution>]`` of toolhost.toml
    applied, and what each plugin declares: ``toolhost config`` without registering a tool.

    :raises PluginError, SettingError:
    """
    from toolhost._model.settings import Settings
    from toolhost._registration.discovery import collect_settings

    settings = settings if settings is not None else Settings.from_environ()
    declared = collect_settings(make_plugin_manager(discover(settings)))
    for distribution, specs in declared.items():
        settings = settings.with_plugin_settings(distribution, specs)
    return settings, declared


def _located(settings: Settings, exc: PolicyConfigError) -> PolicyConfigError:
    """A policy from ``toolhost.toml``'s ``[policy]`` table is wrong: the same one line, naming
    the file and the line of the cell (TOOLHOST_POLICY in the environment is named as it was)."""
    from toolhost._pipeline.policy import PolicyConfigError

    config = settings.config
    if config is None or settings.source_of("TOOLHOST_POLICY") == "environment":
        return exc
    problem = str(exc).removeprefix("TOOLHOST_POLICY ")
    return PolicyConfigError(f"{config.where('policy', exc.key)}: [policy] {problem}", exc.key)


#: ``fetch`` and ``post_form`` ask for bodies as they are: the limit counts what arrives, and
#: 64 KiB of gzip decode to 64 MiB before a decoded chunk could be counted (D327).
_UNENCODED: Final = {"Accept-Encoding": "identity"}


def _body_of_200(response: httpx.Response, request: str, limit: int) -> bytes:
    """The body of a 200 answer, unencoded, read up to ``limit`` bytes.

    :raises ValueError: another status, an encoded body (not asked for), or a longer body."""
    if response.status_code != 200:
        raise ValueError(f"{request} answered {response.status_code}")
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ValueError(f"{request} answered a body encoded {encoding!r}, which was not "
                         "asked for")
    body = b""
    for chunk in response.iter_raw():
        body += chunk
        if len(body) > limit:
            raise ValueError(f"{request} answered more than {limit} bytes")
    return body


# ---------------------------------------------------------------------- for the front ends


def readiness_probes(settings: Settings) -> ReadinessProbes:
    """``toolhost check``'s plugins, discovered with each one's readiness probe started as
    soon as it is loaded (``toolhost._registration.readiness``)."""
    from toolhost._registration.readiness import ReadinessProbes

    return ReadinessProbes(settings)


def workspace_refusal(option: str, given: str, settings: Settings,
                      declared: Mapping[str, Sequence[SettingSpec]] | None = None) -> str | None:
    """``toolhost._model.workspace_root.workspace_refusal`` against the runs live on this host
    in an operator's directory, as the data directory's registry says now."""
    from toolhost._adapters.run_workspaces import RunWorkspaces
    from toolhost._adapters.served_claims import SERVED_CLAIMS, served_directories
    from toolhost._model.workspace_root import workspace_refusal as refusal

    registry = settings.data_dir / "workspaces"
    return refusal(option, given, settings, declared,
                   RunWorkspaces(registry).operator_directories(),
                   served_directories(registry / SERVED_CLAIMS))


def claim_served(settings: Settings, directory: Path, claim_id: str) -> Callable[[], None]:
    """Claim the operator's ``directory`` a server serves, which makes it live for
    ``workspace_refusal`` until the function returned (the claim's release) is called.

    :raises OSError: it cannot be taken (no lock to hold, the data directory unwritable).
    """
    from toolhost._adapters.served_claims import SERVED_CLAIMS, ServedClaim

    return ServedClaim.take(settings.data_dir / "workspaces" / SERVED_CLAIMS, directory,
                            claim_id).close


def determinism_scan(sources: Sequence[PluginSource], settings: Settings) -> dict[str, list[str]]:
    """The static determinism scan over each plugin's own files (what the conformance suite
    runs: a tool reads time only from the injected clock): each distribution's findings
    (``file:line: call``, none when clean), cached by content under the data directory."""
    from toolhost._registration.ambient import find_ambient_reads
    from toolhost._registration.discovery import source_files
    from toolhost._registration.scan_cache import ScanCache

    cache = ScanCache(settings.data_dir / "cache" / "determinism-scan.json")
    scanned = {dist: find_ambient_reads(files, cache=cache)
               for dist, files in source_files(sources).items()}
    cache.save()
    return scanned


def mcp_server() -> Callable[..., int]:
    """The MCP server's ``serve`` (``toolhost serve``), imported: the CLI reaches the other
    front end through here. :raises ImportError: the MCP extra is not installed."""
    from toolhost._mcp import serve as serve_mcp

    return serve_mcp


#: Where each name the front ends import from here lives (the ``if TYPE_CHECKING`` block at
#: the top says the same to type checkers): ``(module, attribute)``, or a module itself.
_FRONT_END_NAMES: dict[str, tuple[str, str | None]] = {
    "host_reasons": ("toolhost._model.host_reasons", None),
    "host_settings": ("toolhost._model.host_settings", None),
    **{name: ("toolhost._model.artifacts", name) for name in (
        "ARTIFACT_CEILING", "ArtifactCorrupted", "ArtifactError", "ArtifactNotFound",
        "ArtifactRecord", "ArtifactStoreUnavailable")},
    "spec_to_json": ("toolhost._model.convert", "spec_to_json"),
    "default_data_dir": ("toolhost._model.data_layout", "default_data_dir"),
    "canonical_text": ("toolhost._model.digest", "canonical_text"),
    "shown_text": ("toolhost._model.digest", "shown_text"),
    "run_sync": ("toolhost._pipeline.execution", "run_sync"),
    "rows_in": ("toolhost._pipeline.rows", "rows_in"),
    **{name: ("toolhost._model.nesting", name) for name in ("MAX_ARGUMENT_DEPTH",
                                                            "nests_deeper")},
    **{name: ("toolhost._model.errors", name) for name in ("ToolhostError", "UsageError")},
    **{name: ("toolhost._model.invocations", name) for name in (
        "InvocationNotFound", "InvocationRecord", "InvocationRecordDamaged", "InvocationState",
        "OwnerState")},
    **{name: ("toolhost._model.routes", name) for name in (
        "HEARTBEAT_S", "HostAddress", "RoutesUnavailable")},
    **{name: ("toolhost._model.runs", name) for name in (
        "MAX_DEADLINE_S", "CancellationEvent", "Run", "RunOutcome", "ToolCall", "valid_run_id")},
    "MASK": ("toolhost._model.secrets", "MASK"),
    "escaped": ("toolhost._model.printable", "escaped"),
    "prints": ("toolhost._model.printable", "prints"),
    **{name: ("toolhost._model.settings", name) for name in (
        "SettingError", "Settings", "StoreUnavailable", "is_secret_name", "quoted_value",
        "redact_url_password")},
    **{name: ("toolhost._model.small_file", name) for name in (
        "UnreadableFile", "read_small_file")},
    **{name: ("toolhost._pipeline.approvals", name) for name in (
        "ApprovalNotRecorded", "ApprovalRefused", "InvocationStateError", "Resumed")},
    "ATTACHED_ORIGINS": ("toolhost._pipeline.attachments", "ATTACHED_ORIGINS"),
    **{name: ("toolhost._pipeline.log", name) for name in ("apply_logging", "get_logger")},
    "log_stderr": ("toolhost._pipeline.log", "stderr"),
    **{name: ("toolhost._adapters.mcp_bounds", name) for name in (
        "MAX_CALL_VALUES", "ValueCount")},
    "METRICS_CONTENT_TYPE": ("toolhost._pipeline.metrics", "CONTENT_TYPE"),
    **{name: ("toolhost._pipeline.policy", name) for name in (
        "PolicyAction", "PolicyConfigError")},
    **{name: ("toolhost._pipeline.progress", name) for name in ("Progress", "reporting")},
    **{name: ("toolhost._pipeline.recovery", name) for name in (
        "Recovered", "RecoveryAction")},
    **{name: ("toolhost._pipeline.tracing", name) for name in (
        "continued_trace", "parent_context")},
    "trace_step": ("toolhost._pipeline.tracing", "step"),
    **{name: ("toolhost._ports.artifacts", name) for name in (
        "ArtifactStore", "DamagedArtifact")},
    "InvocationStore": ("toolhost._ports.invocations", "InvocationStore"),
    "EndedLogins": ("toolhost._ports.logins", "EndedLogins"),
    "RouteTable": ("toolhost._ports.routes", "RouteTable"),
    **{name: ("toolhost._registration.discovery", name) for name in (
        "PluginError", "PluginSource", "installed_distributions")},
    "ReadinessProbes": ("toolhost._registration.readiness", "ReadinessProbes"),
    **{name: ("toolhost._registration.refusals", name) for name in (
        "Registered", "RegistrationRefused")},
    **{name: ("toolhost._registration.registry", name) for name in (
        "PinError", "Registry", "UnknownTool", "parse_pins", "version_key")},
}


if not TYPE_CHECKING:  # hidden from type checkers: the block at the top types these names

    def __getattr__(name: str) -> object:
        home = _FRONT_END_NAMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        module = importlib.import_module(home[0])
        value = module if home[1] is None else getattr(module, home[1])
        globals()[name] = value  # later lookups are plain attribute reads
        return value
