"""What tracing and metrics cost the pipeline (issue #29), side by side in one run.

math.calculate on ``17 * 23`` through the full pipeline (SQLite store in WAL mode, a durable
row per call), sequential calls on one loop, p50 µs per round, hosts driven in interleaved
rounds (a round: ``--batch`` calls on each host in turn, the order rotated each round), and
the medians over rounds of each host's p50 and of the per-round ratios:

1. tracing code disabled entirely (``Telemetry.tracing = None``: no span code runs; the
   metrics count as shipped): the baseline of the ratios;
2. as shipped, with the OpenTelemetry API installed and no SDK configured (target: under 2%
   from 1);
3. telemetry disabled entirely (``pipeline.telemetry = None``: no span code, no metric), for
   what the in-house metrics cost;
4. then, after an SDK ``TracerProvider`` is installed (the API sets one once per process, so
   this part comes last): the SDK with a batch span processor and an exporter that drops
   everything, against (1) again.

Run: python bench/bench_tracing.py [--batch N] [--rounds N]
(needs toolhost, toolhost-math and opentelemetry-sdk installed)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

import attrs

from toolhost._adapters.system_clock import SystemClock
from toolhost._composition import Host
from toolhost._model.runs import Run
from toolhost._registration.discovery import load_distributions

ARGS = {"expression": "17 * 23"}


def make_host(*, telemetry: bool = True, tracing: bool = True) -> Host:
    host = Host.from_sources(load_distributions(["toolhost-math"]), clock=SystemClock())
    if not telemetry:
        host.pipeline.telemetry = None
    elif not tracing:
        assert host.pipeline.telemetry is not None
        host.pipeline.telemetry = attrs.evolve(host.pipeline.telemetry, tracing=None)
    return host


async def batch(host: Host, run: Run, calls: int) -> float:
    """The p50 µs of ``calls`` sequential calls."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        outcome = await host.pipeline.invoke(run, "math.calculate", ARGS)
        samples.append((time.perf_counter() - start) * 1e6)
        assert outcome.ok
    return statistics.median(samples)


async def interleaved(hosts: dict[str, Host], rounds: int, calls: int) -> dict[str, list[float]]:
    runs = {label: host.start_run() for label, host in hosts.items()}
    labels = list(hosts)
    p50s: dict[str, list[float]] = {label: [] for label in labels}
    for label in labels:  # warm each: first use, caches, the store's first pages
        await batch(hosts[label], runs[label], calls)
    for r in range(rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for label in order:
            p50s[label].append(await batch(hosts[label], runs[label], calls))
    return p50s


def report(p50s: dict[str, list[float]], baseline: str) -> None:
    base = p50s[baseline]
    print(f"{'':58} {'p50 µs':>8} {'ratio (range)':>22}")
    for label, values in p50s.items():
        ratios = [v / b for v, b in zip(values, base, strict=True)]
        spread = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        print(f"{label:58} {statistics.median(values):8.1f} {spread:>22}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=1000, help="calls per host per round")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)

    off = "tracing code disabled entirely (metrics on)"
    no_sdk = "as shipped, OpenTelemetry API, no SDK configured"
    nothing = "telemetry disabled entirely (no spans, no metrics)"
    hosts = {off: make_host(tracing=False), no_sdk: make_host(),
             nothing: make_host(telemetry=False)}
    try:
        print(f"1-3. {args.rounds} interleaved rounds of {args.batch} calls a host")
        report(asyncio.run(interleaved(hosts, args.rounds, args.batch)), off)

        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropped(SpanExporter):
            def export(self, spans: object) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
        sdk = "SDK configured, batch processor, no-op exporter"
        hosts[sdk] = make_host()
        hosts.pop(no_sdk).close()
        hosts.pop(nothing).close()
        print("\n4. the same, with an SDK tracer provider installed")
        report(asyncio.run(interleaved({off: hosts[off], sdk: hosts[sdk]},
                                       args.rounds, args.batch)), off)
        provider.shutdown()
    finally:
        for host in hosts.values():
            host.close()


if __name__ == "__main__":
    main()
