"""``toolhost check``'s plugins, each plugin's readiness probe (the optional
``toolhost_readiness`` hook) started as soon as that plugin is loaded.

Start-up is most of what ``check`` costs (issue #11), so it overlaps what it can: a probe (the
sandbox runs bwrap once) runs on a thread of its own beside the loading of the other plugins,
registration and the scan, and the plugins that had a probe at the last check load first (the
hint in the data directory's ``cache/readiness.json``). Its lines are read in registration's
hook order, as if the hooks had been called one after another.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolhost._model.errors import ToolhostError
from toolhost._registration.cache_file import read_json, write_json
from toolhost._registration.discovery import (
    PluginError,
    PluginSource,
    call_each,
    call_one,
    collect_settings,
    discover,
    distribution_of,
    make_plugin_manager,
)

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

    import pluggy

    from toolhost._model.settings import Settings

__all__ = ["ReadinessProbes", "readiness_lines"]

#: The GIL's switch interval while the probes run beside registration. A probe mostly waits
#: (on the kernel, or on bwrap's child on another core), but each time its thread wakes it
#: must win the GIL back from the busy main thread; at the default 5 ms that adds up to tens of
#: milliseconds over the probe's system calls, and ``check`` ends by waiting for the probe.
_SWITCH_INTERVAL_S = 0.0002


class ReadinessProbes:
    """The plugins' readiness probes, for the time this is entered (``with``): started as
    ``discover`` loads each plugin, joined when the block ends."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._hints = settings.data_dir / "cache" / "readiness.json"
        self._started: dict[int, _Background] = {}  # by id() of the plugin object
        self._interval: float | None = None

    def __enter__(self) -> ReadinessProbes:
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for probe in self._started.values():
            probe.join()
        if self._interval is not None:
            sys.setswitchinterval(self._interval)

    def discover(self) -> tuple[list[PluginSource], pluggy.PluginManager]:
        """Every plugin the settings select, loaded (those that had a probe at the last check
        first), each one's probe started as it loads, and their plugin manager.

        :raises PluginError:
        """
        known = _read_hints(self._hints)
        sources = discover(self._settings, on_load=self._start, first=known)
        pm = make_plugin_manager(sources)
        _write_hints(self._hints, known, pm, {source.distribution for source in sources})
        return sources, pm

    def _start(self, source: PluginSource) -> None:
        if not hasattr(source.plugin, "toolhost_readiness"):
            return  # a hookimpl under another name (pluggy's specname) is called in results()
        try:
            pm = make_plugin_manager([source])  # pluggy's checks of the hook, as registration's
            # The probe sees the plugin's own [plugins.<distribution>] of toolhost.toml too.
            settings = self._settings.with_plugin_settings(
                source.distribution, collect_settings(pm).get(source.distribution, ()))
        except ToolhostError:  # a plugin's hook, or its [plugins.<distribution>] settings
            return  # registration refuses it with the same error
        self._started[id(source.plugin)] = _Background(
            lambda: call_each(pm, "toolhost_readiness", {"settings": settings}))

    def results(self, pm: pluggy.PluginManager,
                settings: Settings) -> list[tuple[str, list[str]]]:
        """``(distribution, lines)`` of every implementation registration's ``pm`` holds, in
        its order; a hook that raised, or returned something else than a list of str, raises
        its PluginError. ``settings``: the host's, for a probe not started early."""
        found = []
        for impl in pm.hook.toolhost_readiness.get_hookimpls():
            probe = self._started.get(id(impl.plugin))
            value = (next(iter(probe.result().values()), None) if probe is not None
                     else call_one(impl, "toolhost_readiness", {"settings": settings}))
            dist = distribution_of(impl.plugin_name)
            found.append((dist, readiness_lines(dist, value)))
        return found


def readiness_lines(dist: str, value: Any) -> list[str]:
    """A ``toolhost_readiness`` hook's value, checked: a list of str (one line per problem).
    A str would print a character a line, and ``True`` is no line at all."""
    if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
        raise PluginError(dist, "hook toolhost_readiness must return a list of str")
    return value


def _read_hints(path: Path) -> list[str]:
    """The distributions that implemented ``toolhost_readiness`` at the last check. A hint
    changes only the order plugins are imported in (``discover(first=...)``), never what is
    loaded, registered or printed, so a stale or unreadable one costs time, never truth."""
    names = read_json(path)
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _write_hints(path: Path, known: list[str], pm: pluggy.PluginManager,
                 loaded: set[str]) -> None:
    """Update the hint for the distributions loaded now; one left out (TOOLHOST_PLUGINS,
    TOOLHOST_PLUGINS_EXCLUDE) keeps what the last check that loaded it found."""
    names = sorted({name for name in known if name not in loaded}
                   | {distribution_of(impl.plugin_name)
                      for impl in pm.hook.toolhost_readiness.get_hookimpls()})
    if names != known:  # the hint is an optimization: not written is never an error
        write_json(path, names)


class _Background(threading.Thread):
    """One call on a thread of its own, started at once; ``result()`` waits for it and
    returns its value or raises its exception. (``concurrent.futures`` would cost ``check``
    the import of ``logging`` and more.)"""

    def __init__(self, call: Callable[[], dict[str, Any]]) -> None:
        super().__init__(name="toolhost-readiness", daemon=True)
        self._call = call
        self._value: dict[str, Any] = {}
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # handed to result(), on the caller's thread
            self._error = exc

    def result(self) -> dict[str, Any]:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value
