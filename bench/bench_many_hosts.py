"""Calls per second with 1, 2 and 4 host processes on one PostgreSQL database, next to one
host on SQLite (issue #17), in one run; then the same with every call writing an artifact,
1, 2 and 4 hosts on PostgreSQL and one S3 bucket next to one host on SQLite and files.

Each host is a process of its own running writing calls back to back through the whole
pipeline (a WORKSPACE_WRITE tool: its row is written ``running`` before the call and
finished after it, two writes a call), on one run. The hosts start, warm up, and are then
released together; a round's figure is all their calls over the slowest one's wall time.
Configurations alternate round by round so the machine's noise hits each alike; the table
gives each one's median and its ratio to one host on SQLite (the artifact table: to one host
on SQLite and files). An artifact call writes 1 KiB of content of its own (a new object in the
bucket: a HEAD, a PUT, and a HEAD under the content's lock before the row).

The server is a throwaway cluster as the tests start it (tests/pg_server.py: fsync off, so
a commit costs what the protocol and the server's work cost, not a disk flush; SQLite here
is WAL with synchronous=NORMAL, which does not flush per commit either). The bucket is moto's
server (tests/s3_server.py), a single Python process: its figures bound the adapter's overhead
from above and say nothing of AWS.

Run: python bench/bench_many_hosts.py [--calls N] [--artifact-calls N] [--rounds N]
[--hosts 1,2,4] (needs toolhost-core[postgres], the PostgreSQL server binaries and, for the
artifact table, toolhost-core[s3] and moto[server]; --artifact-calls 0 leaves it out)
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
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

WORKER = """
import asyncio, json, os, sys, time
sys.path.insert(0, {tests!r})
from conftest import make_plugin, make_spec
from toolhost import Idempotency, Risk, SideEffect, Tool, ToolOutput
from toolhost._adapters.system_clock import SystemClock
from toolhost._model.artifacts import ArtifactOrigin
from toolhost._model.spec import Trust
from toolhost._model.settings import Settings
from toolhost.testing import host_for

KEY = {{"type": "object", "properties": {{"x": {{"type": "string"}}}}, "required": ["x"],
       "additionalProperties": False}}
spec = make_spec(name="bench.note", input_schema=KEY, output_schema=KEY,
                 side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                 idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)
WITH_ARTIFACT = os.environ.get("BENCH_ARTIFACT") == "1"
TAG = str(os.getpid()).encode()

def note(a, c):
    if WITH_ARTIFACT:  # 1 KiB no other call writes: always a new object
        c.artifacts.write(origin=ArtifactOrigin.EXPORT, name="note.bin",
                          media_type="application/octet-stream", trust=Trust.INTERNAL_TOOL,
                          content=(TAG + b":" + a["x"].encode()).ljust(1024, b"."))
    return ToolOutput(structured={{"x": a["x"]}}, content=a["x"])

plugin = make_plugin(domains=["bench"], tools=[Tool(spec, call=note)])
host = host_for({{"bench-dist": plugin}}, settings=Settings.from_environ(), clock=SystemClock())
run = host.local_run()

async def calls(n, first=0):
    for i in range(first, first + n):
        outcome = await host.invoke("bench.note", {{"x": str(i)}}, run=run)
        assert outcome.ok, outcome

asyncio.run(calls(50, -50))  # warm: the pool's connections, the prepared statements
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
asyncio.run(calls(int(sys.argv[1])))
print(json.dumps({{"elapsed": time.perf_counter() - start}}), flush=True)
host.end_run(run)
host.close()
"""


def round_of(script: Path, hosts: int, calls: int, env: dict[str, str]) -> float:
    """One round: ``hosts`` processes released together; calls per second over all."""
    procs = [subprocess.Popen([sys.executable, str(script), str(calls)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(hosts)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        elapsed = []
        for proc in procs:
            assert proc.stdout is not None
            elapsed.append(float(json.loads(proc.stdout.readline())["elapsed"]))
    finally:
        for proc in procs:
            proc.communicate(timeout=60)
    return hosts * calls / max(elapsed)


@attrs.frozen
class Config:
    """One row: ``hosts`` processes with ``env``, ``calls`` each per round, in ``table``."""

    table: str
    hosts: int
    calls: int
    env: dict[str, str]


def _hosts(n: int) -> str:
    return f"{n} host{'s' if n > 1 else ''}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000, help="calls per host per round")
    parser.add_argument("--artifact-calls", type=int, default=200,
                        help="calls per host per round writing an artifact (0: none)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hosts", default="1,2,4")
    args = parser.parse_args()
    counts = [int(n) for n in args.hosts.split(",")]

    from pg_server import running_server

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        script = tmp / "worker.py"
        script.write_text(WORKER.format(tests=str(ROOT / "tests")))
        plain, with_artifact = "calls", "calls writing a 1 KiB artifact"
        configs: dict[str, Config] = {"SQLite, 1 host": Config(
            plain, 1, args.calls, {**os.environ, "TOOLHOST_DATA_DIR": str(tmp / "sqlite")})}
        for n in counts:
            server.execute(f"CREATE DATABASE bench{n}")
            configs[f"PostgreSQL, {_hosts(n)}"] = Config(plain, n, args.calls, {
                **os.environ, "TOOLHOST_DATABASE_URL": server.url(f"bench{n}"),
                "TOOLHOST_DATA_DIR": str(tmp / f"pg{n}")})
        if args.artifact_calls > 0:
            from s3_server import S3Server, require_moto

            require_moto()
            s3 = S3Server()
            s3.start()
            stack.callback(s3.stop)
            configs["SQLite and files, 1 host"] = Config(with_artifact, 1, args.artifact_calls, {
                **os.environ, "BENCH_ARTIFACT": "1", "TOOLHOST_DATA_DIR": str(tmp / "files")})
            for n in counts:
                # A database and a bucket per row: a prefix belongs to one database.
                server.execute(f"CREATE DATABASE bench_s3_{n}")
                bucket = s3.new_bucket()
                configs[f"PostgreSQL and S3, {_hosts(n)}"] = Config(
                    with_artifact, n, args.artifact_calls, {
                        **os.environ, **s3.env(bucket), "BENCH_ARTIFACT": "1",
                        "TOOLHOST_DATABASE_URL": server.url(f"bench_s3_{n}"),
                        "TOOLHOST_DATA_DIR": str(tmp / f"s3-{n}")})
        figures: dict[str, list[float]] = {name: [] for name in configs}
        for r in range(args.rounds):
            for name, config in configs.items():
                figures[name].append(round_of(script, config.hosts, config.calls, config.env))
            print(f"round {r + 1}: " + ", ".join(
                f"{name} {values[-1]:,.0f}/s" for name, values in figures.items()),
                file=sys.stderr)
        print(f"{os.cpu_count()} cores; {args.rounds} rounds, medians")
        for table in (plain, with_artifact):
            rows = [(name, configs[name], values) for name, values in figures.items()
                    if configs[name].table == table]
            if not rows:
                continue
            base_name = rows[0][0]
            base = statistics.median(rows[0][2])
            print(f"\n{table}, {rows[0][1].calls} per host per round")
            print(f"| store, hosts | calls/s (median) | range | x {base_name} |")
            print("|---|---|---|---|")
            for name, _, values in rows:
                median = statistics.median(values)
                print(f"| {name} | {median:,.0f} | {min(values):,.0f} to {max(values):,.0f} | "
                      f"{median / base:.2f} |")


if __name__ == "__main__":
    main()
