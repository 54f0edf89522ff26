"""An API key no HTTP header can carry (not printable ASCII: a non-ASCII letter, an inner CR
or LF, a control character) is a misconfiguration: every call fails provider_not_configured
before anything is sent, and ``toolhost check`` names the problem, as for a refused base URL.
Neither ever shows the key or a character of it.

Regression (adversarial review of toolhost-media, finding 4): such a key passed the
configuration check; a non-ASCII one then failed ``tool.internal.unexpected`` with httpx's
encoding error in the stored detail (the offending character and its position in the
secret), an inner CR/LF ``connection_lost`` (warning of a charge, though nothing was sent),
and ``toolhost check`` said nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from media_support import PLUGINS, FakeTensorScale, call, settings
from toolhost import Secret, Settings
from toolhost.testing import Harness, run_toolhost
from toolhost_media import messages, plugin
from toolhost_media.tensorscale import TensorScale

#: Each odd key, and pieces of it no output may hold (the key itself, its odd character in
#: the spellings an error message would use).
ODD_KEYS = {
    "non-ascii": ("ts-clé-5f1d9c0a7e", ("ts-cl", "é", "\\xe9", "\\u00e9", "position")),
    "inner-crlf": ("ts-5f1d9c\r\nX-Evil: 1", ("ts-5f1d9c", "X-Evil", "\\r\\n")),
    "control": ("ts-5f1d\x009c0a", ("ts-5f1d", "\\x00", "\\u0000")),
}
PROBLEM = ("TENSORSCALE_API_KEY holds a character an HTTP header cannot carry: it must be "
           "printable ASCII")


def leaks(text: str, pieces: tuple[str, ...]) -> list[str]:
    return [piece for piece in pieces if piece in text]


@pytest.mark.parametrize("odd", list(ODD_KEYS))
@pytest.mark.parametrize("tool", ["image.generate", "video.generate"])
def test_a_key_no_header_can_carry_is_not_configured_and_nothing_is_sent(
    server: FakeTensorScale, bundle: Path, data_dir: Path, tool: str, odd: str,
) -> None:
    key, pieces = ODD_KEYS[odd]
    env = settings(server, bundle, TENSORSCALE_API_KEY=key)
    with Harness.over(PLUGINS, settings=env, data_dir=data_dir) as host:
        outcome = call(host, tool, {"prompt": "a lighthouse"})
        row = repr(host.record(outcome.invocation_id or ""))
    assert outcome.failure is not None, outcome
    assert outcome.failure.reason_code == messages.NOT_CONFIGURED, outcome.failure
    assert outcome.failure.detail == {"problem": PROBLEM}
    assert outcome.content == messages.MESSAGES[messages.NOT_CONFIGURED]  # "nothing was sent"
    assert server.received == []
    assert leaks(json.dumps(outcome.to_json()) + row, pieces) == []


@pytest.mark.parametrize("odd", list(ODD_KEYS))
def test_readiness_names_a_key_no_header_can_carry(odd: str) -> None:
    key, pieces = ODD_KEYS[odd]
    (line,) = plugin.toolhost_readiness(Settings(env={"TENSORSCALE_API_KEY": key}))
    assert line == (f"image.generate, video.generate: {PROBLEM}; every call fails until it "
                    "is fixed")
    assert leaks(line, pieces) == []


def test_a_key_with_surrounding_whitespace_is_still_ready() -> None:
    # The settings loader strips it; only what is sent is judged.
    assert plugin.toolhost_readiness(Settings(env={"TENSORSCALE_API_KEY": " ts-5f1d9c\n"})) == []


@pytest.mark.parametrize("odd", ["non-ascii", "inner-crlf"])  # an environment holds no NUL
def test_check_says_the_key_cannot_be_sent(data_dir: Path, odd: str) -> None:
    key, pieces = ODD_KEYS[odd]
    env = {"TOOLHOST_DATA_DIR": str(data_dir), "TOOLHOST_PLUGINS": "toolhost-media",
           "TENSORSCALE_API_KEY": key}
    done = run_toolhost("check", data_dir=data_dir, env=env, drop=("TENSORSCALE_",))
    assert done.returncode == 0, done.stderr  # registered tools failing closed: said, not fatal
    assert f"not ready: toolhost-media: image.generate, video.generate: {PROBLEM}" in done.stdout
    assert leaks(done.stdout + done.stderr, pieces) == []


@pytest.mark.parametrize("odd", list(ODD_KEYS))
def test_the_adapter_refuses_a_key_no_header_can_carry(
    host: Harness, server: FakeTensorScale, odd: str,
) -> None:
    key, pieces = ODD_KEYS[odd]
    client = host.services("toolhost-media").http(timeout=5)
    with client, pytest.raises(ValueError) as raised:
        TensorScale(client, Secret(key), server.base_url)
    assert str(raised.value) == PROBLEM
    assert leaks(repr(raised.value), pieces) == []
