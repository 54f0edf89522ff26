"""Pipeline overhead and concurrency (issues #3 and #11), side by side in one run.

1. math.calculate on `17 * 23` through the full pipeline (SQLite store in WAL mode, durable
   row per call) next to calling the tool body directly: p50/p99/p99.9 µs and calls/s. The
   pipeline runs on two hosts in alternating batches: as shipped (WAL checkpoints on the
   store's background thread) and with SQLite's default checkpointing (every 1,000 WAL pages,
   by whichever commit crosses it: on the event loop).
2. Throughput with N calls in flight (N = 1, 8, 64 tasks on one asyncio loop), both hosts.
3. 1,000 concurrent read-only invocations: wall time, and a check that exactly 1,000 distinct
   rows were written.
4. Where a call's time goes at N = 64 (``--where``): the pipeline as shipped (concurrent
   calls' rows group-committed, each call answered once its row is committed), beside the
   same pipeline committing each row alone (as before group commit), with an in-memory
   database, with the rows written by a thread and nothing awaiting them (an upper bound, not
   durable), with the row's values built but not written, and with no row at all. What the
   record costs on the event loop, and what the rest of the pipeline allows.

5. Side by side with another checkout (``--baseline HOST_DIR``, e.g. ``git worktree add
   /tmp/base d1c5a2b`` and ``/tmp/base/host``): calls/s at N = 64 and sequential p50/p99 (wall
   and the loop thread's CPU), each tree in a long-lived process of its own, the two driven
   in short rounds alternately (3,000 calls at N = 64, then ``--calls`` sequential ones), with
   the ratio of each pair of rounds. ``--plugin-path`` puts one math plugin first on both
   trees' path, so only the host differs.

Run: python bench/bench_pipeline.py [--calls N] [--batch N] [--where | --where-only] [--rounds N]
     python bench/bench_pipeline.py --baseline /tmp/base/host [--plugin-path DIR] [--rounds N]
(needs toolhost and toolhost-math installed)
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from toolhost._adapters.system_clock import SystemClock
from toolhost._composition import Host
from toolhost._model.runs import CancellationEvent, Run
from toolhost._registration.discovery import load_distributions

ARGS = {"expression": "17 * 23"}
SHIPPED = "as shipped (group commit, durable)"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_host(*, default_checkpointing: bool) -> Host:
    # No data_dir: the host makes a temporary one, and removes it on close.
    host = Host.from_sources(load_distributions(["toolhost-math"]), clock=SystemClock())
    if default_checkpointing:
        # SQLite's own behaviour: the commit that takes the WAL past 1,000 pages checkpoints it.
        store: Any = host.pipeline.invocations
        checkpointer = getattr(store, "checkpointer", None)
        if checkpointer is not None:
            checkpointer.close()
        store._conn.execute("PRAGMA wal_autocheckpoint=1000")
    return host


def row(label: str, samples: list[float]) -> str:
    return (f"{label:34} {statistics.median(samples):9.1f} {percentile(samples, .99):9.1f} "
            f"{percentile(samples, .999):9.1f} {1e6 / statistics.mean(samples):10.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000, help="sequential calls per host")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--where", action="store_true", help="also run part 4")
    parser.add_argument("--where-only", action="store_true", help="run part 4 alone")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of part 4 or 5")
    parser.add_argument("--baseline", type=Path, help="part 5 alone: this host directory "
                        "(another checkout's host/) against this tree's")
    parser.add_argument("--plugin-path", type=Path, help="part 5: the math plugin's src, "
                        "first on both trees' path")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(one_tree(args.calls))
        return
    if args.baseline is not None:
        side_by_side(args.baseline, args.plugin_path, args.rounds, args.calls)
        return
    if args.where_only:
        asyncio.run(where_it_goes(args.rounds))
        return
    shipped, default = make_host(default_checkpointing=False), make_host(
        default_checkpointing=True)
    hosts = {"full pipeline (as shipped)": shipped,
             "full pipeline (SQLite autocheckpoint)": default}
    runs = {label: host.start_run() for label, host in hosts.items()}

    registered = shipped.registry.resolve("math.calculate")
    body = registered.tool.callable_for(shipped.services)
    context = shipped.pipeline.context_for(runs["full pipeline (as shipped)"],
                                           deadline=time.monotonic() + 3600,
                                           cancellation=CancellationEvent())

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

    # The loop thread's CPU time per call too: on a shared machine other processes add
    # milliseconds of waiting to the wall-clock tail, never to this thread's CPU time.
    cpu: dict[str, list[float]] = {label: [] for label in hosts}

    async def sequential(host: Host, run: Run, calls: int, into: list[float],
                         cpu_into: list[float]) -> None:
        for _ in range(calls):
            start, start_cpu = time.perf_counter(), time.thread_time()
            outcome = await host.invoke("math.calculate", ARGS, run=run)
            into.append((time.perf_counter() - start) * 1e6)
            cpu_into.append((time.thread_time() - start_cpu) * 1e6)
            assert outcome.content == "391"

    async def alternate() -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {label: [] for label in hosts}
        for label, host in hosts.items():  # warm up: build the tool, fill caches
            await sequential(host, runs[label], 200, [], [])
        for _ in range(max(1, args.calls // args.batch)):
            for label, host in hosts.items():
                await sequential(host, runs[label], args.batch, samples[label], cpu[label])
        return samples

    piped = asyncio.run(alternate())
    d50 = statistics.median(direct)
    print(f"math.calculate '17 * 23', {args.calls} sequential calls each "
          f"(hosts alternate in batches of {args.batch})")
    print(f"{'':34} {'p50 µs':>9} {'p99 µs':>9} {'p99.9 µs':>9} {'calls/s':>10}")
    print(row("tool body directly", direct))
    for label, samples in piped.items():
        print(row(label, samples))
    ours, theirs = piped["full pipeline (as shipped)"], piped[
        "full pipeline (SQLite autocheckpoint)"]
    print(f"overhead at p50: {statistics.median(ours) - d50:.1f} µs as shipped, "
          f"{statistics.median(theirs) - d50:.1f} µs with autocheckpoint; p99 ratio "
          f"{percentile(ours, .99) / percentile(theirs, .99):.2f}")
    print("the event loop thread's CPU time per call, same calls")
    for label, samples in cpu.items():
        print(row(f"{label} CPU", samples))

    async def in_flight(host: Host, run: Run, n: int, total: int) -> float:
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await host.invoke("math.calculate", ARGS, run=run)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(n)))
        return total / (time.perf_counter() - start)

    async def throughput() -> dict[tuple[str, int], list[float]]:
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(5):
            for n in (1, 8, 64):
                for label, host in hosts.items():
                    rates.setdefault((label, n), []).append(
                        await in_flight(host, runs[label], n, 2000))
        return rates

    rates = asyncio.run(throughput())
    print("calls/s with N calls in flight (median of 5 rounds of 2,000 calls)")
    print(f"{'':34} {'N = 1':>9} {'N = 8':>9} {'N = 64':>9}")
    for label in hosts:
        print(f"{label:34} " + " ".join(
            f"{statistics.median(rates[(label, n)]):9.0f}" for n in (1, 8, 64)))

    host, run = shipped, runs["full pipeline (as shipped)"]
    before = host.pipeline.invocations.count()

    async def concurrent() -> list[str]:
        outcomes = await asyncio.gather(
            *(host.invoke("math.calculate", {"expression": f"{i} + 1"}, run=run)
              for i in range(1000)))
        return [str(o.invocation_id) for o in outcomes if o.content]

    start = time.perf_counter()
    ids = asyncio.run(concurrent())
    wall = time.perf_counter() - start
    rows = host.pipeline.invocations.count() - before
    print(f"1000 concurrent read-only invocations: {wall * 1000:.0f} ms wall, "
          f"{1000 / wall:.0f}/s; rows written {rows}, distinct ids {len(set(ids))}")
    assert rows == 1000 and len(set(ids)) == 1000
    for host in hosts.values():
        host.close()
    if args.where:
        asyncio.run(where_it_goes(args.rounds))


async def where_it_goes(args_rounds: int = 5) -> None:
    from toolhost._adapters.sqlite_db import connect
    from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
    from toolhost._model.convert import to_row

    variants: dict[str, Host] = {}
    writers: list[GroupWriter] = []
    for label in (SHIPPED, "each row committed alone", "row in an in-memory database",
                  "rows written by a thread, not awaited *", "row's values built, not written",
                  "no row at all"):
        host = variants[label] = make_host(default_checkpointing=False)
        store: Any = host.pipeline.invocations
        if label.startswith("row in"):
            host.pipeline.invocations = SQLiteInvocationStore(connect(":memory:"))
        elif label.startswith("each row"):
            store.transaction = None  # a store without one: each write commits alone
        elif label.startswith("rows written"):
            writer = GroupWriter(store._conn)
            writers.append(writer)
            store.insert = writer.insert
            store.transaction = None  # nothing to group on the loop: the thread does
        elif label.startswith("row's values"):
            store.insert = to_row
            store.transaction = None
        elif label.startswith("no row"):
            store.insert = lambda record: None
            store.transaction = None
    runs = {label: host.start_run() for label, host in variants.items()}

    async def rate(host: Host, run: Run, total: int = 3000) -> tuple[float, float]:
        """Calls/s, and the event loop thread's CPU µs per call (what other processes on a
        shared machine cannot inflate; a writer thread's own CPU is not in it)."""
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await host.invoke("math.calculate", ARGS, run=run)

        start, start_cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(worker() for _ in range(64)))
        cpu = (time.thread_time() - start_cpu) * 1e6 / total
        return total / (time.perf_counter() - start), cpu

    rates: dict[str, list[float]] = {label: [] for label in variants}
    cpus: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(args_rounds):
        for label, host in variants.items():
            calls, cpu = await rate(host, runs[label])
            rates[label].append(calls)
            cpus[label].append(cpu)
    print(f"where a call's time goes, N = 64 (median of {args_rounds} rounds of 3,000 calls)")
    print(f"{'':38} {'calls/s':>8} {'µs/call':>8} {'ratio':>6} {'loop CPU µs/call':>17} "
          f"{'ratio':>6}")
    shipped = statistics.median(rates[SHIPPED])
    shipped_cpu = statistics.median(cpus[SHIPPED])
    for label, samples in rates.items():
        median, cpu = statistics.median(samples), statistics.median(cpus[label])
        print(f"{label:38} {median:8.0f} {1e6 / median:8.0f} {median / shipped:5.2f}x "
              f"{cpu:17.0f} {shipped_cpu / cpu:5.2f}x")
    print("* an upper bound, not durable: a call's row is queued for a writer thread and "
          "invoke does not wait for its commit")
    for writer in writers:
        writer.close()
    for host in variants.values():
        host.close()


async def one_tree(calls: int) -> None:
    """Part 5's child: the toolhost this process imports, measured a round at a time on
    command (a line on stdin), each round's figures a line of JSON on stdout (see
    ``side_by_side``)."""
    host = Host.from_sources(load_distributions(["toolhost-math"]), clock=SystemClock())
    run = host.start_run()

    async def at_64(total: int) -> tuple[float, float]:
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await host.invoke("math.calculate", ARGS, run=run)

        start, start_cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(worker() for _ in range(64)))
        return (total / (time.perf_counter() - start),
                (time.thread_time() - start_cpu) * 1e6 / total)

    async def sequential() -> tuple[list[float], list[float]]:
        wall, cpu = [], []
        for _ in range(calls):
            start, start_cpu = time.perf_counter(), time.thread_time()
            outcome = await host.invoke("math.calculate", ARGS, run=run)
            wall.append((time.perf_counter() - start) * 1e6)
            cpu.append((time.thread_time() - start_cpu) * 1e6)
            assert outcome.content == "391"
        return wall, cpu

    await at_64(1000)  # warm up
    await sequential()
    print("ready", flush=True)
    for _ in sys.stdin:
        rate, per_call = await at_64(3000)
        wall, cpu = await sequential()
        print(json.dumps({
            "calls/s N=64": rate, "CPU µs/call N=64": per_call,
            "p50 µs": statistics.median(wall), "p99 µs": percentile(wall, .99),
            "CPU p50 µs": statistics.median(cpu), "CPU p99 µs": percentile(cpu, .99)}),
            flush=True)
    host.close()


def side_by_side(baseline: Path, plugin_path: Path | None, rounds: int, calls: int) -> None:
    """Part 5: each tree in a process of its own, both started once and driven a short round
    at a time, alternating, so the two rounds of a pair are a second apart and a shared
    machine's load falls on both alike; the ratio is taken pair by pair."""
    here = Path(__file__).resolve().parents[1] / "host"
    trees = {"baseline": baseline.resolve(), "this tree": here}
    children: dict[str, subprocess.Popen[str]] = {}
    for label, host_dir in trees.items():
        path = [str(host_dir)] + ([str(plugin_path.resolve())] if plugin_path else [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        children[label] = subprocess.Popen(
            [sys.executable, __file__, "--child", "--calls", str(calls)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    figures: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    try:
        for child in children.values():
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for i in range(rounds):
            # Which tree goes first alternates too: neither always follows the other.
            order = list(children.items())[:: 1 if i % 2 == 0 else -1]
            for label, child in order:
                assert child.stdin is not None and child.stdout is not None
                child.stdin.write("round\n")
                child.stdin.flush()
                figures[label].append(json.loads(child.stdout.readline()))
    finally:
        for child in children.values():
            assert child.stdin is not None
            child.stdin.close()
            child.wait()
    keys = list(figures["this tree"][0])
    print(f"side by side, {rounds} alternating rounds of 3,000 calls at N = 64 and {calls} "
          f"sequential ({baseline} against {here}); median (range) of the rounds")
    print(f"{'':18} " + " ".join(f"{k:>22}" for k in keys))
    for label, runs in figures.items():
        print(f"{label:18} " + " ".join(
            f"{statistics.median(r[k] for r in runs):22.0f}" for k in keys))
    ratios = {k: [ours[k] / theirs[k] for ours, theirs in zip(figures["this tree"],
                                                              figures["baseline"], strict=True)]
              for k in keys}
    print(f"{'this / baseline':18} " + " ".join(
        f"{f'{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})':>22}"
        for v in ratios.values()))


class GroupWriter:
    """Rows queued by ``insert`` (their values built by the caller, on the loop) and written
    in one transaction per batch by a thread of its own (sqlite3 releases the GIL in SQLite's
    code, so that part could run beside the loop). Nothing awaits the commit: an upper bound
    for writing the row off the loop, not a durable store."""

    def __init__(self, conn: Any, *, threaded: bool = True) -> None:
        import threading

        from toolhost._adapters.sqlite_invocations import _INSERT

        self._conn, self._insert = conn, _INSERT
        self._rows: list[Any] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def insert(self, record: Any) -> None:
        from toolhost._model.convert import to_row

        with self._lock:
            first = not self._rows
            self._rows.append(list(to_row(record).values()))
        if first:
            self._wake.set()

    def _flush(self) -> None:
        with self._lock:
            rows, self._rows = self._rows, []
        self._conn.execute("BEGIN")
        self._conn.executemany(self._insert, rows)
        self._conn.execute("COMMIT")

    def _run(self) -> None:
        while not self._closing:
            self._wake.wait()
            self._wake.clear()
            if self._rows:
                self._flush()

    def close(self) -> None:
        self._closing = True
        self._wake.set()
        self._thread.join()
        if self._rows:
            self._flush()


if __name__ == "__main__":
    main()
