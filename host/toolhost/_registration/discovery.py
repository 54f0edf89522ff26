"""Plugin discovery and the per-plugin calling of hooks.

Each entry point of the ``toolhost.plugins`` group is loaded on its own and each plugin's
hookimpls are called one plugin at a time, so an import error or a hook that raises is reported
against its distribution in one line. (pluggy's ``load_setuptools_entrypoints`` neither catches
load errors nor says who failed.)

The entry points are read straight from the ``*.dist-info`` and ``*.egg-info`` directories on
``sys.path``, where ``importlib.metadata`` looks, without importing it (that import alone was
about a tenth of ``toolhost check``'s start-up). What only ``importlib.metadata`` reads (a zip
archive or an ``.egg`` on ``sys.path``, another finder of distributions) is left to it. Nothing
is cached: each call lists the path entries afresh, so a distribution installed or removed
since is seen as it now is.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import types
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from importlib import import_module
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

import attrs
import pluggy

from toolhost import hookspecs
from toolhost._model.errors import ToolhostError
from toolhost._model.printable import escaped
from toolhost._model.setting_spec import SettingSpec
from toolhost._model.settings import Settings, normalize_dist_name
from toolhost._model.spec import Domain, Tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "Contribution",
    "PluginError",
    "PluginSource",
    "call_each",
    "call_one",
    "collect_contributions",
    "collect_settings",
    "discover",
    "installed_distributions",
    "load_distributions",
    "make_plugin_manager",
    "source_files",
]

ENTRY_POINT_GROUP = "toolhost.plugins"


class PluginError(ToolhostError):
    """A plugin could not be loaded or its hooks failed. The message is one line for operators."""

    def __init__(self, distribution: str, problem: str, *, remedy: str | None = None) -> None:
        remedy = remedy or "leave it out with TOOLHOST_PLUGINS, or fix and reinstall it"
        # A problem often quotes a plugin's exception (a subprocess's stderr, a path): escaped,
        # as D500 does a readiness line, it can neither forge a line nor move the terminal.
        super().__init__(escaped(f"plugin {distribution}: {problem} ({remedy})"))
        self.distribution = distribution
        self.problem = problem


@attrs.frozen
class PluginSource:
    """One loaded plugin: the distribution that contributed it and the plugin object."""

    distribution: str
    name: str
    plugin: object


@attrs.frozen
class Contribution:
    """Everything one distribution's hooks returned."""

    distribution: str
    domains: tuple[Domain, ...]
    tools: tuple[Tool, ...]


#: Hooks of earlier plugin API versions, and what replaced them: a plugin still implementing
#: one gets this remedy rather than "no hookspec declares it".
_REMOVED_HOOKS = {
    "toolhost_messages": "toolhost_messages was removed in plugin API 1.0; declare each "
    "reason once on its tool: Tool(..., reasons=(Reason(code, message), ...))",
}


#: ``module`` or ``module:attr.path``, optionally ``[extras]`` (importlib.metadata's syntax).
_ENTRY_POINT_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?(\[.*\]\s*)?$")

#: The metadata directories importlib.metadata reads on a path entry.
_INFO_SUFFIXES = (".dist-info", ".egg-info")


@attrs.frozen
class _EntryPoint:
    """One ``toolhost.plugins`` entry point: ``name = value`` of a distribution (its name
    normalized)."""

    distribution: str
    name: str
    value: str

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].partition("[")[0].strip()

    def load(self) -> object:
        """Import the module, then follow the attribute path (``EntryPoint.load``'s rule)."""
        match = _ENTRY_POINT_VALUE.match(self.value)
        if match is None:
            raise ValueError(f"{self.value!r} is not module or module:attribute")
        loaded: object = import_module(match["module"])
        for attr in filter(None, (match["attr"] or "").split(".")):
            loaded = getattr(loaded, attr)
        return loaded


def _entry_points() -> list[_EntryPoint]:
    found = _read_path_entries(sys.path)
    if found is None:
        found = _read_with_importlib_metadata()
    return sorted(found, key=lambda ep: (ep.distribution, ep.name))


def _read_path_entries(path: Sequence[object]) -> list[_EntryPoint] | None:
    """The group's entry points of every distribution on ``path``, the first of each name
    winning as in importlib.metadata; None when a path entry or a finder needs its reader."""
    if not all(finder is PathFinder or not hasattr(finder, "find_distributions")
               for finder in sys.meta_path):
        return None
    seen: set[str] = set()
    found: list[_EntryPoint] = []
    for entry in path:
        if not isinstance(entry, str) or entry.lower().endswith(".egg"):
            return None
        root = entry or "."
        try:
            children = os.listdir(root)
        except NotADirectoryError:  # a zip archive
            return None
        except OSError:  # a path entry that does not exist holds no distribution
            continue
        for child in children:
            low = child.lower()
            if not low.endswith(_INFO_SUFFIXES):
                continue
            stem = low.rpartition(".")[0].partition("-")[0]
            key = normalize_dist_name(stem)
            if key in seen:
                continue
            seen.add(key)
            info = os.path.join(root, child)
            points = list(_group_entries(_read_text(os.path.join(info, "entry_points.txt"))))
            if points:
                dist = normalize_dist_name(_metadata_name(info) or stem)
                found += [_EntryPoint(dist, name, value) for name, value in points]
    return found


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):  # absent (most distributions have none) or unreadable
        return ""


def _group_entries(text: str) -> Iterator[tuple[str, str]]:
    """``(name, value)`` of each line of the toolhost.plugins section of an entry_points.txt."""
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == ENTRY_POINT_GROUP:
            name, _, value = line.partition("=")
            yield name.strip(), value.strip()


def _metadata_name(info: str) -> str | None:
    """The ``Name`` header of a metadata directory's METADATA (or PKG-INFO)."""
    for file in ("METADATA", "PKG-INFO"):
        for line in _read_text(os.path.join(info, file)).splitlines():
            if not line.strip():
                break  # the headers end at the first blank line
            key, colon, value = line.partition(":")
            if colon and key.strip().lower() == "name":
                return value.strip()
    return None


def _read_with_importlib_metadata() -> list[_EntryPoint]:
    from importlib import metadata

    return [_EntryPoint(normalize_dist_name(ep.dist.name) if ep.dist is not None
                        else f"<unknown:{ep.value}>", ep.name, ep.value)
            for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]


def _load(ep: _EntryPoint) -> PluginSource:
    dist = ep.distribution
    try:
        plugin = ep.load()
    except Exception as exc:  # any import-time failure belongs to that distribution
        where = _where_in_plugin(exc, ep)
        raise PluginError(
            dist, f"entry point {ep.name} = {ep.value} failed to import: "
            f"{type(exc).__name__}: {exc}{f' at {where}' if where else ''}"
        ) from None
    return PluginSource(distribution=dist, name=ep.name, plugin=plugin)


def _where_in_plugin(exc: BaseException, ep: _EntryPoint) -> str | None:
    """``file:line`` of the last traceback frame inside the plugin's own package (the line of
    the plugin that raised, or that called what raised); for a syntax error in the plugin, the
    offending line."""
    top = ep.module.split(".", 1)[0]

    def ours(module: object) -> bool:
        return isinstance(module, str) and (module == top or module.startswith(f"{top}."))

    where = None
    tb = exc.__traceback__
    while tb is not None:
        if ours(tb.tb_frame.f_globals.get("__name__")):
            where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename:
        # The parser's error has no frame in the file it could not compile.
        where = f"{exc.filename}:{exc.lineno or 0}"
    return where


def _select(eps: list[_EntryPoint], settings: Settings) -> list[_EntryPoint]:
    """The entry points TOOLHOST_PLUGINS allows, less those TOOLHOST_PLUGINS_EXCLUDE names.
    A name in either that no installed distribution provides is an error: a misspelt name
    would otherwise load, or leave out, nothing."""
    installed = {ep.distribution for ep in eps}
    allow = settings.plugin_allow_list
    exclude = settings.plugin_exclude_list
    for setting, names in (("TOOLHOST_PLUGINS", allow or ()),
                           ("TOOLHOST_PLUGINS_EXCLUDE", exclude)):
        missing = [name for name in names if name not in installed]
        if missing:
            raise PluginError(
                missing[0], f"{settings.written(setting)} names it, but no installed "
                f"distribution provides a {ENTRY_POINT_GROUP} entry point under that name",
                remedy=f"installed: {', '.join(sorted(installed)) or 'none'}"
                if setting.endswith("EXCLUDE") else None,
            )
    return [ep for ep in eps
            if (allow is None or ep.distribution in allow) and ep.distribution not in exclude]


def discover(
    settings: Settings, *, on_load: Callable[[PluginSource], object] | None = None,
    first: Collection[str] = (),
) -> list[PluginSource]:
    """Load every installed plugin, or only those TOOLHOST_PLUGINS names, less those
    TOOLHOST_PLUGINS_EXCLUDE names.

    :param on_load: called with each plugin as soon as it is loaded, before the next one is
        (``toolhost check`` starts its readiness probes there).
    :param first: distributions to import before the others. Only the order of the imports
        changes: the plugins are returned, and a failure to load is raised, in entry-point
        order as without it.
    """
    selected = _select(_entry_points(), settings)
    early: dict[int, PluginSource | PluginError] = {}
    for index, ep in enumerate(selected):
        if ep.distribution in first:
            try:
                early[index] = _loaded(ep, on_load)
            except PluginError as exc:  # raised at its own place, after the ones before it
                early[index] = exc
    sources = []
    for index, ep in enumerate(selected):
        source = early[index] if index in early else _loaded(ep, on_load)
        if isinstance(source, PluginError):
            raise source
        sources.append(source)
    return sources


def _loaded(ep: _EntryPoint, on_load: Callable[[PluginSource], object] | None) -> PluginSource:
    source = _load(ep)
    if on_load is not None:
        on_load(source)
    return source


def source_files(sources: Iterable[PluginSource]) -> dict[str, list[Path]]:
    """Each distribution's own code, for the determinism scan: the top-level package (its
    directories) or module (its file) each of its plugin objects lives in. Found from the
    loaded modules, so nothing is imported and no other distribution's file is included."""
    found: dict[str, list[Path]] = {}
    for source in sources:
        paths = found.setdefault(source.distribution, [])
        module = (source.plugin if isinstance(source.plugin, types.ModuleType)
                  else inspect.getmodule(source.plugin))
        if module is None:
            continue
        top = sys.modules.get(module.__name__.split(".", 1)[0], module)
        locations = getattr(top, "__path__", None)
        file = getattr(top, "__file__", None)
        for path in ([Path(p) for p in locations] if locations
                     else [Path(file)] if file else []):
            if path not in paths:
                paths.append(path)
    return found


def load_distributions(names: Iterable[str]) -> list[PluginSource]:
    """Load exactly the named distributions' plugins (the conformance suite's view)."""
    wanted = [normalize_dist_name(n) for n in names]
    eps = _entry_points()
    found = {ep.distribution for ep in eps}
    for name in wanted:
        if name not in found:
            raise PluginError(name, f"no {ENTRY_POINT_GROUP} entry point is installed for it")
    return [_load(ep) for ep in eps if ep.distribution in wanted]


def make_plugin_manager(sources: Sequence[PluginSource]) -> pluggy.PluginManager:
    """A plugin manager with the hookspecs and these plugins."""
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for source in sources:
        # One distribution may ship several entry points; each is its own pluggy plugin,
        # named "<distribution>:<entry point>", and their contributions are merged.
        name = source.distribution
        if pm.has_plugin(name):
            name = f"{source.distribution}:{source.name}"
        try:
            pm.register(source.plugin, name=name)
        except ValueError as exc:  # pluggy: already registered
            raise PluginError(source.distribution, f"cannot be registered: {exc}") from None
        except pluggy.PluginValidationError as exc:  # a hookimpl its hookspec does not fit
            raise PluginError(source.distribution, _unfit_hook(pm, source.plugin, exc)) from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        dist = distribution_of(pm.get_name(exc.plugin) or "<unknown>")
        for hook, remedy in _REMOVED_HOOKS.items():
            if hook in str(exc):
                raise PluginError(dist, remedy) from None
        raise PluginError(
            dist, f"implements a hook no hookspec declares ({exc}); check the hook's name",
        ) from None
    return pm


def _unfit_hook(pm: pluggy.PluginManager, plugin: object,
                exc: pluggy.PluginValidationError) -> str:
    """Why pluggy refused one of ``plugin``'s hookimpls, in one line: the parameters a hook
    takes that its hookspec does not give (the usual mistake), else pluggy's own words."""
    for attribute in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attribute)
        if opts is None:
            continue
        hook = opts.get("specname") or attribute
        caller = getattr(pm.hook, hook, None)
        if caller is None or caller.spec is None:
            continue
        impl = pluggy.HookImpl(plugin, "", getattr(plugin, attribute), opts)
        spec = caller.spec
        extra = sorted(set(impl.argnames) - set(spec.argnames) - set(spec.kwargnames))
        if extra:
            return (f"hook {hook} takes {', '.join(extra)}, which its hookspec "
                    f"{hook}({', '.join(spec.argnames)}) does not give; take only the "
                    "hookspec's parameters (or fewer)")
    return f"cannot be registered: {' '.join(str(exc).split())}"


def installed_distributions() -> list[str]:
    """Every distribution with a ``toolhost.plugins`` entry point, loaded or not (sorted)."""
    return sorted({ep.distribution for ep in _entry_points()})


def call_each(pm: pluggy.PluginManager, hook: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Call one hook's implementations one plugin at a time, attributing any failure:
    ``{plugin name: what it returned}``."""
    return {impl.plugin_name: call_one(impl, hook, kwargs)
            for impl in getattr(pm.hook, hook).get_hookimpls()}


def call_one(impl: pluggy.HookImpl, hook: str, kwargs: Mapping[str, Any]) -> Any:
    """Call one plugin's implementation of a hook; a failure is that distribution's."""
    # Positionally, as pluggy calls a hookimpl: a positional-only parameter is taken too.
    args = [kwargs[name] for name in impl.argnames]
    try:
        return impl.function(*args)
    except Exception as exc:
        raise PluginError(
            distribution_of(impl.plugin_name), f"hook {hook} raised {type(exc).__name__}: {exc}"
        ) from None


def _as_tuple(dist: str, hook: str, value: Any, item_type: type) -> tuple[Any, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, item_type) for v in value):
        raise PluginError(dist, f"hook {hook} must return a list of {item_type.__name__}")
    return tuple(value)


def collect_contributions(pm: pluggy.PluginManager, settings: Settings) -> list[Contribution]:
    """Call the two hooks, in order, and gather what each distribution returned."""
    domains = call_each(pm, "toolhost_domains", {})
    tools = call_each(pm, "toolhost_tools", {"settings": settings})
    merged: dict[str, Contribution] = {}
    for name, _ in pm.list_name_plugin():
        dist = distribution_of(name)
        part = Contribution(
            distribution=dist,
            domains=_as_tuple(dist, "toolhost_domains", domains.get(name), Domain),
            tools=_as_tuple(dist, "toolhost_tools", tools.get(name), Tool),
        )
        if dist in merged:
            before = merged[dist]
            part = Contribution(
                distribution=dist,
                domains=before.domains + part.domains,
                tools=before.tools + part.tools,
            )
        merged[dist] = part
    return list(merged.values())


def collect_settings(pm: pluggy.PluginManager) -> dict[str, tuple[SettingSpec, ...]]:
    """Each distribution's declared settings (``toolhost_settings``; none when it does not
    implement the hook). A name is one setting: declared twice, or a name the host reads for
    itself, refuses the start, since two readers would disagree about what it means."""
    from toolhost._model.host_settings import by_name

    declared: dict[str, tuple[SettingSpec, ...]] = {}
    owner: dict[str, str] = {}
    for name, value in call_each(pm, "toolhost_settings", {}).items():
        dist = distribution_of(name)
        specs = _as_tuple(dist, "toolhost_settings", value, SettingSpec)
        for spec in specs:
            if by_name(spec.name) is not None:
                raise PluginError(dist, f"declares the setting {spec.name}, which is the host's")
            if owner.setdefault(spec.name, dist) != dist:
                raise PluginError(dist, f"declares the setting {spec.name}, which "
                                        f"{owner[spec.name]} declares")
        keys = [spec.file_key for spec in declared.get(dist, ()) + specs]
        if len(keys) != len(set(keys)):
            raise PluginError(dist, "declares two settings with one toolhost.toml key")
        declared[dist] = declared.get(dist, ()) + specs
    return declared


def distribution_of(plugin_name: str) -> str:
    """The distribution a registered plugin name belongs to (see make_plugin_manager)."""
    return plugin_name.split(":", 1)[0]
