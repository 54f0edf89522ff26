"""A JSON text nested in a JSON string reaches ``serve``'s log without its credentials.

A library logging a request's body, or a structured field holding a JSON text whose own values
are JSON texts, escapes the inner quotes: ``{"body": "{\\"password\\": \\"...\\"}"}``. A fresh
process configured as ``serve`` is, at ``debug``, logs such lines through the standard library
and through structlog, escaped once, twice and as a Python repr escapes them.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_log_http_response_headers import logged_at_debug

from toolhost._pipeline.log import REDACTED, redact_secrets

PASSWORD, BEARER, KEY, OPAQUE, COOKIE, QUOTED = (
    "hunter2pw", "BEARERtok9", "APIKEY42x", "OPAQUEauth7", "SIDcookie5", 'in"side')

#: The credentials as a JSON text holds them.
INNER = json.dumps({"password": PASSWORD, "user": "bob",
                    "headers": {"Authorization": f"Bearer {BEARER}", "api_key": KEY}})
#: A JSON text in a JSON text's string in a JSON text's string.
TWICE = json.dumps({"request": json.dumps({"body": INNER, "Cookie": f"sid={COOKIE}"})})

SCRIPT = f"""
import json, logging
from toolhost._pipeline.log import get_logger
INNER, TWICE = {INNER!r}, {TWICE!r}
logging.getLogger("library.http").debug("sent %s", json.dumps({{"body": INNER}}))
logging.getLogger("library.http").debug("sent %s", TWICE)
logging.getLogger("library.http").debug("sent %r", {{"body": TWICE}})
get_logger().debug("adapter.request", body=TWICE,
                   auth=json.dumps({{"a": json.dumps({{"Authorization": "{OPAQUE}",
                                                      "password": {QUOTED!r}}})}}))
"""


def test_a_json_text_nested_in_a_json_string_carries_no_credential() -> None:
    # Regression: 'sent {"body": "{\\"password\\": \\"hunter2pw\\", ...}"}' was logged as
    # it came: the redactor knew a quoted value only by an unescaped quote.
    lines = logged_at_debug(SCRIPT)
    said = "\n".join(json.dumps(line) for line in lines)
    for secret in (PASSWORD, BEARER, KEY, OPAQUE, COOKIE, "side"):
        assert secret not in said
    sent = [line["event"] for line in lines if line.get("logger") == "library.http"]
    assert len(sent) == 3
    # What is left is still the JSON it was, each marker where its credential was.
    body = json.loads(json.loads(sent[0].removeprefix("sent "))["body"])
    assert body == {"password": REDACTED, "user": "bob",
                    "headers": {"Authorization": f"Bearer {REDACTED}", "api_key": REDACTED}}
    request = json.loads(json.loads(sent[1].removeprefix("sent "))["request"])
    assert request["Cookie"] == REDACTED
    assert json.loads(request["body"])["password"] == REDACTED
    (event,) = [line for line in lines if line["event"] == "adapter.request"]
    assert json.loads(json.loads(event["auth"])["a"]) == {"Authorization": REDACTED,
                                                           "password": REDACTED}


@pytest.mark.parametrize(("text", "expected"), [
    ('{"body": "{\\"password\\": \\"hunter2\\"}"}',
     f'{{"body": "{{\\"password\\": \\"{REDACTED}\\"}}"}}'),
    # Twice escaped; a quote inside the value is escaped once more than its delimiter.
    (json.dumps({"a": json.dumps({"b": json.dumps({"token": 'x"y'})})}),
     json.dumps({"a": json.dumps({"b": json.dumps({"token": REDACTED})})})),
    # A Python repr of a JSON text's string: each escape doubled.
    (repr({"body": json.dumps({"a": json.dumps({"password": 'x"y', "n": 1})})}),
     repr({"body": json.dumps({"a": json.dumps({"password": REDACTED, "n": 1})})})),
    ('"{\\"Authorization\\": \\"Bearer abc.def\\", \\"n\\": 1}"',
     f'"{{\\"Authorization\\": \\"Bearer {REDACTED}\\", \\"n\\": 1}}"'),
    ('"{\\"Set-Cookie\\": [\\"sid=1\\", \\"b=2\\"]}"', f'"{{\\"Set-Cookie\\": [{REDACTED}]}}"'),
    ('"[[\\"set-cookie\\", \\"SID\\"], [\\"accept\\", \\"*/*\\"]]"',
     f'"[[\\"set-cookie\\", \\"{REDACTED}\\"], [\\"accept\\", \\"*/*\\"]]"'),
    # A bare value stops before an escaped quote, which stays.
    ('"{\\"note\\": \\"sent x-api-key: k1\\"}"',
     f'"{{\\"note\\": \\"sent x-api-key: {REDACTED}\\"}}"'),
])
def test_escaped_credentials_are_redacted_and_their_quotes_kept(text: str, expected: str) -> None:
    assert redact_secrets(None, "debug", {"note": text}) == {"note": expected}


def test_an_escaped_value_that_is_empty_or_ordinary_is_kept() -> None:
    for text in ('"{\\"password\\": \\"\\", \\"user\\": \\"bob\\"}"',
                 '"{\\"tokens\\": \\"12\\", \\"reason\\": \\"max_tokens\\"}"',
                 "C:\\\\Users\\\\token\\\\ and \\\\\\\\server"):
        assert redact_secrets(None, "debug", {"note": text}) == {"note": text}
