"""``toolhost check``: registration and the determinism scan over the installed plugins,
then each plugin's readiness (the optional ``toolhost_readiness`` hook).

Start-up is most of what it costs (issue #11), so it overlaps what it can: each readiness probe
starts as soon as its plugin is loaded (``toolhost._registration.readiness``, reached through
``toolhost._composition.readiness_probes``). See docs/decisions.md.
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Sequence
from typing import TYPE_CHECKING

from toolhost._cli.common import CommandError, load, refused
from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    import pluggy

    from toolhost._composition import PluginSource, ReadinessProbes, Settings

__all__ = ["cmd_check"]


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
    from toolhost._composition import PluginError, Settings, readiness_probes

    settings = Settings.from_environ()
    # Each plugin's readiness probe starts as soon as that plugin is loaded, and runs beside
    # the loading of the others, registration and the scan; leaving the block joins them.
    with readiness_probes(settings) as probes:
        try:
            sources, pm = probes.discover()
        except PluginError as exc:
            raise CommandError(str(exc), ExitCode.FAILED) from None
        return _check_loaded(settings, sources, pm, probes)


def _check_loaded(settings: Settings, sources: Sequence[PluginSource],
                  pm: pluggy.PluginManager, readiness: ReadinessProbes) -> int:
    from toolhost._composition import PluginError, determinism_scan

    host = load(settings=settings, sources=sources, plugin_manager=pm, keep_validators=True)
    # A tool reads time only from the injected clock (what the conformance suite checks too).
    for dist, found in determinism_scan(sources, settings).items():
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise CommandError(
                f"plugin {dist} fails the determinism scan: {found[0]}{more}: a tool reads the "
                f"time from services.clock, never the system's (leave the plugin out with "
                f"TOOLHOST_PLUGINS_EXCLUDE={dist}, or fix and reinstall it)", ExitCode.FAILED)
    # Every other command opens the stores, which would refuse such a data directory.
    unusable = host.data_directory_problem()
    if unusable is not None:
        raise CommandError(unusable, ExitCode.FAILED)
    # And would refuse a bucket's settings (exit 2): checked as they check them, nothing opened.
    from toolhost._composition import ToolhostError, check_artifact_store_settings, ui_secret

    try:
        check_artifact_store_settings(settings)
        ui_secret(settings)  # what serve --http refuses (D526)
    except ToolhostError as exc:
        raise refused(exc) from None
    dists = sorted({r.distribution for r in host.registry})
    idle = sorted(set(host.loaded_distributions) - set(dists))
    if dists or not idle:
        print(f"ok: {len(host.registry)} tools registered from {', '.join(dists) or 'no plugins'}")
    else:  # loaded, all inactive: "from no plugins" sent people looking for an install problem
        print(f"ok: 0 tools registered: {', '.join(idle)} registered none under these settings "
              "(toolhost plugins says why)")
    # Registered tools that fail closed on this machine (the optional toolhost_readiness
    # hook): one line each. Not a refusal, so the exit stays 0.
    try:
        ready = readiness.results(pm, host.settings)
    except PluginError as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None
    from toolhost._composition import escaped

    # A probe's line often quotes outside text (a subprocess's stderr, a setting's path): as
    # the not-private lines below, it can neither move the terminal nor forge another line.
    for dist, lines in ready:
        for line in lines:
            print(f"not ready: {dist}: {escaped(line)}")
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
    for path, mode, fix in host.readable_by_others():
        print(f"not private: {escaped(str(path))} is {mode:o}, readable by other users "
              f"({escaped(fix)})")
    return ExitCode.OK
