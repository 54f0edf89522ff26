"""The conformance suite, run on this distribution the way every plugin runs it (with the flag
on: the registry, not the roster, is what is checked)."""

from __future__ import annotations

from typing import ClassVar

from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-people",)
    settings: ClassVar[dict[str, str]] = {"AGENT_PEOPLE_ENABLED": "1"}
