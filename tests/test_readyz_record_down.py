"""``GET /readyz`` of a real ``toolhost serve --http`` on a real PostgreSQL cluster that stops
(``-m immediate``, as a crash) and comes back: "not ready" within a balancer probe's timeout
(1-5 s) while the record is away, probes at once included, and "ready" again once it is back
(D328).

Before: a probe that started a check while PostgreSQL was down took 5 s (the pool waits 5 s
for a connection, and the probe waited as long for the check), which a balancer with a
shorter probe timeout reads as a timeout, not as "not ready".
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, run
from pg_server import PgServer, pg_database, pg_server

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

#: A loose bound on each probe's answer (the front door's own is READY_WAIT_S, 1 s).
PROBE_BOUND_S = 3.0


async def _probe(client: httpx.AsyncClient, url: str) -> tuple[int, float]:
    started = time.monotonic()
    answer = await client.get(url)
    return answer.status_code, time.monotonic() - started


def test_readyz_says_not_ready_quickly_while_postgresql_is_down_and_ready_once_back(
        tmp_path: Path, pg_server: PgServer, pg_database: str) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-math",
                            TOOLHOST_DATABASE_URL=pg_database)
    down: list[tuple[int, float]] = []
    up: list[tuple[int, float]] = []

    async def at_once(client: httpx.AsyncClient, url: str, count: int) -> None:
        async def one() -> None:
            down.append(await _probe(client, url))

        async with anyio.create_task_group() as probes:
            for _ in range(count):
                probes.start_soon(one)

    async def journey() -> None:
        async with deployment.http_server() as mcp_url, httpx.AsyncClient(
                timeout=30) as client:
            readyz = mcp_url.removesuffix("/mcp") + "/readyz"
            assert (await client.get(readyz)).status_code == 200
            pg_server.stop()
            try:
                # A probe every half second for 12 s: longer than the pool's wait for a
                # connection (5 s), so probes land on a check under way and after it.
                until = time.monotonic() + 12
                while time.monotonic() < until:
                    down.append(await _probe(client, readyz))
                    await anyio.sleep(0.5)
                # Several balancers' probes at once: one check, none waits on another's.
                await at_once(client, readyz, 20)
            finally:
                pg_server.start()
            back = time.monotonic()
            while time.monotonic() < back + 30:  # the pool reconnects
                up.append(await _probe(client, readyz))
                if up[-1][0] == 200:
                    break
                await anyio.sleep(0.5)

    run(journey)
    # The first probes may be given the answer of the last check before the stop (it stands
    # for a second); then not ready, each answer within the bound.
    assert [status for status, _ in down][-25:] == [503] * 25, down
    assert max(took for _, took in down) < PROBE_BOUND_S, down
    assert up[-1][0] == 200, up
