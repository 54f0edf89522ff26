"""Locating a distribution's files for the determinism scan.

The scan itself is the host's (``toolhost.testing.find_ambient_reads``), so the host's own
static test and every plugin team's conformance run apply one rule.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import types
from importlib import metadata
from pathlib import Path

from toolhost.testing import find_ambient_reads

__all__ = [
    "distribution_files",
    "find_ambient_reads",
    "module_files",
]


# ------------------------------------------------------------------ locating a distribution


def _package_files(top_level: str) -> list[Path]:
    """The files of a top-level module or package, found without importing it."""
    try:
        spec = importlib.util.find_spec(top_level)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    if spec.origin and spec.origin.endswith(".py"):
        return [Path(spec.origin)]
    return []


def distribution_files(name: str) -> list[Path]:
    """The Python files and package directories an installed distribution provides.

    ``Distribution.files`` (the RECORD) is exact for a normal install, but an editable
    install records only a ``.pth`` file, so the top-level packages its entry points import
    (and ``top_level.txt`` where a build backend wrote one) are located as well.

    :param name: a distribution name, e.g. ``"toolhost-math"``.
    :return: paths to pass to :func:`find_ambient_reads`.
    :raises importlib.metadata.PackageNotFoundError: if it is not installed.
    """
    dist = metadata.distribution(name)
    found: list[Path] = []
    for file in dist.files or ():
        # RECORD paths are relative to site-packages; editable hooks are the installer's code.
        if file.suffix == ".py" and not file.name.startswith(("__editable__", "_editable_impl")):
            located = Path(str(dist.locate_file(file)))
            if located.is_file():
                found.append(located)
    top_levels = {ep.module.split(".", 1)[0] for ep in dist.entry_points}
    top_levels.update((dist.read_text("top_level.txt") or "").split())
    for top in sorted(top_levels):
        found.extend(_package_files(top))
    return found


def module_files(plugin: object) -> list[Path]:
    """The files of the top-level package a plugin object (usually a module) lives in.

    For plugins handed to the suite without being installed (``ConformanceSuite.plugins``).
    """
    module = plugin if isinstance(plugin, types.ModuleType) else inspect.getmodule(plugin)
    if module is None:
        return []
    top = sys.modules.get(module.__name__.split(".", 1)[0], module)
    locations = getattr(top, "__path__", None)
    if locations:
        return [Path(p) for p in locations]
    file = getattr(top, "__file__", None)
    return [Path(file)] if file else []
