"""The conformance suite, run on this distribution the way every plugin runs it."""

from __future__ import annotations

from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-artifact",)
