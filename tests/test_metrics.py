"""Metrics: the in-house registry's Prometheus text format, what the pipeline counts, and
``GET /metrics`` scraped from a running ``toolhost serve --http`` as calls are made."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from toolhost._composition import Host
from toolhost._model.settings import Settings
from toolhost._pipeline.metrics import CONTENT_TYPE, Registry, escape_label_value
from toolhost._registration.discovery import load_distributions

CALLS = "toolhost_tool_calls_total"
MATH = 'tool="math.calculate",version="1.0.0"'


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, for every sample line of a scrape."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


# ---------------------------------------------------------------------------- the format

def test_the_text_format_escapes_label_values_and_types_each_family() -> None:
    registry = Registry()
    calls = registry.counter("x_total", "Calls.\nTwo lines \\ here.", ("tool", "reason"))
    calls.inc(("a\\b", 'say "hi"\nthere'))
    calls.inc(("a\\b", 'say "hi"\nthere'), 2)
    registry.gauge("waiting", "Waiting.").add(3)
    text = registry.render()
    assert text.endswith("\n")
    assert text.splitlines() == [
        "# HELP x_total Calls.\\nTwo lines \\\\ here.",
        "# TYPE x_total counter",
        'x_total{tool="a\\\\b",reason="say \\"hi\\"\\nthere"} 3',
        "# HELP waiting Waiting.",
        "# TYPE waiting gauge",
        "waiting 3",
    ]
    assert escape_label_value('\\"\n') == '\\\\\\"\\n'
    with pytest.raises(ValueError):
        registry.counter("x_total", "again")


def test_a_histogram_has_cumulative_buckets_then_inf_sum_and_count() -> None:
    registry = Registry()
    wait = registry.histogram("wait_seconds", "Waits.", ("tool",), buckets=(0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 7.0):
        wait.observe(value, ("t",))
    assert registry.render().splitlines()[2:] == [
        'wait_seconds_bucket{tool="t",le="0.1"} 2',  # a bound is inclusive
        'wait_seconds_bucket{tool="t",le="1"} 3',
        'wait_seconds_bucket{tool="t",le="+Inf"} 4',
        'wait_seconds_sum{tool="t"} 7.65',
        'wait_seconds_count{tool="t"} 4',
    ]


# ---------------------------------------------------------------------------- the pipeline

def test_approvals_and_denials_count_their_wait_and_their_outcome(tmp_path: Path) -> None:
    with Host.from_sources(load_distributions(["toolhost-math"]), data_dir=tmp_path / "d",
                           settings=Settings({"TOOLHOST_POLICY": '{"NONE/LOW": "approval"}'})
                           ) as host:
        paused = [host.invoke_sync("math.calculate", {"expression": f"{n} + 1"})
                  for n in range(2)]
        assert all(o.paused for o in paused)
        host.approve_sync(str(paused[0].invocation_id), "ops")
        host.pipeline.deny(str(paused[1].invocation_id), "ops", "no")
        assert host.pipeline.telemetry is not None
        found = samples(host.pipeline.telemetry.instruments.render())
    assert found[f'{CALLS}{{{MATH},status="awaiting_approval",reason_code=""}}'] == 2
    assert found[f'{CALLS}{{{MATH},status="succeeded",reason_code=""}}'] == 1
    assert found[f'{CALLS}{{{MATH},status="denied",reason_code=""}}'] == 1
    for decision in ("approved", "denied"):
        labels = f'tool="math.calculate",decision="{decision}"'
        assert found[f"toolhost_approval_wait_seconds_count{{{labels}}}"] == 1
        assert found[f"toolhost_approval_wait_seconds_sum{{{labels}}}"] >= 0


def test_a_tool_name_or_version_no_tool_has_is_one_series_not_one_per_name(
        tmp_path: Path) -> None:
    """Any client may call any name: labelled by itself, each would be a series of its own,
    and /metrics would grow with what callers invent (3,000 names of 1 KB: 76 MB)."""
    with Host.from_sources(load_distributions(["toolhost-math"]), data_dir=tmp_path / "d"
                           ) as host:
        for n in range(50):
            host.invoke_sync(f"made.up_{n}" + "x" * 1000, {})
            host.invoke_sync("math.calculate", {"expression": "1"}, version=f"9.9.{n}")
        assert host.pipeline.telemetry is not None
        text = host.pipeline.telemetry.instruments.render()
    found = samples(text)
    unknown = "tool.invalid_arguments.unknown_tool"
    assert found[f'{CALLS}{{tool="(unknown)",version="",status="failed",'
                 f'reason_code="{unknown}"}}'] == 50
    assert found[f'{CALLS}{{tool="math.calculate",version="(unknown)",status="failed",'
                 'reason_code="tool.invalid_arguments.unknown_version"}'] == 50
    assert "made.up" not in text and "9.9." not in text


# ---------------------------------------------------------------------------- GET /metrics

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, ok, run, write_tokens  # noqa: E402

TOKEN = "scrape-token-5d1e"


def scrape(url: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url.removesuffix("/mcp") + "/metrics", headers=headers, timeout=30)


def test_a_running_server_serves_its_metrics_and_they_change_with_its_calls(
        tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-math")

    async def journey() -> None:
        async with deployment.http_server() as url, deployment.session("http", url=url) as c:
            before = await asyncio.to_thread(scrape, url)
            assert before.status_code == 200
            assert before.headers["content-type"] == CONTENT_TYPE
            text = before.text
            for family, kind in (("toolhost_tool_calls_total", "counter"),
                                 ("toolhost_tool_call_duration_seconds", "histogram"),
                                 ("toolhost_approval_wait_seconds", "histogram"),
                                 ("toolhost_calls_awaiting_approval", "gauge"),
                                 ("toolhost_store_errors_total", "counter")):
                assert f"# TYPE {family} {kind}\n" in text and f"# HELP {family} " in text
            assert samples(text)["toolhost_calls_awaiting_approval"] == 0
            assert f'{CALLS}{{{MATH}' not in text
            for expression in ("17 * 23", "2 + 2"):
                ok(await c.call_tool("math.calculate", {"expression": expression}))
            failed = await c.call_tool("math.calculate", {"expression": "1 / 0"})
            assert failed.is_error
            reason = failed.meta["toolhost/reasonCode"] if failed.meta else None
            after = samples((await asyncio.to_thread(scrape, url)).text)
            assert after[f'{CALLS}{{{MATH},status="succeeded",reason_code=""}}'] == 2
            assert after[f'{CALLS}{{{MATH},status="failed",reason_code="{reason}"}}'] == 1
            duration = f'toolhost_tool_call_duration_seconds_count{{{MATH},status="succeeded"}}'
            assert after[duration] == 2
            buckets = [k for k in after if k.startswith(
                "toolhost_tool_call_duration_seconds_bucket{" + MATH + ',status="succeeded"')]
            assert buckets[-1].endswith('le="+Inf"}') and after[buckets[-1]] == 2
            ok(await c.call_tool("math.calculate", {"expression": "3 * 3"}))
            again = samples((await asyncio.to_thread(scrape, url)).text)
            assert again[f'{CALLS}{{{MATH},status="succeeded",reason_code=""}}'] == 3

    run(journey)


def test_with_tokens_the_metrics_need_one_like_mcp(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml", (TOKEN, "prometheus", []))
    deployment = Deployment(tmp_path, plugins="toolhost-math",
                            TOOLHOST_HTTP_TOKENS_FILE=str(tokens))

    async def journey() -> None:
        async with deployment.http_server() as url:
            refused = await asyncio.to_thread(scrape, url)
            assert refused.status_code == 401 and "toolhost_" not in refused.text
            wrong = await asyncio.to_thread(scrape, url, "not-the-token")
            assert wrong.status_code == 401
            scraped = await asyncio.to_thread(scrape, url, TOKEN)
            assert scraped.status_code == 200
            assert re.search(r"^# TYPE toolhost_tool_calls_total counter$", scraped.text, re.M)

    run(journey)
