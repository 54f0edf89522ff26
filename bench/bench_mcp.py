"""tools/call round trip over stdio (issues #5, #11): ``toolhost serve`` next to its peers.

The servers run as subprocesses driven by the SDK's own stdio client (``stdio_client`` and a
``ClientSession`` on the 2025-11-25 handshake, what desktop clients speak today), all alive in
one run, called in alternating batches so machine noise lands on every server alike. The
figure is the p50 of the client-side round trip of one ``call_tool``.

math.calculate ``{"expression": "17 * 23"}``, an async tool:
- toolhost serving it through the full pipeline (validation, policy, deadline, output checks,
  a durable SQLite row per call);
- toolhost on the SDK's own thread-backed stdio transport (TOOLHOST_MCP_STDIO=sdk), to show
  what serving stdio on the event loop buys;
- the SDK's high-level server, ``mcp.server.mcpserver.MCPServer`` (mcp 2.x; ``FastMCP`` in
  mcp 1.x), exposing the same function body (bench/mcpserver_calculate.py);
- the ``fastmcp`` package's ``FastMCP``, the same body again (bench/fastmcp_calculate.py).

system.current_time ``{"timezone": "Europe/London"}`` next to the reference ``mcp-server-time``
server's ``get_current_time``, the same question; both are sync tools, run on a worker thread.

Goal: toolhost no slower than any peer (ratio = toolhost p50 / peer p50 <= 1.00).

Run: python bench/bench_mcp.py [--calls 1000] [--batch 50] [--warmup 100]
     (needs toolhost[mcp], toolhost-math and toolhost-system; and, bench-only, never a
     dependency of toolhost: pip install fastmcp mcp-server-time. A peer not installed is
     left out and said so.)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, NamedTuple

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = os.path.dirname(os.path.abspath(__file__))
CALCULATE = ("math.calculate", {"expression": "17 * 23"})
CURRENT_TIME = ("system.current_time", {"timezone": "Europe/London"})
SUM = "math.calculate 17 * 23 (async tools)"
NOW = "current time in Europe/London (sync tools)"
#: toolhost itself on another transport: shown, not a peer to beat.
SDK_STDIO = "toolhost, SDK stdio"


def _calculated(content: dict[str, Any]) -> bool:
    return bool(content["result"] == "391")


def _london(content: dict[str, Any]) -> bool:
    return bool(content["timezone"] == "Europe/London")


class Server(NamedTuple):
    question: str  # the rows asking the same question are compared
    label: str
    params: StdioServerParameters
    tool: str
    arguments: dict[str, Any]
    correct: Callable[[dict[str, Any]], bool]
    ours: bool  # toolhost's own row of its group


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def servers(data_dir: str) -> tuple[list[Server], list[str]]:
    """Every server this machine can run, and a line for each peer left out."""
    env = {"TOOLHOST_DATA_DIR": data_dir, "TOOLHOST_PLUGINS": "toolhost-math,toolhost-system",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    serve = StdioServerParameters(command=sys.executable, args=["-m", "toolhost._cli", "serve"],
                                  env=env)
    sdk_stdio = serve.model_copy(update={"env": {**env, "TOOLHOST_MCP_STDIO": "sdk"}})

    def script(name: str, **more: str) -> StdioServerParameters:
        return StdioServerParameters(command=sys.executable, args=[os.path.join(HERE, name)],
                                     env={**env, **more})

    found = [
        Server(SUM, "toolhost serve", serve, *CALCULATE, _calculated, True),
        Server(SUM, SDK_STDIO, sdk_stdio, *CALCULATE, _calculated, False),
        Server(SUM, "SDK MCPServer", script("mcpserver_calculate.py"), *CALCULATE,
               _calculated, False),
    ]
    missing = []
    if importlib.util.find_spec("fastmcp"):
        quiet = script("fastmcp_calculate.py", FASTMCP_LOG_LEVEL="WARNING")  # no INFO lines
        found.append(Server(SUM, "fastmcp FastMCP", quiet, *CALCULATE, _calculated, False))
    else:
        missing.append("fastmcp (pip install fastmcp)")
    found.append(Server(NOW, "toolhost serve", serve, *CURRENT_TIME, _london, True))
    if importlib.util.find_spec("mcp_server_time"):
        found.append(Server(NOW, "mcp-server-time", StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
            env=env), "get_current_time", CURRENT_TIME[1], _london, False))
    else:
        missing.append("mcp-server-time (pip install mcp-server-time)")
    return found, missing


@asynccontextmanager
async def connect(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # the client validates structured results against this
        yield session


async def one_call(session: ClientSession, server: Server) -> float:
    start = time.perf_counter()
    result = await session.call_tool(server.tool, server.arguments)
    elapsed = (time.perf_counter() - start) * 1e6
    assert not result.is_error and server.correct(result.structured_content or {}), result
    return elapsed


async def bench(found: list[Server], calls: int, batch: int, warmup: int) -> list[list[float]]:
    samples: list[list[float]] = [[] for _ in found]
    async with AsyncExitStack() as stack:
        # One process per distinct command: toolhost's serves both of its rows.
        sessions: dict[int, ClientSession] = {}
        for server in found:
            key = id(server.params)
            if key not in sessions:
                sessions[key] = await stack.enter_async_context(connect(server.params))
        pairs = [(sessions[id(s.params)], s) for s in found]
        for session, server in pairs:
            for _ in range(warmup):
                await one_call(session, server)
        done = 0
        while done < calls:
            n = min(batch, calls - done)
            for i, (session, server) in enumerate(pairs):
                for _ in range(n):
                    samples[i].append(await one_call(session, server))
            done += n
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolhost-bench-mcp-") as data_dir:
        found, missing = servers(data_dir)
        samples = anyio.run(bench, found, args.calls, args.batch, args.warmup)
    print(f"tools/call over stdio, {args.calls} calls each (after {args.warmup} warm-up), "
          f"alternating batches of {args.batch}")
    for line in missing:
        print(f"left out, not installed: {line}")
    verdicts = []
    for question in dict.fromkeys(server.question for server in found):
        rows = [(server, x) for server, x in zip(found, samples, strict=True)
                if server.question == question]
        ours = statistics.median(next(x for server, x in rows if server.ours))
        print(f"\n{question}")
        print(f"{'server':22} {'p50 µs':>9} {'p90 µs':>9} {'p99 µs':>9} {'calls/s':>9} "
              f"{'toolhost/this':>14}")
        for server, x in rows:
            p50 = statistics.median(x)
            print(f"{server.label:22} {p50:9.0f} {percentile(x, .90):9.0f} "
                  f"{percentile(x, .99):9.0f} {1e6 / statistics.mean(x):9.0f} "
                  f"{ours / p50:14.2f}")
            if not server.ours and server.label != SDK_STDIO:
                verdicts.append(ours / p50 <= 1.0)
    met = "met" if all(verdicts) else "not met"
    print(f"\ngoal: toolhost p50 no slower than any peer (ratio <= 1.00): {met}")


if __name__ == "__main__":
    main()
