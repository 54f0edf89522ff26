"""tools/call round trip over stdio (issue #5): ``toolhost serve`` next to the SDK's FastMCP.

The servers run as subprocesses driven by the SDK's own stdio client (``stdio_client`` and a
``ClientSession`` on the 2025-11-25 handshake, what desktop clients speak today), in one run:
toolhost serving math.calculate through the full pipeline (a SQLite row per call);
``bench/fastmcp_calculate.py``, the SDK's high-level server exposing the same arithmetic as
one decorated function; and, to show what serving stdio on the event loop buys, toolhost on
the SDK's own thread-backed stdio transport (TOOLHOST_MCP_STDIO=sdk). Calls alternate in
batches so machine noise lands on every server alike. The figure is the p50 of the
client-side round trip of ``call_tool("math.calculate", {"expression": "17 * 23"})``; goal:
toolhost no slower than FastMCP.

Run: python bench/bench_mcp.py [--calls 1000] [--batch 50] [--warmup 100]
     (needs toolhost[mcp] and toolhost-math installed)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
ARGS = {"expression": "17 * 23"}
OURS = "toolhost serve"
#: The same server on the SDK's thread-backed stdio transport: what the loop transport saves.
SDK_STDIO = "  on the SDK's stdio"
THEIRS = "FastMCP (MCPServer)"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@asynccontextmanager
async def connect(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # the client validates structured results against this
        yield session


async def one_call(session: ClientSession) -> float:
    start = time.perf_counter()
    result = await session.call_tool("math.calculate", ARGS)
    elapsed = (time.perf_counter() - start) * 1e6
    assert not result.is_error and result.structured_content["result"] == "391", result
    return elapsed


async def bench(calls: int, batch: int, warmup: int) -> dict[str, list[float]]:
    data_dir = tempfile.mkdtemp(prefix="toolhost-bench-mcp-")
    env = {"TOOLHOST_DATA_DIR": data_dir, "TOOLHOST_PLUGINS": "toolhost-math",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    serve = ["-m", "toolhost._cli", "serve"]
    servers = {
        OURS: StdioServerParameters(command=sys.executable, args=serve, env=env),
        SDK_STDIO: StdioServerParameters(command=sys.executable, args=serve,
                                         env={**env, "TOOLHOST_MCP_STDIO": "sdk"}),
        THEIRS: StdioServerParameters(
            command=sys.executable, args=[str(HERE / "fastmcp_calculate.py")], env=env),
    }
    samples: dict[str, list[float]] = {name: [] for name in servers}
    async with AsyncExitStack() as stack:
        sessions = {name: await stack.enter_async_context(connect(p))
                    for name, p in servers.items()}
        for session in sessions.values():
            for _ in range(warmup):
                await one_call(session)
        done = 0
        while done < calls:
            n = min(batch, calls - done)
            for name, session in sessions.items():
                for _ in range(n):
                    samples[name].append(await one_call(session))
            done += n
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    samples = anyio.run(bench, args.calls, args.batch, args.warmup)
    ours, theirs = samples[OURS], samples[THEIRS]
    print(f"tools/call math.calculate '17 * 23' over stdio, {args.calls} calls each "
          f"(after {args.warmup} warm-up), alternating batches of {args.batch}")
    print(f"{'server':22} {'p50 µs':>9} {'p90 µs':>9} {'p99 µs':>9} {'calls/s':>9}")
    for name, s in samples.items():
        print(f"{name:22} {statistics.median(s):9.0f} {percentile(s, .90):9.0f} "
              f"{percentile(s, .99):9.0f} {1e6 / statistics.mean(s):9.0f}")
    ratio = statistics.median(ours) / statistics.median(theirs)
    verdict = "met" if ratio <= 1.0 else "not met"
    print(f"p50 ratio toolhost / FastMCP: {ratio:.2f} (goal <= 1.00: {verdict})")


if __name__ == "__main__":
    main()
