"""`serve`'s numeric settings and `--http` port: ASCII digits within bounds, else one line
naming the setting (the CLI review: "²" gave int()'s own message, naming nothing; "٣" was
taken as 3; a run timeout of 1e12 seconds started a server whose every call failed)."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from toolhost._mcp.config import ConfigError, ServeConfig, http_config
from toolhost._mcp.server import parse_http_address
from toolhost._model.settings import Settings


@pytest.mark.parametrize("value", ["²", "٣", "1" * 5000, "0", "-1", "1e3"])
def test_a_whole_number_setting_is_ascii_digits_or_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        http_config(Settings({"TOOLHOST_HTTP_MAX_BODY_BYTES": value}), "127.0.0.1", 8765, [],
                    fetch=lambda url: b"", now=lambda: 0.0, monotonic=lambda: 0.0)
    line = str(refused.value)
    assert line.startswith("TOOLHOST_HTTP_MAX_BODY_BYTES must be a whole number of at least 1")
    assert "\n" not in line and len(line) < 200


@pytest.mark.parametrize("name", ["TOOLHOST_MCP_RUN_TIMEOUT_S",
                                  "TOOLHOST_MCP_ELICITATION_TIMEOUT_S"])
@pytest.mark.parametrize("value", ["1e12", "2592001", "inf", "1e400", "nan", "0"])
def test_a_seconds_setting_is_at_most_thirty_days(name: str, value: str) -> None:
    """The elicitation's wait too: "inf" or 1e400 waited for a user's answer forever."""
    with pytest.raises(ConfigError, match=rf"^{name} must be a positive "
                                          r"number of seconds, at most 2592000 \(30 days\)"):
        ServeConfig.from_settings(Settings({name: value}), [])
    assert ServeConfig.from_settings(Settings({name: "2592000"}), []) is not None


def test_an_empty_elicitation_timeout_is_its_default() -> None:
    """Set empty, as every other seconds setting of serve's: the default, not a refusal."""
    config = ServeConfig.from_settings(
        Settings({"TOOLHOST_MCP_ELICITATION_TIMEOUT_S": " "}), [])
    assert config.elicitation_timeout_s == 300.0


@pytest.mark.parametrize("value", ["127.0.0.1:٣٣٣٣", "127.0.0.1:²", "127.0.0.1:000008765"])
def test_an_http_port_is_ascii_digits(value: str) -> None:
    with pytest.raises(ValueError, match="--http expects HOST:PORT"):
        parse_http_address(value)
