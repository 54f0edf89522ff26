"""The MCP gateway's cost (issue #30): a trivial upstream tool through the gateway, next to
the same call made directly to the upstream server over stdio.

The upstream is tests/gateway_upstream.py (the SDK's low-level ``Server``, stdio), its
``lookup`` tool classified NONE/LOW/READ_ONLY in a toolhost.toml, so no approval is asked:

- **direct**: the SDK's ``ClientSession`` (2025-11-25 handshake) on its own subprocess of the
  upstream, ``call_tool("lookup")``;
- **gateway, in process**: ``Host.invoke("mcp.bench__lookup")`` of a host built by
  ``load_host`` over that toolhost.toml: the whole pipeline (validation, policy, deadline,
  output checks, a durable SQLite row) and the adapter's hop to its own session's loop, to
  the gateway's own subprocess of the upstream;
- **direct across a thread** (a reference, not the target): the same ``ClientSession`` held
  on a loop of its own thread, called from the bench's loop with one wake-up each way (as the
  gateway's adapter does): the cost of the thread boundary alone, which the gateway pays
  because an SDK session belongs to the loop it was entered on;
- **gateway, through serve** (shown, not the target): an SDK client to ``toolhost serve``,
  which calls the upstream: two stdio hops.

All three are alive at once and called in interleaved rounds (each round: ``--calls`` calls of
each, in turn), so machine noise lands on every path alike. Figures: the median over rounds
of each round's p50 (and p99), in microseconds; the ratio is gateway / direct.

Target: the in-process gateway at most 1.3x the direct p50.

Run: python bench/bench_gateway.py [--rounds 9] [--calls 200] [--warmup 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE.parent / "tests" / "gateway_upstream.py"
ARGS = {"word": "bench"}
EXPECTED = "bench: a word"


def _config(directory: Path) -> Path:
    path = directory / "toolhost.toml"
    path.write_text(f'''
[mcp.servers.bench]
command = "{sys.executable}"
args = ["{UPSTREAM}", "bench"]

[mcp.servers.bench.tools.lookup]
side_effect = "NONE"
risk = "LOW"
idempotency = "READ_ONLY"
''')
    path.chmod(0o600)
    return path


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Loop:
    """An event loop on a thread of its own, so each path keeps its session in one task."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class _Session:
    """An SDK ClientSession on a stdio subprocess, held open in a task of its own."""

    def __init__(self, loop: _Loop, command: str, args: list[str], env: dict[str, str]) -> None:
        from mcp import StdioServerParameters

        self.loop = loop
        self.params = StdioServerParameters(command=command, args=args, env=env)
        self.ready = asyncio.Event()
        self.done = asyncio.Event()
        self.session: Any = None
        self.task = loop.run(self._start())

    async def _start(self) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._hold())
        await self.ready.wait()
        return task

    async def _hold(self) -> None:
        from mcp import ClientSession, stdio_client

        with open(os.devnull, "w") as errlog:
            async with stdio_client(self.params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                self.session = session
                self.ready.set()
                await self.done.wait()

    async def call(self, name: str) -> None:
        result = await self.session.call_tool(name, ARGS)
        assert result.content[0].text == EXPECTED, result

    def close(self) -> None:
        self.loop.loop.call_soon_threadsafe(self.done.set)
        self.loop.run(asyncio.wait_for(self.task, 30))


async def _across(loop: _Loop, call: Callable[[], Awaitable[Any]]) -> Any:
    """``call()`` run on ``loop`` (another thread's), awaited here: one wake-up each way."""
    here = asyncio.get_running_loop()
    answer = here.create_future()

    def done(task: asyncio.Task[Any]) -> None:
        here.call_soon_threadsafe(answer.set_result, task.result())

    def start() -> None:
        loop.loop.create_task(call()).add_done_callback(done)  # type: ignore[arg-type]

    loop.loop.call_soon_threadsafe(start)
    return await answer


def _timed(loop: _Loop, call: Callable[[], Awaitable[None]], n: int) -> list[float]:
    async def batch() -> list[float]:
        found = []
        for _ in range(n):
            start = time.perf_counter()
            await call()
            found.append((time.perf_counter() - start) * 1e6)
        return found

    return list(loop.run(batch()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=50)
    options = parser.parse_args()

    from toolhost._composition import load_host
    from toolhost._model.settings import Settings

    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        directory = Path(tmp)
        config = _config(directory)
        env = {"TOOLHOST_CONFIG": str(config), "TOOLHOST_DATA_DIR": str(directory / "data"),
               "TOOLHOST_PLUGINS": "", "TOOLHOST_LOG_LEVEL": "error"}
        host = load_host(Settings.from_environ({**os.environ, **env}))
        loop = _Loop()
        direct = _Session(loop, sys.executable, [str(UPSTREAM), "bench"], {})
        other = _Loop()
        across = _Session(other, sys.executable, [str(UPSTREAM), "bench"], {})
        served = _Session(loop, sys.executable, ["-m", "toolhost._cli", "serve"],
                          {**env, "TOOLHOST_DATA_DIR": str(directory / "served")})
        run = host.local_run()

        async def through_host() -> None:
            outcome = await host.invoke("mcp.bench__lookup", ARGS, run=run)
            assert outcome.content == EXPECTED, outcome

        paths: dict[str, Callable[[], Awaitable[None]]] = {
            "direct (SDK client -> upstream, stdio)": lambda: direct.call("lookup"),
            "direct across a thread (reference, not the target)":
                lambda: _across(other, lambda: across.call("lookup")),
            "gateway in process (pipeline -> upstream, stdio)": through_host,
            "gateway through serve (client -> serve -> upstream)":
                lambda: served.call("mcp.bench__lookup"),
        }
        try:
            for call in paths.values():
                _timed(loop, call, options.warmup)
            p50s: dict[str, list[float]] = {name: [] for name in paths}
            p99s: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(options.rounds):
                for name, call in paths.items():
                    times = _timed(loop, call, options.calls)
                    p50s[name].append(_percentile(times, 0.50))
                    p99s[name].append(_percentile(times, 0.99))
        finally:
            direct.close()
            across.close()
            other.stop()
            served.close()
            loop.stop()
            host.end_run(run)
            host.close()
        base = statistics.median(p50s[next(iter(paths))])
        print(f"{options.rounds} interleaved rounds of {options.calls} calls each; medians of "
              "the rounds' p50 and p99, microseconds")
        for name in paths:
            p50, p99 = statistics.median(p50s[name]), statistics.median(p99s[name])
            print(f"  {name:52} p50 {p50:8.0f}  p99 {p99:8.0f}  {p50 / base:5.2f}x")


if __name__ == "__main__":
    main()
