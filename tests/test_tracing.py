"""Traces: one span per invocation by the GenAI conventions for tool execution, its steps as
children, the caller's trace continued, and never an argument or a secret unless asked.

With the OpenTelemetry SDK and an in-memory exporter: ``toolhost call`` run in this process
through its ``main()``, and an MCP ``tools/call`` from the SDK's own client to a server in
this process, each over a real host (SQLite record, the math plugin installed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the test extra) is missing")
mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from otel_support import collected_spans, every_text, provider  # noqa: E402

from toolhost._cli.main import main  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost._mcp.config import ServeConfig  # noqa: E402
from toolhost._mcp.definitions import served_roster  # noqa: E402
from toolhost._mcp.server import build_server  # noqa: E402
from toolhost._model.settings import Settings  # noqa: E402
from toolhost._pipeline.tracing import parent_context  # noqa: E402
from toolhost._registration.discovery import load_distributions  # noqa: E402

SECRET = "sk-live-7c1d0e9a55f2"
EXPRESSION = "1234567 * 7654321"
STEPS = {"toolhost.validate", "toolhost.policy", "toolhost.execute", "toolhost.excerpt",
         "toolhost.record"}
TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_ID = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"


@pytest.fixture(autouse=True)
def sdk() -> None:
    provider()


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TOOLHOST_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TOOLHOST_PLUGINS", "toolhost-math")
    monkeypatch.setenv("TENSORSCALE_API_KEY", SECRET)
    monkeypatch.setenv("TOOLHOST_CONFIG", "")  # not this machine's toolhost.toml
    for name in ("TRACEPARENT", "TRACESTATE", "TOOLHOST_TRACE_ARGUMENTS"):
        monkeypatch.delenv(name, raising=False)
    # main() in this process configures structlog for the stderr pytest captures now; the
    # tests after these must not log to that stream once it is closed.
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


def invocation(spans: tuple[ReadableSpan, ...], name: str = "math.calculate") -> ReadableSpan:
    found = [s for s in spans if s.name == f"execute_tool {name}"]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def children(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None
            and s.parent.span_id == parent.context.span_id]


def assert_invocation(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> None:
    attributes = dict(span.attributes or {})
    assert span.kind is trace.SpanKind.INTERNAL
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "math.calculate"
    assert isinstance(attributes["gen_ai.tool.call.id"], str)
    assert attributes["toolhost.tool.version"] == "1.0.0"
    assert attributes["toolhost.status"] == "succeeded"
    assert isinstance(attributes["toolhost.run_id"], str)
    assert "toolhost.reason_code" not in attributes and "error.type" not in attributes
    steps = children(spans, span)
    assert {s.name for s in steps} >= STEPS
    for step in steps:  # each inside its invocation, in time
        assert span.start_time <= step.start_time <= step.end_time <= span.end_time


def assert_nothing_secret(spans: tuple[ReadableSpan, ...]) -> None:
    for span in spans:
        text = every_text(span)
        assert SECRET not in text and EXPRESSION not in text, span.name


# ---------------------------------------------------------------------------- toolhost call

def test_a_cli_call_is_a_root_span_with_its_steps_and_no_argument_or_secret(
        cli_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    with collected_spans() as exporter:
        assert main(["call", "math.calculate", "--args", f'{{"expression": "{EXPRESSION}"}}']) == 0
    spans = exporter.get_finished_spans()
    span = invocation(spans)
    assert span.parent is None  # a trace of its own
    assert_invocation(span, spans)
    assert_nothing_secret(spans)
    assert capsys.readouterr().out == f"{1234567 * 7654321}\n"


def test_a_cli_call_continues_the_trace_of_traceparent(
        cli_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    with collected_spans() as exporter:
        assert main(["call", "math.calculate", "--args", '{"expression": "2 * 3"}']) == 0
    span = invocation(exporter.get_finished_spans())
    assert span.context is not None and span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (TRACE_ID, PARENT_ID)


def test_a_failed_call_is_an_error_span_named_by_its_reason_code(cli_env: None) -> None:
    with collected_spans() as exporter:
        assert main(["call", "math.calculate", "--args", '{"expression": "1 / 0"}']) == 1
    span = invocation(exporter.get_finished_spans())
    attributes = dict(span.attributes or {})
    assert attributes["toolhost.status"] == "failed"
    assert attributes["error.type"] == attributes["toolhost.reason_code"]
    assert str(attributes["error.type"]).startswith("tool.")
    assert span.status.status_code is trace.StatusCode.ERROR
    assert not span.status.description  # the model's message is not the operator's trace


def test_arguments_go_on_the_span_only_when_asked_and_never_a_secret(
        cli_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHOST_TRACE_ARGUMENTS", "on")
    with collected_spans() as exporter:
        main(["call", "math.calculate", "--args",
              f'{{"expression": "{EXPRESSION} + {SECRET}", "api_key": "{SECRET}"}}'])
    spans = exporter.get_finished_spans()
    arguments = str(dict(invocation(spans).attributes or {})["gen_ai.tool.call.arguments"])
    assert EXPRESSION in arguments and '"api_key": "***"' in arguments
    assert all(SECRET not in every_text(s) for s in spans)


# ---------------------------------------------------------------------------- MCP tools/call

def math_server(tmp_path: Path, *, sdk_middleware: bool = True) -> tuple[Any, Host]:
    host = Host.from_sources(load_distributions(["toolhost-math"]),
                             settings=Settings({"TENSORSCALE_API_KEY": SECRET}),
                             data_dir=tmp_path / "data")
    roster = served_roster(host.registry, None, {})
    server, _ = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))
    if not sdk_middleware:  # as served when no provider existed at the start
        server.middleware = [m for m in server.middleware
                             if type(m).__name__ != "OpenTelemetryMiddleware"]
    return server, host


@pytest.mark.parametrize("sdk_middleware", [True, False], ids=["sdk-span", "no-sdk-span"])
def test_an_mcp_call_continues_the_clients_trace(tmp_path: Path, sdk_middleware: bool) -> None:
    server, host = math_server(tmp_path, sdk_middleware=sdk_middleware)
    tracer = trace.get_tracer("test-agent")

    async def journey() -> None:
        async with mcp.Client(server) as client:
            with tracer.start_as_current_span("agent turn"):
                # The SDK's client puts its own span's traceparent in _meta (SEP-414).
                result = await client.call_tool("math.calculate", {"expression": EXPRESSION})
            assert not result.is_error

    try:
        with collected_spans() as exporter:
            import anyio

            anyio.run(journey)
    finally:
        host.close()
    spans = exporter.get_finished_spans()
    span = invocation(spans)
    assert_invocation(span, spans)
    assert_nothing_secret(spans)
    turn = next(s for s in spans if s.name == "agent turn")
    assert turn.context is not None and span.context is not None
    assert span.context.trace_id == turn.context.trace_id
    # Up the parents from the invocation (the SDK's server span when it runs; the client's
    # send span when it is a parent here), to the agent's turn.
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    chain = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        chain.append(by_id[parent.span_id].name)
        parent = by_id[parent.span_id].parent
    assert chain[-1] == "agent turn"
    assert ("tools/call math.calculate" in chain) is sdk_middleware


def test_the_parent_is_meta_then_the_http_header_then_none() -> None:
    other = f"00-{TRACE_ID + 1:032x}-{PARENT_ID + 1:016x}-01"

    def ids(context: Any) -> tuple[int, int]:
        found = trace.get_current_span(context).get_span_context()
        return found.trace_id, found.span_id

    assert ids(parent_context({"traceparent": TRACEPARENT}, {"traceparent": other})) == (
        TRACE_ID, PARENT_ID)
    assert ids(parent_context({"progressToken": 1}, {"traceparent": other})) == (
        TRACE_ID + 1, PARENT_ID + 1)
    assert ids(parent_context({"traceparent": "00-bad"}, {"traceparent": other})) == (
        TRACE_ID + 1, PARENT_ID + 1)
    assert parent_context(None, None) is None
    assert parent_context({"traceparent": "garbage"}, {}) is None


def test_serve_with_an_uninstalled_otel_propagator_says_so_in_one_line(tmp_path: Path) -> None:
    """OpenTelemetry's API loads OTEL_PROPAGATORS' propagators as the SDK imports it, and
    raised a ValueError through ``serve``: a traceback for a setting of the operator's."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLHOST_", "OTEL_"))}
    env.update(OTEL_PROPAGATORS="no-such-propagator", TOOLHOST_PLUGINS="toolhost-math",
               TOOLHOST_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "toolhost._cli", "serve"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "toolhost: OTEL_PROPAGATORS='no-such-propagator': Propagator no-such-propagator not "
        "found. It is either misspelled or not installed. Install it, or unset "
        "OTEL_PROPAGATORS."]


def test_any_other_value_error_while_serve_loads_is_not_called_a_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only OpenTelemetry's own error is the operator's setting: a bug raising ValueError in
    the same import, with OTEL_PROPAGATORS set to its valid default, keeps its traceback."""
    import argparse

    import toolhost._composition
    from toolhost._cli.main import cmd_serve

    def a_bug() -> None:
        raise ValueError("invalid literal for int() with base 10: 'abc'")

    monkeypatch.setenv("OTEL_PROPAGATORS", "tracecontext,baggage")
    monkeypatch.setattr(toolhost._composition, "mcp_server", a_bug)
    with pytest.raises(ValueError, match="invalid literal"):
        cmd_serve(argparse.Namespace(http=None, enable=[], pin=[]))
