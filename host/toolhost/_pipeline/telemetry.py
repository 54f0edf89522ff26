"""What the pipeline reports about its calls: spans (``tracing``) and metrics
(``instruments``), made once per host at the composition root from its settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from toolhost._pipeline.instruments import Instruments
from toolhost._pipeline.tracing import Tracing

__all__ = ["Telemetry"]


@attrs.frozen
class Telemetry:
    #: None: no span code runs at all (what bench/bench_tracing.py compares against).
    tracing: Tracing | None
    instruments: Instruments

    @classmethod
    def from_settings(cls, settings: Any, monotonic: Callable[[], float]) -> Telemetry:
        """``TOOLHOST_TRACE_ARGUMENTS`` (on: the redacted arguments go on each span)."""
        return cls(Tracing.from_settings(settings, monotonic), Instruments(monotonic))
