"""``TOOLHOST_TRACE_ARGUMENTS=on``: the arguments on the span are redacted exactly as a log line
is (one redaction, D272), a credential's name recognised in camelCase as in snake_case, and
arguments JSON cannot show never fail the call the span describes.

Over a real host (the math plugin, SQLite record) with the OpenTelemetry SDK's in-memory
exporter; the arguments reach the span before validation, so a refused call carries them too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the test extra) is missing")

from otel_support import collected_spans, every_text, provider

from toolhost._pipeline.log import REDACTED, redact_secrets
from toolhost.testing import Harness

SETTING_SECRET = "sk-live-7c1d0e9a55f2"
ARGUMENTS = {
    "expression": "1+1",
    "headers": {"Authorization": "Bearer ya29.SECRET-BEARER"},
    "accessToken": "SECRET-CAMEL-TOKEN",
    "clientSecret": "SECRET-CAMEL-SECRET",
    "url": "https://alice:SECRET-URL-PW@db.example/x",
    "note": "curl -H 'x-api-key: SECRET-INLINE' and Bearer SECRET-INLINE-BEARER",
    "body": '{"refreshToken": "SECRET-IN-JSON-TEXT", "maxTokens": 5}',
    "setting": f"key={SETTING_SECRET}!",
}


@pytest.fixture
def harness() -> Iterator[Harness]:
    provider()
    with Harness.over(("toolhost-math",), settings={
            "TOOLHOST_TRACE_ARGUMENTS": "on", "TENSORSCALE_API_KEY": SETTING_SECRET}) as harness:
        yield harness


def traced_arguments(harness: Harness, arguments: Any) -> tuple[str, str]:
    """The invocation span's ``gen_ai.tool.call.arguments``, and all the text of every span."""
    with collected_spans() as exporter:
        harness.call("math.calculate", arguments)
    spans = exporter.get_finished_spans()
    (span,) = [s for s in spans if s.name == "execute_tool math.calculate"]
    return (str(dict(span.attributes or {})["gen_ai.tool.call.arguments"]),
            "\n".join(every_text(s) for s in spans))


def test_span_arguments_are_redacted_as_a_log_line_is(harness: Harness) -> None:
    # Regression: only members named like a setting's credential (and secret settings' values)
    # were replaced: the Authorization header, Bearer tokens and x-api-key inside text, a URL's
    # password, accessToken and clientSecret went on the span whole.
    shown, everything = traced_arguments(harness, ARGUMENTS)
    assert "SECRET" not in everything and SETTING_SECRET not in everything
    for member in ('"accessToken": "***"', '"clientSecret": "***"',
                   '"headers": {"Authorization": "***"}',
                   '"url": "https://alice:***@db.example/x"',
                   "\"note\": \"curl -H 'x-api-key: ***' and Bearer ***\"",
                   '"expression": "1+1"', "maxTokens"):
        assert member in shown, shown


def test_a_camelcase_credential_name_is_a_secret_in_a_log_line_too() -> None:
    event = redact_secrets(None, "info", {
        "accessToken": "a1", "clientSecret": "a2", "apiKey": "a3", "APIKey": "a4",
        "privateKey": "a5", "maxTokens": 5, "tokenizer": "bpe", "note": '{"idToken": "a6"}'})
    assert event == {
        "accessToken": REDACTED, "clientSecret": REDACTED, "apiKey": REDACTED,
        "APIKey": REDACTED, "privateKey": REDACTED, "maxTokens": 5, "tokenizer": "bpe",
        "note": f'{{"idToken": "{REDACTED}"}}'}


def test_arguments_json_cannot_show_are_named_and_the_call_is_still_recorded(
        harness: Harness) -> None:
    # Regression: json.dumps(sort_keys=True) raised TypeError for a key that is not text (the
    # Python API takes any object) as the span opened: the call raised, and left no row.
    shown, _ = traced_arguments(harness, {1: "one", "expression": "1+1"})
    assert shown == "(arguments not shown: TypeError)"
    (row,) = harness.host.pipeline.invocations.list()
    assert (row.tool_name, row.state.value, row.reason_code) == (
        "math.calculate", "failed", "tool.invalid_arguments.schema")
