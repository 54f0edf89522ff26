"""The conformance suite, run on this distribution the way every plugin runs it.

The key turns the four tools on; the base URL is a loopback port nothing listens on, so the
property run reaches every body and each call ends with a declared reason (the provider is
unreachable, or a reference is not available) and no request leaves the machine.
"""

from __future__ import annotations

from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-media",)
    settings = {  # noqa: RUF012  (the suite's ClassVar)
        "TENSORSCALE_API_KEY": "conformance-key",
        "TENSORSCALE_BASE_URL": "https://127.0.0.1:9",
    }
