"""A tool name no registered tool has is the caller's word (D273): never a metric label or a
span name of its own, whatever the call then ended as, and never logged or traced whole.

Over real hosts (the math plugin, SQLite record) with the OpenTelemetry SDK's in-memory
exporter. The record store's outage is the database's own refusal: a trigger that aborts every
insert of a row."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the test extra) is missing")
mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from otel_support import collected_spans, provider  # noqa: E402

from toolhost._adapters.sqlite_db import DATABASE_NAME  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost._mcp.config import ServeConfig  # noqa: E402
from toolhost._mcp.definitions import served_roster  # noqa: E402
from toolhost._mcp.server import build_server  # noqa: E402
from toolhost._model.settings import Settings  # noqa: E402
from toolhost._pipeline.log import configure_logging  # noqa: E402
from toolhost._pipeline.steps import shown  # noqa: E402
from toolhost._registration.discovery import load_distributions  # noqa: E402
from toolhost._testing.clocks import FixedClock  # noqa: E402
from toolhost.testing import DEFAULT_INSTANT, Harness  # noqa: E402

CALLS = "toolhost_tool_calls_total"
RECORD_STORE = "tool.upstream_unavailable.record_store"


@pytest.fixture(autouse=True)
def sdk() -> None:
    provider()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    with Host.from_sources(load_distributions(["toolhost-math"]),
                           data_dir=tmp_path / "data") as host:
        yield host


@contextlib.contextmanager
def rows_refused(data_dir: Path) -> Iterator[None]:
    """The record's database refuses every new row (the record store's outage)."""
    db = sqlite3.connect(data_dir / DATABASE_NAME)
    try:
        db.execute("CREATE TRIGGER refuse_rows BEFORE INSERT ON tool_invocations "
                   "BEGIN SELECT RAISE(ABORT, 'refused'); END")
        db.commit()
        yield
    finally:
        db.execute("DROP TRIGGER IF EXISTS refuse_rows")
        db.commit()
        db.close()


def samples(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


def invocations(spans: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith("execute_tool")]


def test_during_a_record_store_outage_invented_names_are_one_series_and_no_span_name(
        host: Host) -> None:
    # Regression: the refusal its row could not be written for ends RECORD_STORE, and only
    # UNKNOWN_TOOL was labelled "(unknown)": each invented name made a series and a span name.
    assert host.invoke_sync("math.calculate", {"expression": "1"}).ok  # the record is open
    with rows_refused(host.data_dir), collected_spans() as exporter:
        for n in range(30):
            outcome = host.invoke_sync(f"made.up_{n}", {})
            assert outcome.failure is not None and outcome.failure.reason_code == RECORD_STORE
        refused = host.invoke_sync("math.calculate", {"expression": 7})  # resolved, step 4
        assert refused.failure is not None and refused.failure.reason_code == RECORD_STORE
    assert host.pipeline.telemetry is not None
    text = host.pipeline.telemetry.instruments.render()
    found = samples(text)
    assert found[f'{CALLS}{{tool="(unknown)",version="",status="failed",'
                 f'reason_code="{RECORD_STORE}"}}'] == 30
    # A call that resolved its tool keeps the tool's name, outage or not.
    assert found[f'{CALLS}{{tool="math.calculate",version="1.0.0",status="failed",'
                 f'reason_code="{RECORD_STORE}"}}'] == 1
    assert "made.up" not in text
    names = [s.name for s in invocations(exporter.get_finished_spans())]
    assert names == ["execute_tool"] * 30 + ["execute_tool math.calculate"]


def test_a_megabyte_tool_name_is_logged_and_traced_as_a_refusals_detail_shows_it() -> None:
    # Regression: the logger was bound to the whole name and the span given it whole: one
    # megabyte a log line, one megabyte a span attribute.
    name = "y" * 1_000_000
    out = io.StringIO()
    with Harness.over(("toolhost-math",)) as harness:
        configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
        try:
            with collected_spans() as exporter:
                outcome = harness.call(name, {})
        finally:
            structlog.reset_defaults()
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.unknown_tool"
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines and all(line["tool"] == shown(name) for line in lines)
    assert len(out.getvalue()) < 5_000
    (span,) = invocations(exporter.get_finished_spans())
    assert span.name == "execute_tool"
    assert dict(span.attributes or {})["gen_ai.tool.name"] == shown(name)
    assert len(shown(name)) < 250


def test_an_mcp_call_of_a_long_name_no_tool_has_is_traced_by_its_first_characters(
        tmp_path: Path) -> None:
    # Regression: the request's span (opened before the call resolves) carried the name whole.
    name = "z" * 100_000
    host = Host.from_sources(load_distributions(["toolhost-math"]), settings=Settings({}),
                             data_dir=tmp_path / "data")
    roster = served_roster(host.registry, None, {})
    server, _ = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))

    async def journey() -> None:
        async with mcp.Client(server) as client:
            with pytest.raises(mcp.MCPError):  # -32602: not a tool served here
                await client.call_tool(name, {})

    try:
        with collected_spans() as exporter:
            import anyio

            anyio.run(journey)
    finally:
        host.close()
    (span,) = invocations(exporter.get_finished_spans())
    assert span.name == "execute_tool"
    assert dict(span.attributes or {})["gen_ai.tool.name"] == shown(name)
