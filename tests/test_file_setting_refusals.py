"""A value written in toolhost.toml is read as the reference declares it and, when its reader
refuses it, named where the operator wrote it: ``PATH:LINE: [table] key: ...``, as every other
problem of the file is (D268), never by an environment variable nobody set. A number setting
takes a fraction wherever it is read (``[http] drain_s = 30.0`` stopped ``serve --http``)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import free_port
from test_mcp_server import Served, stderr_line

from toolhost._mcp.config import ConfigError, HttpConfig, ServeConfig, http_config
from toolhost._model import host_settings
from toolhost._model.settings import SettingError, Settings
from toolhost._testing.cli import run_toolhost

FIRST_PARTY = "toolhost-math"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolhost.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def from_file(path: Path, **environ: str) -> Settings:
    return Settings.from_environ({"TOOLHOST_CONFIG": str(path), **environ})


def serve_config(settings: Settings) -> ServeConfig:
    return ServeConfig.from_settings(settings, [])


def served_over_http(settings: Settings) -> HttpConfig:
    return http_config(settings, "127.0.0.1", 8765, [], fetch=lambda url: b"{}",
                       now=lambda: 0.0, monotonic=lambda: 0.0, post=lambda *a, **k: b"{}")


#: What an introspecting issuer needs, so that its cache setting is read at all.
INTROSPECTING = {"TOOLHOST_HTTP_ISSUER": "https://issuer.example",
                 "TOOLHOST_HTTP_AUDIENCE": "https://mcp.example/mcp",
                 "TOOLHOST_HTTP_JWKS_URL": "https://issuer.example/jwks",
                 "TOOLHOST_HTTP_INTROSPECTION_URL": "https://issuer.example/introspect",
                 "TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID": "toolhost",
                 "TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET": "s"}

#: Every host setting of type "number", and the seconds its reader made of the file's value.
NUMBER_READERS: dict[str, Callable[[Settings], Any]] = {
    "TOOLHOST_RECOVER_INTERVAL_S": lambda s: serve_config(s).recover_interval_s,
    "TOOLHOST_MCP_ELICITATION_TIMEOUT_S": lambda s: serve_config(s).elicitation_timeout_s,
    "TOOLHOST_MCP_RUN_TIMEOUT_S": lambda s: serve_config(s).run_timeout_s,
    "TOOLHOST_HTTP_INTROSPECTION_CACHE_S":
        lambda s: served_over_http(s).policy.introspection._cache_s,
    "TOOLHOST_HTTP_SESSION_IDLE_S": lambda s: served_over_http(s).session_idle_s,
    "TOOLHOST_HTTP_BODY_TIMEOUT_S": lambda s: served_over_http(s).policy.body_timeout_s,
    "TOOLHOST_HTTP_HEAD_TIMEOUT_S": lambda s: served_over_http(s).head_timeout_s,
    "TOOLHOST_HTTP_DRAIN_S": lambda s: served_over_http(s).drain_s,
}


def test_every_number_setting_has_its_reader_here() -> None:
    assert {spec.name for spec in host_settings.HOST_SETTINGS
            if spec.type == "number"} == set(NUMBER_READERS)


@pytest.mark.parametrize("name", sorted(NUMBER_READERS))
@pytest.mark.parametrize("written", ["2.5", "30.0"])
def test_a_number_setting_takes_what_its_type_says(tmp_path: Path, name: str,
                                                   written: str) -> None:
    """A TOML number, a fraction or a whole number written as a float (what `toolhost config`
    accepts), is the value its reader uses: the file and the reader agree."""
    table, key = host_settings.group_of(name), host_settings.key_of(name)
    path = write(tmp_path, f"[{table}]\n{key} = {written}\n")
    settings = Settings(env={**from_file(path).env, **INTROSPECTING})
    assert NUMBER_READERS[name](settings) == float(written)
    # And the same text from the environment.
    assert NUMBER_READERS[name](Settings(env={name: written, **INTROSPECTING})) == float(written)


@pytest.mark.parametrize("name", [spec.name for spec in host_settings.HOST_SETTINGS
                                  if spec.type == "integer"])
def test_an_integer_setting_refuses_a_fraction_in_the_file_at_its_line(
        tmp_path: Path, name: str) -> None:
    table, key = host_settings.group_of(name), host_settings.key_of(name)
    path = write(tmp_path, f"[{table}]\n{key} = 2.5\n")
    with pytest.raises(SettingError, match=rf"^{path}:2: \[{table}\] {key}: must be a whole "):
        from_file(path)


def _settings_property(attribute: str) -> Callable[[Settings], Any]:
    return lambda settings: getattr(settings, attribute)


#: (table, key, a value as written that its reader refuses, the reader).
REFUSED: list[tuple[str, str, str, Callable[[Settings], Any]]] = [
    ("host", "log_level", '"loud"', _settings_property("log_level")),
    ("host", "artifact_retention_days", "-1", _settings_property("artifact_retention")),
    ("host", "workspace_quota_bytes", "1", _settings_property("workspace_quota_bytes")),
    ("host", "recover_interval_s", "-1", serve_config),
    ("mcp", "elicitation", '"maybe"', serve_config),
    ("mcp", "elicitation_timeout_s", "0", serve_config),
    ("mcp", "stdio", '"threads"', serve_config),
    ("mcp", "workspace", '"/no/such/directory"', serve_config),
    ("mcp", "run_timeout_s", "-5", serve_config),
    ("mcp", "stdio_max_unanswered", "5000", serve_config),
    ("http", "drain_s", "0", served_over_http),
    ("http", "body_timeout_s", "-1", served_over_http),
    ("http", "head_timeout_s", "1e12", served_over_http),
    ("http", "session_idle_s", "0", served_over_http),
    ("http", "max_body_bytes", "0", served_over_http),
    ("http", "max_calls", "0", served_over_http),
    ("http", "max_connections", "0", served_over_http),
    ("http", "max_sessions", "0", served_over_http),
    ("http", "max_sessions_per_principal", "0", served_over_http),
    ("http", "advertise_url", '"ftp://elsewhere"', served_over_http),
]


@pytest.mark.parametrize(("table", "key", "value", "reader"), REFUSED,
                         ids=[f"{t}.{k}" for t, k, _, _ in REFUSED])
def test_a_value_from_the_file_is_refused_at_its_file_line_and_key(
        tmp_path: Path, table: str, key: str, value: str,
        reader: Callable[[Settings], Any]) -> None:
    path = write(tmp_path, f"# shared by the team\n[{table}]\n{key} = {value}\n")
    with pytest.raises((SettingError, ConfigError)) as caught:
        reader(from_file(path))
    line = str(caught.value)
    assert line.startswith(f"{path}:3: [{table}] {key}: "), line
    assert "TOOLHOST_" not in line and "\n" not in line
    # The same value set in the environment (which wins) is named by its variable.
    name = next(s.name for s in host_settings.HOST_SETTINGS
                if (host_settings.group_of(s.name), host_settings.key_of(s.name)) == (table, key))
    with pytest.raises((SettingError, ConfigError)) as caught:
        reader(from_file(path, **{name: from_file(path).env[name]}))
    assert str(caught.value).startswith(f"{name} ")


def test_a_plugins_value_is_named_by_its_own_table_and_key(tmp_path: Path) -> None:
    from toolhost import SettingSpec

    path = write(tmp_path, '[plugins.Toolhost_Demo]\nlimit = "many"\n')
    spec = SettingSpec(name="DEMO_LIMIT", type="text", key="limit", description="how many")
    settings = from_file(path).with_plugin_settings("toolhost-demo", iter([spec]))
    assert settings.get("DEMO_LIMIT") == "many"
    assert settings.named("DEMO_LIMIT") == f"{path}:2: [plugins.Toolhost_Demo] limit:"
    assert Settings(env={"DEMO_LIMIT": "many"}).named("DEMO_LIMIT") == "DEMO_LIMIT"


# ---------------------------------------------------------------------------- the commands


COMMANDS = {
    "call": ["call", "math.calculate", "--args", '{"expression": "1+1"}'],
    "check": ["check"],
    "serve": ["serve"],
    "serve --http": ["serve", "--http", "127.0.0.1:1"],
}
#: (body, the commands that read it): the host's settings refuse every command's start, the
#: server's only `serve`'s, and [http]'s only `serve --http`'s.
SHARED_FILES = [
    ('[host]\nlog_level = "loud"\n', ["call", "check", "serve", "serve --http"]),
    ("[host]\nartifact_retention_days = -1\n", ["call", "check", "serve", "serve --http"]),
    ("[host]\nworkspace_quota_bytes = 1\n", ["call", "check", "serve", "serve --http"]),
    ("[mcp]\nrun_timeout_s = -5\n", ["serve", "serve --http"]),
    ("[host]\nrecover_interval_s = -1\n", ["serve", "serve --http"]),
    ("[http]\ndrain_s = 0\n", ["serve --http"]),
    ("[http]\nmax_sessions = 0\n", ["serve --http"]),
]


@pytest.mark.parametrize(("body", "command"), [
    (body, command) for body, commands in SHARED_FILES for command in commands])
def test_each_command_names_the_file_line_and_key_it_refuses(tmp_path: Path, body: str,
                                                             command: str) -> None:
    path = write(tmp_path, f"# shared by the team\n{body}")
    table, key = body[1:].split("]")[0], body.split("\n")[1].split(" =")[0]
    result = run_toolhost(*COMMANDS[command], data_dir=tmp_path / "data", plugins=FIRST_PARTY,
                          env={"TOOLHOST_CONFIG": str(path)}, timeout=60)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.startswith(f"toolhost: {path}:3: [{table}] {key}: "), result.stderr
    assert "TOOLHOST_" not in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("written", ["30.0", "2.5"])
def test_serve_over_http_takes_a_drain_time_written_as_a_float(tmp_path: Path,
                                                               written: str) -> None:
    path = write(tmp_path, f"[http]\ndrain_s = {written}\nbody_timeout_s = {written}\n")
    served = Served(tmp_path, plugins=FIRST_PARTY, TOOLHOST_CONFIG=str(path))
    try:
        process = served.popen("--http", f"127.0.0.1:{free_port()}", stdin=subprocess.DEVNULL)
        assert stderr_line(process).startswith("toolhost: serving 1 tool at http://127.0.0.1:")
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
        assert process.returncode == 0  # serve --http ends its drain with 0 (mcp.md)
    finally:
        served.stop_leftovers()
