"""The suite ``toolhost-conformance`` runs: the distributions come from ``--toolhost-dist``.

The command collects this module with ``--pyargs``; its class sets nothing, so the names the
command was given (and only those) are the distributions under test.
"""

from __future__ import annotations

from toolhost_conformance.suite import ConformanceSuite


class TestConformance(ConformanceSuite):
    """Every check, over the distributions named on the command line."""
