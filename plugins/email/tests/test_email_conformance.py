from typing import ClassVar

from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-email",)
    # Both flags: all four tools under test. The cache is empty in the suite's host, so the
    # property run never reaches the network (every pair is unknown_subscription).
    settings: ClassVar[dict[str, str]] = {"AGENT_EMAIL_MODE_ENABLED": "1",
                                          "AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1"}
