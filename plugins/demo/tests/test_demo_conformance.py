"""The conformance suite, run on this distribution the way a third-party plugin runs it.

The property run's calls all pause (EXTERNAL_WRITE always requires approval); the suite approves
them, which is what lets it reach the body at all.
"""

from __future__ import annotations

from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-demo",)
