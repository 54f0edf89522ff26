"""toolhost's metrics: what the pipeline and the MCP server count, by what.

Each instrument is kept in the process's ``metrics.Registry`` (what ``GET /metrics`` renders
on ``serve --http``) and mirrored to the OpenTelemetry metrics API when it is importable and a
meter provider is configured (asked at most once per ``tracing.CHECK_EVERY_S`` until one is,
as for the tracer). Each process counts its own calls: several hosts are several scrape
targets, summed by the query, as Prometheus expects.

Sandbox and provider failures have no counter of their own: they are failed calls, and their
reason code says which (``tool.upstream_unavailable.isolation_unavailable``,
``tool.timeout.provider_timeout``, ...), so ``toolhost_tool_calls_total{status="failed"}`` by
``reason_code`` is that count, with the same labels as every other call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolhost._model.outcome import Outcome
from toolhost._pipeline.log import lost_lines
from toolhost._pipeline.metrics import Registry
from toolhost._pipeline.tracing import ProviderProbe, named_no_tool

__all__ = ["Instruments"]

#: The meter's (instrumentation scope's) name.
METER_NAME = "toolhost"
#: The label of a tool name, or a version, that no registered tool has.
UNKNOWN_LABEL = "(unknown)"


class Instruments:
    """The host's instruments over one registry."""

    def __init__(self, monotonic: Callable[[], float], registry: Registry | None = None) -> None:
        self.registry = registry if registry is not None else Registry()
        r = self.registry
        self.calls = r.counter(
            "toolhost_tool_calls_total",
            "Tool call outcomes, by tool, version, status and reason code (a failure's; empty "
            "otherwise). A call that waited for approval counts once awaiting_approval and "
            "once with its end.",
            ("tool", "version", "status", "reason_code"))
        self.duration = r.histogram(
            "toolhost_tool_call_duration_seconds",
            "Time the pipeline took for a call, from resolving it to its recorded outcome "
            "(the wait for an approval excluded), by tool, version and status.",
            ("tool", "version", "status"))
        self.approval_wait = r.histogram(
            "toolhost_approval_wait_seconds",
            "Time from a call's pause for approval to its approval or denial, by tool and "
            "decision (approved, denied).",
            ("tool", "decision"))
        self.awaiting = r.gauge(
            "toolhost_calls_awaiting_approval",
            "Calls this process holds open while a person decides within the call (an MCP "
            "client's form). Paused calls left for an operator are `toolhost pending`.")
        self.store_errors = r.counter(
            "toolhost_store_errors_total",
            "Writes to the invocation record that failed, by store and what was lost "
            "(recorded: nothing ran; result: a writing call ran and its result was not "
            "recorded).",
            ("store", "lost"))
        self.log_lines_lost = r.counter(
            "toolhost_log_lines_lost_total",
            "Log lines this process dropped because they could not be rendered or written (a "
            "stderr nobody reads, a value no renderer takes): the first is reported on the "
            "log's stream, every one is counted here.")
        self._otel: _OtelMirror | None = None
        self._probe = ProviderProbe(monotonic)

    # ------------------------------------------------------------------ what is counted

    def call_ended(self, outcome: Outcome, seconds: float) -> None:
        """One outcome of the pipeline (``invoke``, an approval's run, a denial)."""
        tool, version = outcome.tool, outcome.version or ""
        status = outcome.status.value
        failure = outcome.failure
        reason = failure.reason_code if failure is not None else ""
        # A name or version no tool has is the caller's word: labelled as such, never as
        # itself, so a client cannot make a series per name it invents (D273, D420).
        if named_no_tool(outcome):
            tool, version = UNKNOWN_LABEL, ""
        elif outcome.version is None:  # an unknown version of a registered tool
            version = UNKNOWN_LABEL
        with self.registry.lock:  # both updates under one acquisition (a call's hot path)
            self.calls.inc_locked((tool, version, status, reason))
            self.duration.observe_locked(seconds, (tool, version, status))
        mirror = self._otel if self._otel is not None else self._mirror()
        if mirror is not None:
            mirror.call_ended(tool, version, status, reason, seconds)

    def approval_decided(self, tool: str, decision: str, seconds: float) -> None:
        self.approval_wait.observe(max(0.0, seconds), (tool, decision))
        mirror = self._mirror()
        if mirror is not None:
            # The tool's attribute every instrument and span has: a query joins them by it.
            mirror.approval_wait.record(max(0.0, seconds), {"gen_ai.tool.name": tool,
                                                            "toolhost.decision": decision})

    def awaiting_changed(self, amount: int) -> None:
        self.awaiting.add(amount)
        mirror = self._mirror()
        if mirror is not None:
            mirror.awaiting.add(amount)

    def store_failed(self, lost: str, store: str = "invocations") -> None:
        self.store_errors.inc((store, lost))
        mirror = self._mirror()
        if mirror is not None:
            mirror.store_errors.add(1, {"toolhost.store": store, "toolhost.lost": lost})

    def render(self) -> str:
        # The log keeps its own count (a line is lost where no metric may be touched: D417);
        # the counter is brought up to it at each scrape, and so always has a sample.
        with self.registry.lock:
            lost = self.log_lines_lost
            lost.inc_locked((), lost_lines() - lost.value())
        return self.registry.render()

    def _mirror(self) -> _OtelMirror | None:
        if self._otel is not None:
            return self._otel
        if not self._probe.due():
            return None
        try:
            from opentelemetry import metrics as otel_metrics
        except ImportError:  # pragma: no cover - a broken or partial installation
            return None
        provider = otel_metrics.get_meter_provider()
        if isinstance(provider, otel_metrics.NoOpMeterProvider) or (
                type(provider).__name__ == "_ProxyMeterProvider"):
            return None
        from toolhost import __version__

        self._otel = _OtelMirror(provider.get_meter(METER_NAME, __version__))
        return self._otel


class _OtelMirror:
    """The same instruments through the OpenTelemetry metrics API (names in its dotted
    style, which its Prometheus exporter turns back into ours)."""

    def __init__(self, meter: Any) -> None:
        self.calls = meter.create_counter(
            "toolhost.tool.calls", unit="{call}", description="Tool call outcomes.")
        self.duration = meter.create_histogram(
            "toolhost.tool.call.duration", unit="s",
            description="Time the pipeline took for a call.")
        self.approval_wait = meter.create_histogram(
            "toolhost.approval.wait", unit="s",
            description="Time from a pause for approval to its decision.")
        self.awaiting = meter.create_up_down_counter(
            "toolhost.calls.awaiting_approval", unit="{call}",
            description="Calls held open while a person decides within the call.")
        self.store_errors = meter.create_counter(
            "toolhost.store.errors", unit="{error}",
            description="Writes to the invocation record that failed.")

    def call_ended(self, tool: str, version: str, status: str, reason: str,
                   seconds: float) -> None:
        attributes = {"gen_ai.tool.name": tool, "toolhost.tool.version": version,
                      "toolhost.status": status}
        self.duration.record(seconds, attributes)
        self.calls.add(1, {**attributes, "toolhost.reason_code": reason})
