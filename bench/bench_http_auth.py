"""What authentication costs a ``tools/call`` over streamable HTTP (issue #25).

Three ``toolhost serve --http`` servers on loopback, all alive in one run, each driven by the
SDK's own streamable HTTP client (a 2025-11-25 session) in alternating batches so machine
noise lands on each alike:

- ``open``: no authentication (loopback only), the reference;
- ``token file``: a static token file, the bearer token checked on every request;
- ``JWT``: an OAuth 2.1 issuer's RS256 JWT verified on every request (the JWKS served by a
  loopback HTTPS issuer, fetched once).

The figure is the p50 of the client-side round trip of one ``call_tool`` of math.calculate
``17 * 23``; the target is that verification adds under 10% at p50.

Run: python bench/bench_http_auth.py [--calls 600] [--batch 50] [--warmup 50]
     (needs toolhost-core[mcp,oauth], toolhost-math and trustme)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from http_servers import start_http_server  # noqa: E402
from journeys.fake_services import oauth_issuer  # noqa: E402
from journeys.journey_support import free_port  # noqa: E402

TOKEN = "bench-token-3b0f"


async def _measure(servers: dict[str, tuple[str, str | None]], calls: int, batch: int,
                   warmup: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in servers}
    async with AsyncExitStack() as stack:
        sessions: dict[str, ClientSession] = {}
        for name, (url, token) in servers.items():
            http = await stack.enter_async_context(create_mcp_http_client(
                headers={"Authorization": f"Bearer {token}"} if token else None))
            read, write, *_ = await stack.enter_async_context(
                streamable_http_client(url, http_client=http))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.list_tools()
            for _ in range(warmup):
                await session.call_tool("math.calculate", {"expression": "17 * 23"})
            sessions[name] = session
        done = 0
        while done < calls:
            for name, session in sessions.items():
                for _ in range(batch):
                    start = time.perf_counter()
                    result = await session.call_tool("math.calculate",
                                                     {"expression": "17 * 23"})
                    times[name].append((time.perf_counter() - start) * 1e6)
                    assert not result.is_error
            done += batch
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_text, oauth_issuer(Path(tmp_text)) as issuer:
        tmp = Path(tmp_text)
        tokens = tmp / "tokens.toml"
        tokens.write_text(f'[[token]]\nsha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"'
                          '\nprincipal = "bench"\nscopes = []\n')
        base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
        base.update(TOOLHOST_PLUGINS="toolhost-math")
        ports = {name: free_port() for name in ("open", "token file", "JWT")}
        audience = f"http://127.0.0.1:{ports['JWT']}/mcp"
        envs = {
            "open": {**base, "TOOLHOST_DATA_DIR": str(tmp / "d-open")},
            "token file": {**base, "TOOLHOST_DATA_DIR": str(tmp / "d-tokens"),
                           "TOOLHOST_HTTP_TOKENS_FILE": str(tokens)},
            "JWT": {**base, "TOOLHOST_DATA_DIR": str(tmp / "d-jwt"),
                    **issuer.settings(audience)},
        }
        tokens_for = {"open": None, "token file": TOKEN, "JWT": issuer.token(audience)}
        processes = [start_http_server(envs[n], ports[n], tmp / f"{n}.log") for n in envs]
        try:
            servers = {n: (f"http://127.0.0.1:{ports[n]}/mcp", tokens_for[n]) for n in envs}
            times = anyio.run(_measure, servers, args.calls, args.batch, args.warmup)
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
    reference = statistics.median(times["open"])
    print(f"tools/call math.calculate over streamable HTTP, {args.calls} calls each, "
          f"alternating batches of {args.batch}")
    print(f"{'server':<12} {'p50 µs':>8} {'p90 µs':>8} {'ratio p50':>10}")
    for name, values in times.items():
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<12} {p50:8.0f} {p90:8.0f} {p50 / reference:10.3f}")


if __name__ == "__main__":
    main()
