"""The redaction processor: secrets never reach a log line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from toolhost._pipeline.log import REDACTED, configure_logging, get_logger, redact_secrets
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
    yield out
    structlog.reset_defaults()


def test_secret_settings_and_authorization_headers_are_redacted(stream: io.StringIO) -> None:
    get_logger().info(
        "adapter.request",
        TENSORSCALE_API_KEY="sk-live-123",
        headers={"Authorization": "Bearer sk-live-123", "Accept": "image/png"},
        settings={"nested": [{"OPENAI_API_KEY": "sk-2"}]},
        note="sent Authorization: Bearer abc.def-123 upstream",
    )
    line = stream.getvalue()
    assert "sk-live-123" not in line and "sk-2" not in line and "abc.def-123" not in line
    event = json.loads(line)
    assert event["TENSORSCALE_API_KEY"] == REDACTED
    assert event["headers"] == {"Authorization": REDACTED, "Accept": "image/png"}
    assert event["settings"] == {"nested": [{"OPENAI_API_KEY": REDACTED}]}
    assert event["note"] == f"sent Authorization: Bearer {REDACTED} upstream"


def test_debug_is_filtered_at_info_and_output_is_json(stream: io.StringIO) -> None:
    log = get_logger(invocation_id="i1")
    log.debug("hidden")
    log.info("shown")
    (event,) = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert event == {"event": "shown", "invocation_id": "i1", "level": "info",
                     "timestamp": "2026-07-25T13:03:11.482913+00:00"}


def test_the_processor_leaves_other_values_alone() -> None:
    assert redact_secrets(None, "info", {"a": 1, "b": ["x"]}) == {"a": 1, "b": ["x"]}
