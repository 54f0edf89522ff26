"""A call MCP answers with -32602 (a tool not served here: unknown, not enabled) is an error
span whose ``error.type`` is its reason code, as every failed call's is (D272): the request's
span took the protocol error's class instead (``MCPError``), merging every such reason into
one bucket that disagreed with ``toolhost_tool_calls_total{reason_code=...}``.

The MCP SDK's own client, in memory, to a server over a real host (SQLite record); spans from
the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the test extra) is missing")
mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import anyio  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from opentelemetry import trace  # noqa: E402
from otel_support import collected_spans, provider  # noqa: E402

from toolhost._composition import Host  # noqa: E402
from toolhost._mcp.config import ServeConfig  # noqa: E402
from toolhost._mcp.definitions import served_roster  # noqa: E402
from toolhost._mcp.server import build_server  # noqa: E402
from toolhost._model.settings import Settings  # noqa: E402
from toolhost._registration.discovery import load_distributions  # noqa: E402


@pytest.mark.parametrize(("tool", "reason_code"), [
    ("no.such_tool", "tool.invalid_arguments.unknown_tool"),
    ("workspace.list_files", "tool.permission_denied.not_enabled"),
])
def test_an_unserved_calls_span_names_its_reason_code(
        tmp_path: Path, tool: str, reason_code: str) -> None:
    provider()
    host = Host.from_sources(load_distributions(["toolhost-math", "toolhost-workspace"]),
                             settings=Settings({}), data_dir=tmp_path / "data")
    roster = served_roster(host.registry, None, {})
    server, _ = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))

    async def call() -> None:
        async with mcp.Client(server) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool(tool, {})
            assert refused.value.error.code == -32602

    try:
        with collected_spans() as exporter:
            anyio.run(call)
    finally:
        host.close()
    (span,) = [s for s in exporter.get_finished_spans()
               if s.name.startswith("execute_tool") and s.attributes
               and s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    attributes = dict(span.attributes or {})
    assert (attributes["toolhost.reason_code"], attributes["error.type"]) == (
        reason_code, reason_code)
    assert span.status.status_code is trace.StatusCode.ERROR
