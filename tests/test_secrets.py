"""Credentials: a ``Secret`` shows ``***`` everywhere but ``reveal()``, and never reaches a log."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from toolhost._model.secrets import Secret, resolve_secret
from toolhost._model.settings import Settings, is_secret_name
from toolhost._pipeline.log import REDACTED, configure_logging, get_logger, redact_secrets
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT


def test_repr_and_str_show_stars_and_reveal_returns_the_value() -> None:
    secret = Secret("sk-live-123")
    assert repr(secret) == "Secret('***')"
    assert str(secret) == "***" and f"{secret}" == "***" and f"{secret!r}" == "Secret('***')"
    assert "sk-live-123" not in repr([secret, {"k": secret}])
    assert secret.reveal() == "sk-live-123"


def test_equality_and_hash_compare_values() -> None:
    assert Secret("a") == Secret("a") and hash(Secret("a")) == hash(Secret("a"))
    assert Secret("a") != Secret("b")
    plain: object = "a"
    assert Secret("a") != plain


def test_a_secret_is_frozen_and_holds_a_string() -> None:
    secret = Secret("a")
    with pytest.raises(AttributeError):
        secret._value = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Secret(123)  # type: ignore[arg-type]


def test_settings_secret_returns_a_secret_or_none() -> None:
    settings = Settings(env={"TENSORSCALE_API_KEY": " sk-1 ", "BLANK_API_KEY": "  "})
    assert settings.secret("TENSORSCALE_API_KEY") == Secret("sk-1")
    assert settings.secret("BLANK_API_KEY") is None
    assert settings.secret("ABSENT_API_KEY") is None


@pytest.mark.parametrize(
    ("ref", "name"),
    [("tensorscale", "TENSORSCALE_API_KEY"), ("my_service2", "MY_SERVICE2_API_KEY"), ("x", "X_API_KEY")],
)
def test_resolve_secret_maps_the_reference_to_its_api_key_setting(ref: str, name: str) -> None:
    secret = resolve_secret(Settings(env={name: "sk-value"}), ref)
    assert secret is not None and secret.reveal() == "sk-value"


def test_resolve_secret_is_none_when_absent_or_blank() -> None:
    assert resolve_secret(Settings(), "tensorscale") is None
    assert resolve_secret(Settings(env={"TENSORSCALE_API_KEY": " \t"}), "tensorscale") is None
    # The reference names the *_API_KEY setting only, not the variable itself.
    assert resolve_secret(Settings(env={"TENSORSCALE": "sk"}), "tensorscale") is None


@pytest.mark.parametrize(
    "ref",
    ["", "Tensorscale", "TENSORSCALE_API_KEY", "1password", "_hidden", "tensor-scale",
     "tensor scale", "tensorscale\n", "tensörscale", "a.b"],
)
def test_a_bad_reference_is_a_one_line_value_error(ref: str) -> None:
    with pytest.raises(ValueError, match="invalid credential reference") as info:
        resolve_secret(Settings(env={"TENSORSCALE_API_KEY": "sk"}), ref)
    assert "\n" not in str(info.value) and repr(ref) in str(info.value)


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
    yield out
    structlog.reset_defaults()


def test_a_secret_in_a_log_event_is_redacted_at_any_depth(stream: io.StringIO) -> None:
    get_logger(credential=Secret("sk-bound")).info(
        "adapter.request",
        key=Secret("sk-top"),
        request={"auth": Secret("sk-nested"), "calls": [{"deeper": (Secret("sk-deep"),)}]},
        plain="visible",
    )
    line = stream.getvalue()
    assert "sk-" not in line
    event = json.loads(line)
    assert event["credential"] == REDACTED and event["key"] == REDACTED
    assert event["request"] == {"auth": REDACTED, "calls": [{"deeper": [REDACTED]}]}
    assert event["plain"] == "visible"


def test_a_quoted_conninfo_password_in_a_log_line_is_redacted_whole(
        stream: io.StringIO) -> None:
    # Regression: the log's own patterns cut `password='a b c'` at its first space and left
    # " b c'" in the line.
    get_logger().info("store.connect", error="cannot reach host=db password='hun ter 2' port=5")
    event = json.loads(stream.getvalue())
    assert "hun" not in event["error"] and "ter 2" not in event["error"]
    assert event["error"].endswith(" port=5")


def test_a_secret_is_redacted_by_the_console_renderer_too() -> None:
    out = io.StringIO()
    configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=False)
    try:
        get_logger().info("adapter.request", key=Secret("sk-top"), nested={"a": Secret("sk-2")})
    finally:
        structlog.reset_defaults()
    assert "sk-top" not in out.getvalue() and "sk-2" not in out.getvalue()
    assert REDACTED in out.getvalue()


def test_the_processor_redacts_secrets_in_sets() -> None:
    event = redact_secrets(None, "info", {"s": frozenset({Secret("sk")}), "n": 1})
    assert event == {"s": frozenset({REDACTED}), "n": 1}


@pytest.mark.parametrize(("name", "secret"), [
    ("TENSORSCALE_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("AWS_SESSION_TOKEN", True),
    ("PGPASSWORD", True), ("TLS_PRIVATE_KEY", True), ("client_secret", True),
    ("AWS_ACCESS_KEY_ID", False), ("TOOLHOST_DATABASE_URL", False), ("max_tokens", False),
])
def test_a_credential_is_known_by_a_whole_word_of_its_name(name: str, secret: bool) -> None:
    # Regression: only names ending in _API_KEY, _TOKEN, _SECRET or _PASSWORD were secrets,
    # so AWS_SECRET_ACCESS_KEY (the S3 store's credential) showed in a Settings repr.
    assert is_secret_name(name) is secret


def test_settings_repr_hides_credentials_and_a_url_password() -> None:
    settings = Settings(env={
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI",
        "TOOLHOST_DATABASE_URL": "postgresql://toolhost:hunter2@db.internal:5432/record",
    })
    shown = repr(settings)
    assert "wJalrXUtnFEMI" not in shown and "hunter2" not in shown
    assert "postgresql://toolhost:***@db.internal:5432/record" in shown


def test_a_url_password_in_a_log_line_is_redacted() -> None:
    event = {"error": "cannot reach postgresql://toolhost:hunter2@db.internal/record"}
    assert redact_secrets(None, "error", event) == {
        "error": "cannot reach postgresql://toolhost:***@db.internal/record"}
