"""The OpenTelemetry mirror of toolhost's metrics uses the attributes docs/observability.md
lists, and only those: the approval-wait histogram named its tool ``toolhost.tool.name``
where every other instrument says ``gen_ai.tool.name``, so no query joined approval waits
with the calls of the same tool.

A real host (SQLite record, the math plugin) with the OpenTelemetry SDK's meter provider and
its in-memory reader; calls paused, approved and denied through the host's own API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the test extra) is missing")

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from toolhost._composition import Host
from toolhost._model.settings import Settings
from toolhost._registration.discovery import load_distributions

#: docs/observability.md, "Through OpenTelemetry": the attributes of every instrument.
DOCUMENTED = {"gen_ai.tool.name", "toolhost.tool.version", "toolhost.status",
              "toolhost.reason_code", "toolhost.decision", "toolhost.store", "toolhost.lost"}
_reader: InMemoryMetricReader | None = None


def reader() -> InMemoryMetricReader:
    """The reader of the process's SDK meter provider, installed by the first caller (the API
    sets the global provider once per process)."""
    global _reader
    if _reader is None:
        _reader = InMemoryMetricReader()
        installed = MeterProvider(metric_readers=[_reader])
        metrics.set_meter_provider(installed)
        assert metrics.get_meter_provider() is installed, "another meter provider was set"
    return _reader


def points(name: str) -> list[dict[str, Any]]:
    """The attributes of each point of toolhost's instrument ``name`` read now."""
    data = reader().get_metrics_data()
    assert data is not None
    return [dict(point.attributes or {})
            for resource in data.resource_metrics for scope in resource.scope_metrics
            if scope.scope.name == "toolhost"
            for metric in scope.metrics if metric.name == name
            for point in metric.data.data_points]


def test_every_instrument_uses_the_documented_attributes(tmp_path: Path) -> None:
    reader()
    with Host.from_sources(load_distributions(["toolhost-math"]), data_dir=tmp_path / "d",
                           settings=Settings({"TOOLHOST_POLICY": '{"NONE/LOW": "approval"}'})
                           ) as host:
        paused = [host.invoke_sync("math.calculate", {"expression": f"{n} + 1"})
                  for n in range(2)]
        assert all(o.paused for o in paused)
        host.approve_sync(str(paused[0].invocation_id), "ops")
        host.pipeline.deny(str(paused[1].invocation_id), "ops", "no")
    waits = points("toolhost.approval.wait")
    assert {(p.get("gen_ai.tool.name"), p.get("toolhost.decision")) for p in waits} >= {
        ("math.calculate", "approved"), ("math.calculate", "denied")}
    calls = points("toolhost.tool.calls")
    assert {p["gen_ai.tool.name"] for p in calls} >= {"math.calculate"}
    for name in ("toolhost.tool.calls", "toolhost.tool.call.duration",
                 "toolhost.approval.wait", "toolhost.calls.awaiting_approval",
                 "toolhost.store.errors"):
        used = set().union(*points(name))
        assert used <= DOCUMENTED, (name, used - DOCUMENTED)
