"""The PostgreSQL record's writes (issue #27): calls/s of a host on PostgreSQL next to a raw
psycopg loop making the same writes, with 1 and 8 calls in flight, and two of each against one.

Targets: one host at least 1.0x the raw loop with one call in flight, at least 2x the raw
loop's one-call figure with 8 in flight, and two hosts at least 1.8x one.

Rows (each process long-lived, started and warmed once, then driven a round at a time):

* ``toolhost, 1 host, N=1`` and ``N=8``: one host on the database (``TOOLHOST_DATABASE_URL``)
  calling a writing tool through ``Host.invoke``, the one bench_many_hosts.py calls
  (``bench.note``: WORKSPACE_WRITE, non-idempotent, a sync body echoing its argument, run on
  the pipeline's worker thread as any sync body is), with 1 or 8 calls in flight (asyncio
  tasks on one loop, as bench_pipeline.py). Its row is written
  ``running`` before the body runs and finished after it: an INSERT and an UPDATE, each
  committed, each on a connection from the store's pool. With 8 in flight the pipeline's group
  commit puts the writes of one pass of the loop in one transaction.
* ``raw psycopg, 1 connection`` and ``8 connections``: the reference. The same two statements
  a call makes, as the store sends them (captured from a warm-up call of the host: the SQL
  text and the parameters, with the id, the times and the argument made anew each call), each
  in autocommit on a connection held open (with the store's session settings), so one
  statement and one commit per write as the store alone does; 8 connections on 8 threads.
* ``raw psycopg + the pool's check``: the raw loop with the one round trip more a write that
  the store's pool makes before lending a connection (``ConnectionPool.check_connection``, an
  empty query): informative, no target; how much of the gap is that round trip.
* ``toolhost, 2 hosts`` and ``raw psycopg, 2 processes``: two of each, one call in flight in
  each, released together; calls over the wall time from the first start to the last end.

Each row's ratio is to its target's reference (raw N=1; one host for two hosts); "x raw, same
shape" is toolhost over the raw row with as many calls in flight.

``--tool calculate`` measures math.calculate instead (read-only: one INSERT a call, the final
row) against a raw loop of that one INSERT.

Every process writes into the same ``tool_invocations`` table (the store's migrations: its
primary key and two indexes), so each sees the same table and indexes as they grow.
Configurations alternate round by round, the order rotated each round, so the shared
machine's noise hits each alike; the table gives medians and ratios of medians, with the
client process's CPU per call (all its threads) and the server's (every process of the
cluster, from /proc). The server is a throwaway cluster as the tests start it
(tests/pg_server.py: fsync off, so a commit costs the protocol and the server's work, not a
disk flush) on the same cores as the clients.

Run: python bench/bench_pg_record.py [--rounds 7] [--calls N] [--tool note|calculate]
[--no-two] [--baseline HOST_DIR] (needs toolhost-core[postgres], toolhost-math and the
PostgreSQL server binaries; the default, 7 rounds of 2,000 calls, takes 1.5 to 2 minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

#: The argument value of the warm-up call whose writes are captured for the raw loop.
MARK = "capture-0000"
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


# ------------------------------------------------------------------------ the host's process


def _make_host(tool: str) -> Any:
    from toolhost._adapters.system_clock import SystemClock
    from toolhost._model.settings import Settings

    settings = Settings.from_environ()
    if tool == "calculate":
        from toolhost._composition import Host
        from toolhost._registration.discovery import load_distributions

        return Host.from_sources(load_distributions(["toolhost-math"]), settings=settings,
                                 clock=SystemClock())
    from conftest import make_plugin, make_spec

    from toolhost import Idempotency, Risk, SideEffect, Tool, ToolOutput
    from toolhost.testing import host_for

    key = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"],
           "additionalProperties": False}
    spec = make_spec(name="bench.note", input_schema=key, output_schema=key,
                     side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                     idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)

    def note(arguments: Any, context: Any) -> Any:
        return ToolOutput(structured={"x": arguments["x"]}, content=arguments["x"])

    plugin = make_plugin(domains=["bench"], tools=[Tool(spec, call=note)])
    return host_for({"bench-dist": plugin}, settings=settings, clock=SystemClock())


def _encode(value: Any) -> Any:
    return {"hex": bytes(value).hex()} if isinstance(value, bytes | memoryview) else value


def host_child(tool: str) -> None:
    """A host driven by the parent: a line ``calls in_flight`` on stdin runs that many calls,
    and the figures come back as a line of JSON. The first line out is the captured writes."""
    host = _make_host(tool)
    run = host.local_run()
    name = "math.calculate" if tool == "calculate" else "bench.note"
    counter = iter(range(1 << 62))

    def arguments() -> dict[str, str]:
        if tool == "calculate":
            return {"expression": "17 * 23"}
        return {"x": str(next(counter))}

    async def calls(total: int, in_flight: int) -> None:
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                outcome = await host.invoke(name, arguments(), run=run)
                assert outcome.ok, outcome

        await asyncio.gather(*(worker() for _ in range(in_flight)))

    async def capture() -> list[dict[str, Any]]:
        """The statements one call makes, as the store sends them (``_changed``)."""
        store = host.pipeline.invocations
        seen: list[dict[str, Any]] = []
        real = store._changed

        def spy(sql: str, values: Sequence[Any], invocation_id: str, *rest: Any) -> int:
            seen.append({"sql": sql, "values": [_encode(v) for v in values],
                         "id": invocation_id})
            result: int = real(sql, values, invocation_id, *rest)
            return result

        store._changed = spy
        try:
            args = {"expression": "17 * 23"} if tool == "calculate" else {"x": MARK}
            outcome = await host.invoke(name, args, run=run)
            assert outcome.ok, outcome
        finally:
            del store._changed
        return seen

    async def main() -> None:
        await calls(300, 1)  # warm: the pool's connections, prepared statements, caches
        await calls(300, 8)
        print(json.dumps({"writes": await capture()}), flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            total, in_flight = map(int, line.split())
            cpu, start = time.process_time(), time.perf_counter()
            await calls(total, in_flight)
            end = time.perf_counter()
            print(json.dumps({"start": start, "end": end, "calls": total,
                              "cpu": time.process_time() - cpu}), flush=True)

    try:
        asyncio.run(main())
    finally:
        host.end_run(run)
        host.close()


# -------------------------------------------------------------------- the raw loop's process


def _maker(writes: list[dict[str, Any]], tool: str) -> Callable[[int], list[list[Any]]]:
    """Each captured statement's parameters for call ``i``: the call's id where the capture
    had its id, the time now where it had a time, and (a note) the argument ``str(i)`` where
    it had the marked one, with the arguments' digest made from it."""
    from toolhost._adapters.system_clock import new_invocation_id

    plans: list[list[tuple[str, Any]]] = []
    for write in writes:
        plan: list[tuple[str, Any]] = []
        for value in write["values"]:
            if isinstance(value, dict):
                value = bytes.fromhex(value["hex"])
            if value == write["id"]:
                plan.append(("id", None))
            elif isinstance(value, str) and _TIME.fullmatch(value):
                plan.append(("time", None))
            elif tool == "note" and isinstance(value, str) and value.startswith("sha256:"):
                plan.append(("digest", None))
            elif tool == "note" and isinstance(value, str) and MARK in value:
                plan.append(("text", value))
            elif tool == "note" and isinstance(value, bytes) and MARK.encode() in value:
                plan.append(("bytes", value))
            else:
                plan.append(("const", value))
        plans.append(plan)

    def make(i: int) -> list[list[Any]]:
        call_id, now, x = new_invocation_id(), _now(), str(i)
        digest = "sha256:" + hashlib.sha256(f'{{"x":"{x}"}}'.encode()).hexdigest()
        out = []
        for plan in plans:
            values = []
            for kind, value in plan:
                if kind == "const":
                    values.append(value)
                elif kind == "id":
                    values.append(call_id)
                elif kind == "time":
                    values.append(now)
                elif kind == "digest":
                    values.append(digest)
                elif kind == "text":
                    values.append(value.replace(MARK, x))
                else:
                    values.append(value.replace(MARK.encode(), x.encode()))
            out.append(values)
        return out

    return make


def raw_child(writes_file: str, tool: str, url: str) -> None:
    """The reference, driven as ``host_child`` is: each call's statements in autocommit on a
    connection of its thread's own, one thread and connection per call in flight."""
    import psycopg

    from toolhost._adapters.pg_invocations import session_settings

    writes = json.loads(Path(writes_file).read_text())
    sqls = [w["sql"] for w in writes]
    make = _maker(writes, tool)
    conns = [psycopg.connect(url, autocommit=True) for _ in range(8)]
    for conn in conns:
        session_settings(conn)
    counter = iter(range(1 << 62))
    lock = threading.Lock()

    def loop(conn: Any, n: int, check: bool) -> None:
        for _ in range(n):
            with lock:
                i = next(counter)
            for sql, values in zip(sqls, make(i), strict=True):
                if check:  # what the store's pool does before lending a connection
                    conn.execute("")
                assert conn.execute(sql, values).rowcount == 1

    def calls(total: int, in_flight: int, check: bool = False) -> None:
        if in_flight == 1:
            loop(conns[0], total, check)
            return
        shares = [total // in_flight + (k < total % in_flight) for k in range(in_flight)]
        threads = [threading.Thread(target=loop, args=(conns[k], shares[k], check))
                   for k in range(in_flight)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    calls(300, 1)  # warm, as the host is
    calls(300, 8)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        total, in_flight, check = int(words[0]), int(words[1]), words[2:] == ["check"]
        cpu, start = time.process_time(), time.perf_counter()
        calls(total, in_flight, check)
        end = time.perf_counter()
        print(json.dumps({"start": start, "end": end, "calls": total,
                          "cpu": time.process_time() - cpu}), flush=True)
    for conn in conns:
        conn.close()


# ------------------------------------------------------------------------------ the parent


def _server_ticks(data_dir: Path) -> int:
    """CPU clock ticks (user and system) of every process of the cluster so far."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster or ppid == postmaster:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


class Child:
    """A long-lived child process, one JSON line in reply to each line sent."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, *args], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child {self.proc.args} ended ({self.proc.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def one_round(children: Sequence[Child], calls: int, in_flight: int, data_dir: Path,
              extra: str = "") -> tuple[float, float, float]:
    """All ``children`` released together: calls/s over the wall time from the first start to
    the last end, client CPU µs a call, and the server's CPU µs a call."""
    ticks = _server_ticks(data_dir)
    for child in children:
        child.send(f"{calls} {in_flight} {extra}".strip())
    replies = [child.read() for child in children]
    server = (_server_ticks(data_dir) - ticks) / os.sysconf("SC_CLK_TCK")
    total = sum(r["calls"] for r in replies)
    # perf_counter is CLOCK_MONOTONIC on Linux: one clock for every process.
    wall = max(r["end"] for r in replies) - min(r["start"] for r in replies)
    return total / wall, sum(r["cpu"] for r in replies) * 1e6 / total, server * 1e6 / total


@attrs.define
class Row:
    """A configuration: its processes, driven together, each with ``in_flight`` calls; the
    row its ratio is to (and the target for it), and the raw row of the same shape."""

    name: str
    children: list[Child]
    in_flight: int
    reference: str | None = None
    target: float | None = None
    same: str | None = None
    extra: str = ""
    rates: list[float] = attrs.field(factory=list)
    client: list[float] = attrs.field(factory=list)
    server: list[float] = attrs.field(factory=list)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000,
                        help="calls per process per configuration per round")
    parser.add_argument("--tool", choices=("note", "calculate"), default="note")
    parser.add_argument("--no-two", action="store_true", help="leave out two hosts vs one")
    parser.add_argument("--baseline", type=Path, help="a host directory of another tree (its "
                        "toolhost package inside, e.g. `git archive HEAD host | tar -x -C "
                        "/tmp/base`): its one host, N=1 and N=8, in the same rounds")
    parser.add_argument("--child", choices=("host", "raw"), help=argparse.SUPPRESS)
    parser.add_argument("--writes", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "host":
        host_child(args.tool)
        return
    if args.child == "raw":
        raw_child(args.writes, args.tool, os.environ["TOOLHOST_DATABASE_URL"])
        return

    from pg_server import running_server

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pgbench-")))
        server.execute("CREATE DATABASE bench")
        env = {**os.environ, "TOOLHOST_DATABASE_URL": server.url("bench")}
        children: list[Child] = []

        def start(kind: str, n: int, tree: Path | None = None) -> Child:
            extra = ["--writes", str(tmp / "writes.json")] if kind == "raw" else []
            child_env = {**env, "TOOLHOST_DATA_DIR": str(tmp / f"{kind}{n}")}
            if tree is not None:  # that tree's toolhost before the installed one
                child_env["PYTHONPATH"] = os.pathsep.join(
                    p for p in (str(tree.resolve()), env.get("PYTHONPATH", "")) if p)
            child = Child(["--child", kind, "--tool", args.tool, *extra], child_env)
            children.append(child)
            return child

        @stack.callback
        def close() -> None:
            for child in children:
                with contextlib.suppress(Exception):
                    child.close()

        host1 = start("host", 1)  # first alone: it migrates the schema
        writes = host1.read()["writes"]
        (tmp / "writes.json").write_text(json.dumps(writes))
        raw1 = start("raw", 1)
        two = not args.no_two
        if two:
            host2, raw2 = start("host", 2), start("raw", 2)
            host2.read()
            raw2.read()
        raw1.read()
        statements = " + ".join(w["sql"].split()[0] for w in writes)
        raw_one, one_host = "raw psycopg, 1 connection", "toolhost, 1 host, N=1"
        raw_eight, raw_two = "raw psycopg, 8 connections", "raw psycopg, 2 processes"
        rows = [
            Row(raw_one, [raw1], 1),
            Row(one_host, [host1], 1, raw_one, 1.0, raw_one),
            Row("raw psycopg + the pool's check (an empty query) a write", [raw1], 1, raw_one,
                extra="check"),
            Row(raw_eight, [raw1], 8, raw_one),
            Row("toolhost, 1 host, N=8", [host1], 8, raw_one, 2.0, raw_eight),
        ]
        if args.baseline is not None:
            base = start("host", 9, args.baseline)
            base.read()
            rows += [Row("baseline tree, 1 host, N=1", [base], 1, raw_one, same=raw_one),
                     Row("baseline tree, 1 host, N=8", [base], 8, raw_one, same=raw_eight)]
        if two:
            rows += [Row(raw_two, [raw1, raw2], 1, raw_one),
                     Row("toolhost, 2 hosts, N=1 each", [host1, host2], 1, one_host, 1.8,
                         raw_two)]
        for r in range(args.rounds):
            for row in rows[r % len(rows):] + rows[:r % len(rows)]:
                rate, cpu, srv = one_round(row.children, args.calls, row.in_flight,
                                           server.data_dir, row.extra)
                row.rates.append(rate)
                row.client.append(cpu)
                row.server.append(srv)
            print(f"round {r + 1}: " + ", ".join(
                f"{row.name} {row.rates[-1]:,.0f}/s" for row in rows), file=sys.stderr)

    med = {row.name: statistics.median(row.rates) for row in rows}
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "?"
    print(f"{os.cpu_count()} cores, load {load}; {args.rounds} rounds of {args.calls:,} calls "
          f"per process; {statements} a call ({args.tool}); medians, ratios of medians")
    print("| configuration | calls/s | range | x reference | target | met | x raw, same shape "
          "| client CPU µs/call | server CPU µs/call |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        ratio = med[row.name] / med[row.reference or row.name]
        target = "" if row.target is None else f"{row.target:.1f}x"
        met = "" if row.target is None else "yes" if ratio >= row.target else "no"
        shape = "" if row.same is None else f"{med[row.name] / med[row.same]:.2f}x"
        which = {raw_one: "raw N=1", one_host: "1 host", None: "itself"}[row.reference]
        print(f"| {row.name} | {med[row.name]:,.0f} | {min(row.rates):,.0f} to "
              f"{max(row.rates):,.0f} | {ratio:.2f}x ({which}) | {target} | {met} | {shape} | "
              f"{statistics.median(row.client):,.0f} | {statistics.median(row.server):,.0f} |")


if __name__ == "__main__":
    main()
