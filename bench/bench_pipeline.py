"""Pipeline overhead and concurrency (issue #3), side by side in one run.

1. math.calculate on `17 * 23` through the full pipeline (SQLite store in WAL mode, durable
   row per call) next to calling the tool body directly: p50/p99 µs and invocations/s.
   Goal: overhead under 300 µs at p50, durable write included.
2. 1,000 concurrent read-only invocations in one asyncio loop: wall time, and a check that
   exactly 1,000 distinct rows were written.

Run: python bench/bench_pipeline.py [--calls N]   (needs toolhost and toolhost-math installed)
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import tempfile
import time
from pathlib import Path

from toolhost._adapters.system_clock import SystemClock
from toolhost._composition import Host
from toolhost._model.context import Principal, ToolExecutionContext
from toolhost._registration.discovery import load_distributions

ARGS = {"expression": "17 * 23"}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="toolhost-bench-"))
    host = Host.from_sources(load_distributions(["toolhost-math"]), clock=SystemClock(),
                             data_dir=data_dir)
    registered = host.registry.resolve("math.calculate")
    body = registered.tool.build(host.services)
    context = ToolExecutionContext(run_id="bench", principal=Principal("bench"))
    run = host.start_run()

    def call_body() -> object:
        result = body(ARGS, context)
        if inspect.iscoroutine(result):  # an async body that awaits nothing: drive it inline
            try:
                result.send(None)
            except StopIteration as stop:
                return stop.value
            raise RuntimeError("the tool body suspended")
        return result

    direct: list[float] = []
    for _ in range(args.calls):
        start = time.perf_counter()
        call_body()
        direct.append((time.perf_counter() - start) * 1e6)

    async def sequential() -> list[float]:
        samples = []
        for _ in range(args.calls):
            start = time.perf_counter()
            outcome = await host.invoke("math.calculate", ARGS, run=run)
            samples.append((time.perf_counter() - start) * 1e6)
            assert outcome.content == "391"
        return samples

    piped = asyncio.run(sequential())
    d50, p50 = statistics.median(direct), statistics.median(piped)
    print(f"math.calculate '17 * 23', {args.calls} calls each")
    print(f"{'':22} {'p50 µs':>9} {'p99 µs':>9} {'calls/s':>10}")
    print(f"{'tool body directly':22} {d50:9.1f} {percentile(direct, .99):9.1f} "
          f"{1e6 / statistics.mean(direct):10.0f}")
    print(f"{'full pipeline':22} {p50:9.1f} {percentile(piped, .99):9.1f} "
          f"{1e6 / statistics.mean(piped):10.0f}")
    print(f"overhead at p50: {p50 - d50:.1f} µs (goal < 300 µs), ratio {p50 / d50:.1f}x")

    before = host.pipeline.invocations.count()

    async def concurrent() -> list[str]:
        outcomes = await asyncio.gather(
            *(host.invoke("math.calculate", {"expression": f"{i} + 1"}, run=run)
              for i in range(1000)))
        return [o.invocation_id for o in outcomes if o.content]

    start = time.perf_counter()
    ids = asyncio.run(concurrent())
    wall = time.perf_counter() - start
    rows = host.pipeline.invocations.count() - before
    print(f"1000 concurrent read-only invocations: {wall * 1000:.0f} ms wall, "
          f"{1000 / wall:.0f}/s; rows written {rows}, distinct ids {len(set(ids))}")
    assert rows == 1000 and len(set(ids)) == 1000


if __name__ == "__main__":
    main()
