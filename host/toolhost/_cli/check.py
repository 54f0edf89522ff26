"""``toolhost check``: registration and the determinism scan over the installed plugins,
then each plugin's readiness (the optional ``toolhost_readiness`` hook).

Start-up is most of what it costs (issue #11), so it overlaps what it can: each readiness probe
(the sandbox runs bwrap once) starts on a thread as soon as its plugin is loaded, and the
plugins that had a probe at the last check load first. See docs/decisions.md.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from toolhost._cli.common import CommandError, load
from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    from pathlib import Path

    import pluggy

    from toolhost._model.settings import Settings
    from toolhost._registration.discovery import PluginSource

__all__ = ["cmd_check"]


#: The GIL's switch interval while ``check``'s readiness probes run beside registration. A
#: probe mostly waits (on the kernel, or on bwrap's child on another core), but each time its
#: thread wakes it must win the GIL back from the busy main thread; at the default 5 ms that
#: adds up to tens of milliseconds over the probe's system calls, and ``check`` ends by
#: waiting for the probe.
_READINESS_SWITCH_INTERVAL_S = 0.0002


def cmd_check(args: argparse.Namespace) -> int:
    # No cyclic garbage collection while check runs: it is short and allocates mostly what
    # lives until it ends (modules, classes, the registry); the 40 collections took 5-10% of
    # its time to free about 2,000 objects of a 23 MB process, which its exit frees anyway.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _check(args)
    finally:
        if collecting:
            gc.enable()


def _check(args: argparse.Namespace) -> int:
    from toolhost._model.settings import Settings
    from toolhost._registration.discovery import PluginError, discover, make_plugin_manager

    settings = Settings.from_environ()
    hints = settings.data_dir / "cache" / "readiness.json"
    interval = sys.getswitchinterval()
    sys.setswitchinterval(_READINESS_SWITCH_INTERVAL_S)
    readiness = _Readiness(settings)
    try:
        try:
            # Each plugin's readiness probe starts as soon as that plugin is loaded, and runs
            # beside the loading of the others, registration and the scan. The plugins that
            # had a probe at the last check load first, so theirs start earliest.
            known = _read_hints(hints)
            sources = discover(settings, on_load=readiness.start, first=known)
            pm = make_plugin_manager(sources)
            _write_hints(hints, known, pm, {source.distribution for source in sources})
        except PluginError as exc:
            raise CommandError(str(exc), ExitCode.FAILED) from None
        return _check_loaded(settings, sources, pm, readiness)
    finally:
        readiness.join()
        sys.setswitchinterval(interval)


def _read_hints(path: Path) -> list[str]:
    """The distributions that implemented ``toolhost_readiness`` at the last check. A hint
    changes only the order plugins are imported in (``discover(first=...)``), never what is
    loaded, registered or printed, so a stale or unreadable one costs time, never truth."""
    from toolhost._registration.cache_file import read_json

    names = read_json(path)
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _write_hints(path: Path, known: list[str], pm: pluggy.PluginManager,
                 loaded: set[str]) -> None:
    """Update the hint for the distributions loaded now; one left out (TOOLHOST_PLUGINS,
    TOOLHOST_PLUGINS_EXCLUDE) keeps what the last check that loaded it found."""
    from toolhost._registration.cache_file import write_json
    from toolhost._registration.discovery import distribution_of

    names = sorted({name for name in known if name not in loaded}
                   | {distribution_of(impl.plugin_name)
                      for impl in pm.hook.toolhost_readiness.get_hookimpls()})
    if names != known:  # the hint is an optimization: not written is never an error
        write_json(path, names)


class _Readiness:
    """The ``toolhost_readiness`` hooks. A probe may do I/O (the sandbox runs bwrap once), so
    each plugin's starts on a thread of its own as soon as the plugin is loaded; the lines are
    read in registration's hook order, as if the hooks had been called one after another."""

    def __init__(self, settings: Settings) -> None:
        self._kwargs: dict[str, Settings] = {"settings": settings}
        self._started: dict[int, _Background] = {}  # by id() of the plugin object

    def start(self, source: PluginSource) -> None:
        from toolhost._model.settings import SettingError
        from toolhost._registration.discovery import (
            PluginError,
            _call_each,
            collect_settings,
            make_plugin_manager,
        )

        if not hasattr(source.plugin, "toolhost_readiness"):
            return  # a hookimpl under another name (pluggy's specname) is called in results()
        try:
            pm = make_plugin_manager([source])  # pluggy's checks of the hook, as registration's
            # The probe sees the plugin's own [plugins.<distribution>] of toolhost.toml too.
            settings = self._kwargs["settings"].with_plugin_settings(
                source.distribution, collect_settings(pm).get(source.distribution, ()))
        except (PluginError, SettingError):
            return  # registration refuses it with the same error
        self._started[id(source.plugin)] = _Background(
            lambda: _call_each(pm, "toolhost_readiness", {"settings": settings}))

    def results(self, pm: pluggy.PluginManager, settings: Settings) -> list[tuple[str, Any]]:
        """``(plugin name, lines)`` of every implementation registration's ``pm`` holds, in its
        order; a hook that raised raises its PluginError. ``settings``: the host's, for a
        probe not started early."""
        from toolhost._registration.discovery import _call_one

        found = []
        for impl in pm.hook.toolhost_readiness.get_hookimpls():
            probe = self._started.get(id(impl.plugin))
            value = (next(iter(probe.result().values()), None) if probe is not None
                     else _call_one(impl, "toolhost_readiness", {"settings": settings}))
            found.append((impl.plugin_name, value))
        return found

    def join(self) -> None:
        for probe in self._started.values():
            probe.join()


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


def _check_loaded(settings: Settings, sources: Sequence[PluginSource],
                  pm: pluggy.PluginManager, readiness: _Readiness) -> int:
    from toolhost._registration.ambient import find_ambient_reads
    from toolhost._registration.discovery import PluginError, distribution_of, source_files
    from toolhost._registration.scan_cache import ScanCache

    host = load(settings=settings, sources=sources, plugin_manager=pm, keep_validators=True)
    # The static determinism scan over each plugin's own files (what the conformance suite
    # runs): a tool reads time only from the injected clock.
    cache = ScanCache(settings.data_dir / "cache" / "determinism-scan.json")
    scanned = {dist: find_ambient_reads(files, cache=cache)
               for dist, files in source_files(sources).items()}
    cache.save()
    for dist, found in scanned.items():
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise CommandError(
                f"plugin {dist} fails the determinism scan: {found[0]}{more}: a tool reads the "
                f"time from services.clock, never the system's (leave the plugin out with "
                f"TOOLHOST_PLUGINS_EXCLUDE={dist}, or fix and reinstall it)", ExitCode.FAILED)
    dists = sorted({r.distribution for r in host.registry})
    print(f"ok: {len(host.registry)} tools registered from {', '.join(dists) or 'no plugins'}")
    # Registered tools that fail closed on this machine (the optional toolhost_readiness
    # hook): one line each. Not a refusal, so the exit stays 0.
    try:
        ready = readiness.results(pm, host.settings)
    except PluginError as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None
    for plugin_name, lines in ready:
        for line in lines or ():
            print(f"not ready: {distribution_of(plugin_name)}: {line}")
    # The MCP gateway's servers not connected, and upstream tools left out or disabled.
    for line in host.gateway.readiness() if host.gateway is not None else ():
        print(f"not ready: mcp gateway: {line}")
    # Where the host cannot mount, a workspace's byte quota is only checked, not held (D265).
    unheld = host.workspace_quota_problem()
    if unheld is not None:
        print(f"not held: the workspace quota ({settings.workspace_quota_bytes // 2**20} MiB) "
              f"is not a filesystem of its size here ({unheld}): only the tools' own checks "
              "bound it, and parallel writers can pass them (the sandbox's, every 0.2 s)")
    # Data others may read (made before toolhost made it private, or opened up by hand): said,
    # not changed, since an operator may share it on purpose. Not a refusal either.
    from toolhost._cli.approvals import printable

    for path, mode, fix in host.readable_by_others():
        print(f"not private: {printable(str(path))} is {mode:o}, readable by other users "
              f"({printable(fix)})")
    return ExitCode.OK
