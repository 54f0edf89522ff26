"""Every log line hides the values of the secret settings the log was configured with
(``configure_logging(secrets=...)``), wherever they appear: a field, a nested value, bytes, a
frame a library logged as a bytes repr (sse_starlette's), a JSON text inside a string with the
value's quotes escaped there. The patterns catch a secret by its name or shape; a value of
``MY_SERVICE_API_KEY`` has neither."""

from __future__ import annotations

import io
import json

import structlog

from toolhost._pipeline.log import configure_logging, get_logger, secret_values
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT

PLAIN, QUOTED = "supersecretvalue123", 'pa"ss wörd'
SETTINGS = {"MY_SERVICE_API_KEY": f" {PLAIN} ", "PAYROLL_PASSWORD": QUOTED,
            "TOOLHOST_LOG_LEVEL": "info", "SHORT_TOKEN": "on"}


def test_a_secret_settings_value_is_hidden_wherever_a_line_holds_it() -> None:
    out = io.StringIO()
    try:
        configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True,
                          secrets=secret_values(SETTINGS))
        frame = json.dumps({"text": f"the value is {PLAIN}"}).encode()
        get_logger().info(f"chunk: {frame!r}", note=f"x {PLAIN} y", mode="on",
                          nested={"items": [PLAIN.encode(), QUOTED]},
                          body=json.dumps({"password_hint": QUOTED}, ensure_ascii=False))
    finally:
        structlog.reset_defaults()
    event = json.loads(out.getvalue())
    shown = json.dumps(event, ensure_ascii=False)  # every value, decoded
    assert PLAIN not in shown and "ss wörd" not in shown, shown
    assert event["note"] == "x [redacted] y"
    assert event["body"] == '{"password_hint": "[redacted]"}'
    assert event["mode"] == "on"  # shorter than 4 characters: a word, not hidden everywhere


def test_a_short_secret_value_blanks_neither_the_lines_stamps_nor_its_words() -> None:
    # A 4-digit PIN or a placeholder in a variable named like a secret hid every year, level
    # and "none" in every line: a value is hidden wherever it stands from 8 characters, and
    # a line's time and level are the host's own (D562).
    out = io.StringIO()
    short = {"VNC_PASSWORD": "2026", "OPENAI_API_KEY": "info", "SPARE_TOKEN": "none"}
    try:
        configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True,
                          secrets=[*secret_values(short), PLAIN])
        get_logger().info("pipeline.succeeded", year="2026", kind="none", note=f"{PLAIN}!")
    finally:
        structlog.reset_defaults()
    event = json.loads(out.getvalue())
    assert (event["level"], event["timestamp"]) == ("info", DEFAULT_INSTANT.isoformat(
        timespec="microseconds"))
    assert (event["event"], event["year"], event["kind"]) == ("pipeline.succeeded", "2026",
                                                              "none")
    assert event["note"] == "[redacted]!"  # a long one still goes wherever it stands
