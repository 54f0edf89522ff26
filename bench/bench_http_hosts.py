"""Calls per second through a round-robin balancer with 1 and 2 ``toolhost serve --http``
hosts on one PostgreSQL database (issue #25: 2 hosts at least 1.6x one host).

Two hosts run for the whole run, each a ``serve --http`` process with its own data directory,
both on one throwaway PostgreSQL cluster's database (tests/pg_server.py), the token file of a
few people (each session is one person's), and toolhost-math. Hosts on one database route each
MCP session to the host that opened it, forwarding a request that reaches the other one
(D246). The configurations, each measured with two kinds of client:

- ``1 host, balancer``: the round-robin TCP balancer of the journeys (tests/journeys/
  balancer.py, a thread of this process) in front of the first host only;
- ``2 hosts, balancer``: the same balancer in front of both hosts, pinning nothing;
- ``2 hosts, direct``: no balancer, half the sessions connected to each host: the same work
  with no forwarding and no balancer hop, the reference for what forwarding costs.

Clients: ``--sessions`` MCP sessions (the SDK's ClientSession over its streamable HTTP
client, the 2025-11-25 handshake), spread over ``--clients`` worker processes (one process's
CPU would be the limit otherwise), each session calling math.calculate ``17 * 23`` back to
back for ``--seconds``. ``keep-alive`` is the SDK's default HTTP client: a session's requests
mostly reuse one connection, so the balancer spreads connections (sessions, and each
session's GET stream), and only a session whose POST connection landed on the other host is
forwarded. ``per request`` opens a connection for every request, so each request reaches the
next host in turn: about half of them are forwarded (the worst case).

A round measures every configuration once (the order rotating round by round, so the
machine's noise lands on each alike); the figure is all sessions' successful calls over the
slowest worker's measured time. The table gives medians, the range, the ratio to 1 host with
the same client, and where the CPU went during the measured seconds (from /proc: the two hosts,
the PostgreSQL server's processes, the balancer's thread, the client processes), as CPU ms per
call, and how busy the whole machine was (``/proc/stat``, so other work shows too).

Run: python bench/bench_http_hosts.py [--rounds 5] [--seconds 4] [--sessions 32]
     [--clients 2] [--people 8] (needs toolhost-core[mcp,postgres], toolhost-math and the
     PostgreSQL server binaries)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import anyio
import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from http_servers import start_http_server  # noqa: E402
from journeys.journey_support import free_port, http_client, write_tokens  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
ARGUMENTS = {"expression": "17 * 23"}


# ---------------------------------------------------------------------------- a client worker


async def _session(url: str, token: str, keepalive: bool, warmup: int, state: dict[str, Any],
                   ready: anyio.Event, go: anyio.Event) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with http_client(token, keepalive=keepalive) as http, streamable_http_client(
            url, http_client=http) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(warmup):
            assert not (await session.call_tool("math.calculate", ARGUMENTS)).is_error
        state["ready"] += 1
        if state["ready"] == state["sessions"]:
            ready.set()
        await go.wait()
        calls = errors = 0
        while time.perf_counter() < state["deadline"]:
            result = await session.call_tool("math.calculate", ARGUMENTS)
            if result.is_error:
                errors += 1
            else:
                calls += 1
        state["calls"] += calls
        state["errors"] += errors
        state["last"] = max(state["last"], time.perf_counter())
        state["measured"] += 1
        if state["measured"] == state["sessions"]:
            state["all_measured"].set()


async def _worker_round(spec: dict[str, Any]) -> None:
    """One round of this worker's sessions: open and warm them, say ``ready``, call from
    ``go`` for ``seconds``, say ``measured`` with the figures, close them, say ``closed``."""
    sessions: list[list[str]] = spec["sessions"]
    ready, go = anyio.Event(), anyio.Event()
    state: dict[str, Any] = {"sessions": len(sessions), "ready": 0, "measured": 0,
                             "calls": 0, "errors": 0, "last": 0.0, "deadline": 0.0,
                             "all_measured": anyio.Event()}
    async with anyio.create_task_group() as tasks:
        for url, token in sessions:
            tasks.start_soon(_session, url, token, spec["keepalive"], spec["warmup"], state,
                             ready, go)
        await ready.wait()
        print("ready", flush=True)
        assert await anyio.to_thread.run_sync(sys.stdin.readline) == "go\n"
        start = time.perf_counter()
        state["deadline"] = start + spec["seconds"]
        go.set()
        await state["all_measured"].wait()
        print(json.dumps({"calls": state["calls"], "errors": state["errors"],
                          "elapsed": state["last"] - start}), flush=True)
    print("closed", flush=True)


def worker() -> None:
    """A client process: one round per JSON line on stdin, until stdin ends."""
    while line := sys.stdin.readline():
        anyio.run(_worker_round, json.loads(line))


# ---------------------------------------------------------------------------- CPU accounting


def _stat_ticks(path: str, children: bool = False) -> int:
    """utime + stime (and, with ``children``, those of its reaped children) of /proc/.../stat,
    in clock ticks; 0 for a process that is gone."""
    try:
        text = Path(path).read_text()
    except OSError:
        return 0
    fields = text.rpartition(")")[2].split()
    # fields[0] is the state (field 3): utime is field 14, stime 15, cutime 16, cstime 17.
    ticks = int(fields[11]) + int(fields[12])
    return ticks + (int(fields[13]) + int(fields[14]) if children else 0)


def _children_of(ppid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == ppid:
                found.append(int(entry))
    return found


def _machine_busy() -> tuple[int, int]:
    """(busy, total) ticks of every CPU since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values[:8]) - idle, sum(values[:8])


@attrs.frozen
class Processes:
    """Whose CPU is counted: the hosts, the PostgreSQL postmaster (its exited children are
    in its own cutime, its live ones are read one by one), the balancers' threads, the
    client workers."""

    hosts: list[int]
    postmaster: int
    balancer_threads: list[int]
    clients: list[int]

    def snapshot(self) -> dict[str, int]:
        me = os.getpid()
        return {
            "hosts": sum(_stat_ticks(f"/proc/{p}/stat", children=True) for p in self.hosts),
            "PostgreSQL": _stat_ticks(f"/proc/{self.postmaster}/stat", children=True) + sum(
                _stat_ticks(f"/proc/{p}/stat") for p in _children_of(self.postmaster)),
            "balancer": sum(_stat_ticks(f"/proc/{me}/task/{t}/stat")
                            for t in self.balancer_threads),
            "clients": sum(_stat_ticks(f"/proc/{p}/stat") for p in self.clients),
        }


# ---------------------------------------------------------------------------- the rounds


@attrs.frozen
class Config:
    """One row: each session's URL, the kind of client, and how many hosts serve."""

    name: str
    keepalive: bool
    urls: list[str]


@attrs.define
class Figures:
    rates: list[float] = attrs.Factory(list)
    errors: int = 0
    calls: int = 0
    cpu_ticks: dict[str, int] = attrs.Factory(dict)
    busy: float = 0.0
    wall: float = 0.0


def _readline(process: subprocess.Popen[str], log: Path) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"a client worker ended:\n{log.read_text()}")
    return line


def run_round(workers: list[tuple[subprocess.Popen[str], Path]], config: Config,
              tokens: list[str], seconds: float, warmup: int, processes: Processes,
              figures: Figures) -> float:
    """Every worker's share of the sessions, released together; calls per second over all."""
    sessions = [[url, tokens[i % len(tokens)]] for i, url in enumerate(config.urls)]
    for w, (process, _) in enumerate(workers):
        assert process.stdin is not None
        process.stdin.write(json.dumps({
            "sessions": sessions[w::len(workers)], "keepalive": config.keepalive,
            "seconds": seconds, "warmup": warmup}) + "\n")
        process.stdin.flush()
    for process, log in workers:
        assert _readline(process, log) == "ready\n"
    before, busy_before, wall_before = processes.snapshot(), _machine_busy(), time.monotonic()
    for process, _ in workers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = [json.loads(_readline(process, log)) for process, log in workers]
    after, busy_after, wall = processes.snapshot(), _machine_busy(), time.monotonic()
    for process, log in workers:
        assert _readline(process, log) == "closed\n"
    calls = sum(r["calls"] for r in results)
    figures.calls += calls
    figures.errors += sum(r["errors"] for r in results)
    for key, value in after.items():
        figures.cpu_ticks[key] = figures.cpu_ticks.get(key, 0) + value - before[key]
    figures.busy += (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    figures.wall += wall - wall_before
    rate = calls / max(r["elapsed"] for r in results)
    figures.rates.append(rate)
    return rate


def _start_worker(log: Path) -> tuple[subprocess.Popen[str], Path]:
    errlog: IO[str]
    with log.open("w") as errlog:
        process = subprocess.Popen([sys.executable, __file__, "--worker"], text=True,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
    return process, log


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="measured seconds per configuration per round")
    parser.add_argument("--sessions", type=int, default=32, help="MCP sessions in all")
    parser.add_argument("--clients", type=int, default=2, help="client worker processes")
    parser.add_argument("--people", type=int, default=8, help="principals (tokens)")
    parser.add_argument("--warmup", type=int, default=3, help="calls per session per round, "
                        "before the measured seconds")
    parser.add_argument("--only", default="", help="comma-separated client modes to run "
                        "(keep-alive, per request); default both")
    parser.add_argument("--configurations", default="", help="semicolon-separated parts of the "
                        "configurations' names to run (\"2 hosts, balancer\"), for profiling "
                        "one of them; default all")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return

    from journeys.balancer import Balancer, round_robin
    from pg_server import running_server

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server())
        server.execute("CREATE DATABASE bench_hosts")
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        tokens = [f"bench-person-{n}-token" for n in range(args.people)]
        write_tokens(tmp / "tokens.toml", *[(t, f"person{n}", []) for n, t in enumerate(tokens)])
        base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
        base.update(TOOLHOST_PLUGINS="toolhost-math",
                    TOOLHOST_DATABASE_URL=server.url("bench_hosts"),
                    TOOLHOST_HTTP_TOKENS_FILE=str(tmp / "tokens.toml"))
        ports = [free_port(), free_port()]
        hosts = []
        for n, port in enumerate(ports):
            process = start_http_server({**base, "TOOLHOST_DATA_DIR": str(tmp / f"data{n}")}, port,
                                  tmp / f"host{n}.log")
            stack.callback(_stop, process)
            hosts.append(process)
        addresses = [("127.0.0.1", port) for port in ports]
        one: Balancer = stack.enter_context(round_robin(addresses[:1]))
        two: Balancer = stack.enter_context(round_robin(addresses))
        workers = [_start_worker(tmp / f"client{n}.log") for n in range(args.clients)]
        for process, _ in workers:
            stack.callback(_stop, process)
        postmaster = int((server.data_dir / "postmaster.pid").read_text().split()[0])
        threads = [b._thread.native_id for b in (one, two)]
        processes = Processes([h.pid for h in hosts], postmaster,
                              [t for t in threads if t is not None], [p.pid for p, _ in workers])

        direct = [f"http://127.0.0.1:{ports[i % 2]}/mcp" for i in range(args.sessions)]
        modes = {"keep-alive": True, "per request": False}
        wanted = [m.strip() for m in args.only.split(",") if m.strip()] or list(modes)
        configs = []
        for mode in wanted:
            keepalive = modes[mode]
            configs += [
                Config(f"{mode}: 1 host, balancer", keepalive, [one.url()] * args.sessions),
                Config(f"{mode}: 2 hosts, balancer", keepalive, [two.url()] * args.sessions),
                Config(f"{mode}: 2 hosts, direct", keepalive, direct)]
        if args.configurations:
            parts = [p.strip() for p in args.configurations.split(";") if p.strip()]
            configs = [c for c in configs if any(p in c.name for p in parts)]
        figures = {c.name: Figures() for c in configs}
        print(f"hosts' pids: {[h.pid for h in hosts]}", file=sys.stderr, flush=True)
        for r in range(args.rounds):
            shift = r % len(configs)
            for config in configs[shift:] + configs[:shift]:
                run_round(workers, config, tokens, args.seconds, args.warmup, processes,
                          figures[config.name])
            print(f"round {r + 1}: " + ", ".join(
                f"{c.name} {figures[c.name].rates[-1]:,.0f}/s" for c in configs),
                file=sys.stderr)
        connections = {"1 host": one.connections, "2 hosts": two.connections}

    print(f"{os.cpu_count()} cores; {args.sessions} sessions in {args.clients} client "
          f"processes, {args.people} people; {args.rounds} rounds of {args.seconds:g} s "
          f"each; math.calculate 17 * 23; medians")
    print("| client | configuration | calls/s median (range) | x 1 host | CPU ms a call: "
          "hosts / PostgreSQL / balancer / clients | machine busy |")
    print("|---|---|---|---|---|---|")
    for mode in wanted:
        rows = [c for c in configs if c.name.startswith(f"{mode}:")]
        base_rate = statistics.median(figures[rows[0].name].rates)
        for config in rows:
            f = figures[config.name]
            median = statistics.median(f.rates)
            cpu = " / ".join(f"{f.cpu_ticks[k] / TICKS * 1000 / max(1, f.calls):.2f}"
                             for k in ("hosts", "PostgreSQL", "balancer", "clients"))
            print(f"| {mode} | {config.name.split(': ', 1)[1]} | {median:,.0f} "
                  f"({min(f.rates):,.0f} to {max(f.rates):,.0f}) | {median / base_rate:.2f} | "
                  f"{cpu} | {f.busy / len(f.rates):.0%} |")
    errors = sum(f.errors for f in figures.values())
    if errors:
        print(f"calls that answered an error: {errors}")
    print(f"balancer connections by backend: {connections}")


if __name__ == "__main__":
    main()
