"""toolhost-conformance: the checks a toolhost plugin team runs in its own CI.

``ConformanceSuite`` is an abstract test class (the fsspec shape): subclass it in a test module
and name the distributions under test::

    from toolhost_conformance import ConformanceSuite

    class TestConformance(ConformanceSuite):
        distributions = ("toolhost-math",)

The pytest11 plugin (``toolhost_conformance.pytest_plugin``) adds ``--toolhost-dist`` and the
``toolhost_distributions`` fixture; ``toolhost-conformance DIST`` runs the suite from the shell.
``find_ambient_reads`` (the determinism scan) and ``from_schema`` (JSON Schema → hypothesis
strategy) are public for reuse.

Names are imported lazily, so the pytest plugin loading this package costs nothing until a
suite is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolhost_conformance._known import KnownFailureError
    from toolhost_conformance.ambient import distribution_files, find_ambient_reads
    from toolhost_conformance.strategies import UnsupportedSchema, from_schema
    from toolhost_conformance.suite import CHECKS, ConformanceSuite

__all__ = [
    "CHECKS",
    "ConformanceSuite",
    "KnownFailureError",
    "UnsupportedSchema",
    "distribution_files",
    "find_ambient_reads",
    "from_schema",
]

__version__ = "0.5.0"

_WHERE = {
    "CHECKS": "suite",
    "ConformanceSuite": "suite",
    "KnownFailureError": "_known",
    "UnsupportedSchema": "strategies",
    "distribution_files": "ambient",
    "find_ambient_reads": "ambient",
    "from_schema": "strategies",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
