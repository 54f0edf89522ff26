"""An operator's workspace directory (``toolhost call --workspace``, TOOLHOST_MCP_WORKSPACE)
never holds, and is never inside, the data directory or toolhost.toml's directory: the
workspace tools write there (``write_text`` needs no approval under the default policy), and
the host runs what those directories hold at its next start (the validators' cache, D256;
the gateway's commands)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from toolhost._composition import Settings, UsageError
from toolhost._mcp.config import ServeConfig
from toolhost._model.workspace_root import workspace_refusal
from toolhost._testing.cli import run_toolhost

WRITE = json.dumps({"path": ".local/share/toolhost/cache/validators.json", "content": "{}"})


def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A home directory, and the environment of a toolhost that keeps everything at its
    defaults under it: the data directory ~/.local/share/toolhost, the file
    ~/.config/toolhost/toolhost.toml."""
    home = tmp_path / "home"
    home.mkdir()
    return home, {"HOME": str(home), "TOOLHOST_DATA_DIR": "", "XDG_DATA_HOME": "",
                  "XDG_CONFIG_HOME": ""}


def _settings(**env: str) -> Settings:
    return Settings(env={"TOOLHOST_CONFIG": "", **env})


def _refused(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_call_refuses_a_home_directory_that_holds_the_default_data_directory(
        tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    data = home / ".local" / "share" / "toolhost"
    result = run_toolhost("call", "workspace.write_text", "--workspace", str(home), "--args",
                          WRITE, data_dir=tmp_path / "unused", plugins="toolhost-workspace",
                          env=env)
    line = _refused(result)
    assert line == (
        f"toolhost: --workspace {str(home)!r} holds the data directory ({str(data)!r}), "
        "where a tool's write could change what the host runs at its next start: name a "
        "directory that neither holds it nor is inside it")
    # The tool never ran: the cache, if the host wrote one, is still the host's own.
    cache = data / "cache" / "validators.json"
    assert not cache.exists() or cache.read_text() != "{}"


def test_call_refuses_the_data_directory_and_a_directory_inside_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    inside = data / "plugins"
    inside.mkdir(parents=True)
    for given, relation in ((data, "is"), (inside, "is inside")):
        result = run_toolhost("call", "math.calculate", "--args", '{"expression": "1+1"}',
                              "--workspace", str(given), data_dir=data, plugins="toolhost-math")
        assert _refused(result).startswith(
            f"toolhost: --workspace {str(given)!r} {relation} the data directory "), relation


def test_call_refuses_a_directory_that_holds_where_toolhost_toml_is_read(
        tmp_path: Path) -> None:
    # The XDG default is refused before the file exists: a tool could create it.
    home, env = _home(tmp_path)
    env["TOOLHOST_DATA_DIR"] = str(tmp_path / "data")
    result = run_toolhost("call", "workspace.write_text", "--workspace", str(home), "--args",
                          json.dumps({"path": ".config/toolhost/toolhost.toml",
                                      "content": '[mcp.servers.x]\ncommand = "/bin/sh"\n'}),
                          data_dir=tmp_path / "data", plugins="toolhost-workspace", env=env)
    assert _refused(result).startswith(
        f"toolhost: --workspace {str(home)!r} holds the directory of toolhost.toml "
        f"({str(home / '.config' / 'toolhost')!r})")
    assert not (home / ".config" / "toolhost" / "toolhost.toml").exists()


def test_the_file_toolhost_config_names_is_guarded_too(tmp_path: Path) -> None:
    etc = tmp_path / "etc" / "toolhost"
    etc.mkdir(parents=True)
    config = etc / "toolhost.toml"
    config.write_text("")
    config.chmod(0o600)
    settings = _settings(TOOLHOST_CONFIG=str(config), TOOLHOST_DATA_DIR=str(tmp_path / "data"),
                         HOME=str(tmp_path / "home"))
    assert workspace_refusal("--workspace", str(tmp_path / "etc"), settings) == (
        f"--workspace {str(tmp_path / 'etc')!r} holds the directory of toolhost.toml "
        f"({str(etc)!r}), where a tool's write could change what the host runs at its next "
        "start: name a directory that neither holds it nor is inside it")
    # A link named as the file: the directory it lies in is guarded as well as the link's.
    real = tmp_path / "real"
    real.mkdir()
    (real / "t.toml").write_text("")
    (etc / "link.toml").symlink_to(real / "t.toml")
    linked = _settings(TOOLHOST_CONFIG=str(etc / "link.toml"),
                       TOOLHOST_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"))
    assert workspace_refusal("--workspace", str(real), linked) is not None


def test_links_are_resolved_on_both_sides(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    settings = _settings(TOOLHOST_DATA_DIR=str(home / "data"), HOME=str(tmp_path / "h2"))
    # The workspace named through a link to the home directory.
    (tmp_path / "alias").symlink_to(home)
    assert workspace_refusal("W", str(tmp_path / "alias"), settings) is not None
    # The data directory named through a link that lies in the workspace: a tool could
    # replace the link, and the host would then read a directory of the tool's making.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "d").symlink_to(tmp_path / "elsewhere")
    through = _settings(TOOLHOST_DATA_DIR=str(tmp_path / "ws" / "d"), HOME=str(tmp_path / "h2"))
    assert workspace_refusal("W", str(tmp_path / "ws"), through) == (
        f"W {str(tmp_path / 'ws')!r} holds the data directory "
        f"({str(tmp_path / 'ws' / 'd')!r}), where a tool's write could change what the host "
        "runs at its next start: name a directory that neither holds it nor is inside it")
    # The root of the filesystem holds everything.
    assert workspace_refusal("W", "/", settings) is not None


def test_a_directory_beside_them_is_a_workspace(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "ws").mkdir()
    (tmp_path / "data-ws").mkdir()  # a shared prefix of names is not containment
    settings = _settings(TOOLHOST_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"))
    assert workspace_refusal("W", str(tmp_path / "ws"), settings) is None
    assert workspace_refusal("W", str(tmp_path / "data-ws"), settings) is None
    result = run_toolhost("call", "workspace.write_text", "--workspace", str(tmp_path / "ws"),
                          "--args", '{"path": "n.md", "content": "hi"}',
                          data_dir=tmp_path / "data", plugins="toolhost-workspace")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ws" / "n.md").read_text() == "hi"


def test_the_servers_workspace_setting_is_refused_the_same_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # The default data directory is the process's own (~/.local/share/toolhost).
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    settings = _settings(TOOLHOST_MCP_WORKSPACE=str(home), HOME=str(home), TOOLHOST_DATA_DIR="",
                         XDG_DATA_HOME="", XDG_CONFIG_HOME="")
    with pytest.raises(UsageError) as caught:
        ServeConfig.from_settings(settings, [])
    assert str(caught.value).startswith(
        f"TOOLHOST_MCP_WORKSPACE {str(home)!r} holds the data directory "
        f"({str(home / '.local' / 'share' / 'toolhost')!r}), ")
    fine = tmp_path / "project"
    fine.mkdir()
    config = ServeConfig.from_settings(
        _settings(TOOLHOST_MCP_WORKSPACE=str(fine), HOME=str(home), TOOLHOST_DATA_DIR=""), [])
    assert config.workspace == fine


def test_serve_stops_at_its_start_with_the_line_and_exit_2(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    result = run_toolhost("serve", data_dir=tmp_path / "unused", plugins="toolhost-math",
                          env={**env, "TOOLHOST_MCP_WORKSPACE": str(home)}, timeout=120)
    assert _refused(result).startswith(
        f"toolhost: TOOLHOST_MCP_WORKSPACE {str(home)!r} holds the data directory ")
    assert os.path.isdir(home)


_TRUSTS = "where a tool's write could change whom the host trusts"
_RUNS = "where a tool's write could change what the host runs at its next start"
_READS = "where a tool could read or change the setting the host reads from it"


_GATEWAY = "a path the gateway's server 'up' is started with"


@pytest.mark.parametrize(("table", "what", "named", "risk"), [
    ('[http]\ntokens_file = "{ws}/tokens.toml"\n',
     "the token file TOOLHOST_HTTP_TOKENS_FILE", "ws/tokens.toml", _TRUSTS),
    ('[host]\nca_bundle = "{ws}/roots.pem"\n',
     "the trust roots TOOLHOST_CA_BUNDLE", "ws/roots.pem", _TRUSTS),
    ('[mcp.servers.up]\ncommand = "{ws}/bin/server"\n', _GATEWAY, "ws/bin/server", _RUNS),
    ('[mcp.servers.up]\ncommand = "python3"\nargs = ["-u", "{ws}/bin/server"]\n',
     _GATEWAY, "ws/bin/server", _RUNS),
    # A directory the server runs from (uv --directory PROJECT run server.py), in either
    # spelling, and a script named relative to toolhost.toml.
    ('[mcp.servers.up]\ncommand = "uv"\nargs = ["--directory", "{ws}", "run", "s.py"]\n',
     _GATEWAY, "ws", _RUNS),
    ('[mcp.servers.up]\ncommand = "uv"\nargs = ["--directory={ws}/bin", "run", "s.py"]\n',
     _GATEWAY, "ws/bin", _RUNS),
    ('[mcp.servers.up]\ncommand = "python3"\nargs = ["../ws/bin/server"]\n',
     _GATEWAY, "etc/../ws/bin/server", _RUNS),
    # Relative to toolhost.toml, as the reference is read.
    ('[mcp.servers.up]\ncommand = "python3"\nenv = {{ API_KEY = {{ file = "../ws/key" }} }}\n',
     "a file toolhost.toml refers to", "etc/../ws/key", _READS),
    # A plugin's table, whether or not that plugin is installed and has read it yet.
    ('[plugins.toolhost-media]\ntensorscale_api_key = {{ file = "{ws}/key" }}\n',
     "a file toolhost.toml refers to", "ws/key", _READS),
])
def test_a_workspace_may_not_hold_a_file_the_host_trusts_runs_or_reads_a_secret_from(
        tmp_path: Path, table: str, what: str, named: str, risk: str) -> None:
    # D428: the token file is read again when it changes (a write mints a token), the trust
    # roots vouch for every outbound HTTPS server, the gateway runs its servers' files, and
    # a referenced file is a secret the workspace tools would read out to the model.
    ws, etc = tmp_path / "ws", tmp_path / "etc"
    (ws / "bin").mkdir(parents=True)
    etc.mkdir()
    for name in ("tokens.toml", "roots.pem", "bin/server", "key"):
        (ws / name).write_text("")
    config = etc / "toolhost.toml"
    config.write_text(table.format(ws=ws))
    config.chmod(0o600)
    settings = Settings.from_environ({"TOOLHOST_CONFIG": str(config), "HOME": str(tmp_path),
                                      "TOOLHOST_DATA_DIR": str(tmp_path / "data")})
    relation = "is" if named == "ws" else "holds"
    assert workspace_refusal("W", str(ws), settings) == (
        f"W {str(ws)!r} {relation} {what} ({str(tmp_path / named)!r}), {risk}: name a "
        "directory that neither holds it nor is inside it")
    # A directory beside the workspace is one.
    (tmp_path / "other").mkdir()
    assert workspace_refusal("W", str(tmp_path / "other"), settings) is None


def test_the_token_file_named_in_the_environment_is_guarded_too(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    settings = _settings(TOOLHOST_HTTP_TOKENS_FILE=str(tmp_path / "ws" / "t.toml"),
                         TOOLHOST_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    refusal = workspace_refusal("W", str(tmp_path / "ws"), settings)
    assert refusal is not None and refusal.startswith(
        f"W {str(tmp_path / 'ws')!r} holds the token file TOOLHOST_HTTP_TOKENS_FILE ")


def test_a_secret_referenced_from_the_workspace_never_reaches_the_model(tmp_path: Path) -> None:
    # Before D428, workspace.read_text printed the gateway's API key to the caller.
    ws, etc = tmp_path / "ws", tmp_path / "etc"
    ws.mkdir()
    etc.mkdir()
    (ws / "key").write_text("s3cret-key-material\n")
    config = etc / "toolhost.toml"
    config.write_text('[mcp.servers.up]\ncommand = "python3"\nenabled = false\n'
                      f'env = {{ API_KEY = {{ file = "{ws / "key"}" }} }}\n')
    config.chmod(0o600)
    result = run_toolhost("call", "workspace.read_text", "--workspace", str(ws), "--args",
                          '{"path": "key"}', data_dir=tmp_path / "data",
                          plugins="toolhost-workspace", env={"TOOLHOST_CONFIG": str(config)})
    assert _refused(result).startswith(
        f"toolhost: --workspace {str(ws)!r} holds a file toolhost.toml refers to ")
    assert "s3cret" not in result.stdout + result.stderr


def test_a_gateway_command_no_file_could_have_is_not_a_place(tmp_path: Path) -> None:
    # A NUL in a command (TOML's "\u0000") names no file: realpath would raise on it.
    (tmp_path / "etc").mkdir()
    (tmp_path / "ws").mkdir()
    config = tmp_path / "etc" / "toolhost.toml"
    config.write_text('[mcp.servers.up]\ncommand = "/x/a\\u0000b"\nargs = ["\\u0000"]\n')
    config.chmod(0o600)
    settings = Settings.from_environ({"TOOLHOST_CONFIG": str(config), "HOME": str(tmp_path),
                                      "TOOLHOST_DATA_DIR": str(tmp_path / "data")})
    assert workspace_refusal("W", str(tmp_path / "ws"), settings) is None


def test_a_link_followed_by_dot_dot_is_resolved_as_the_kernel_does(tmp_path: Path) -> None:
    # /opt/link/../tokens.toml with /opt/link -> ws/sub opens ws/tokens.toml; as text, the
    # `..` would drop the link and name opt/tokens.toml.
    (tmp_path / "ws" / "sub").mkdir(parents=True)
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt" / "link").symlink_to(tmp_path / "ws" / "sub")
    settings = _settings(TOOLHOST_HTTP_TOKENS_FILE=str(tmp_path / "opt/link/../tokens.toml"),
                         TOOLHOST_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "h"))
    refusal = workspace_refusal("W", str(tmp_path / "ws"), settings)
    assert refusal is not None and " holds the token file " in refusal


@pytest.mark.parametrize("where", ["passfile", "default", "environment"])
def test_the_files_the_database_is_reached_with_are_guarded(tmp_path: Path, where: str) -> None:
    # libpq reads the record's password from a passfile (~/.pgpass by default): a workspace
    # holding it would show the model the password without an approval.
    ws = tmp_path / "ws"
    ws.mkdir()
    url = "postgresql://app@127.0.0.1/th"
    env = {"TOOLHOST_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path / "h"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    if where == "passfile":
        env["TOOLHOST_DATABASE_URL"] = f"{url}?passfile={ws}/pass"
    elif where == "environment":
        env.update(TOOLHOST_DATABASE_URL=url, PGSSLKEY=str(ws / "client.key"))
    else:
        env.update(TOOLHOST_DATABASE_URL=url, HOME=str(ws))
    refusal = workspace_refusal("W", str(ws), _settings(**env))
    assert refusal is not None and " a file the database is reached with " in refusal


def test_the_aws_credentials_are_guarded_when_artifacts_are_on_s3(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    elsewhere = {"HOME": str(home), "TOOLHOST_DATA_DIR": str(tmp_path / "data"),
                 "XDG_CONFIG_HOME": str(tmp_path / "config")}
    settings = _settings(TOOLHOST_ARTIFACT_STORE="s3://b/p", **elsewhere)
    refusal = workspace_refusal("W", str(home), settings)
    assert refusal is not None and " a file the artifact store is reached with " in refusal
    # Without S3 the same home is fine (the data directory and toolhost.toml are elsewhere).
    assert workspace_refusal("W", str(home), _settings(**elsewhere)) is None


_PLUGIN = "where a tool's write could change what the plugin runs or reads"


def test_a_workspace_may_not_hold_the_bubblewrap_the_sandbox_runs(tmp_path: Path) -> None:
    # D464: a model's unapproved workspace.write_text replaced a bwrap kept in the workspace,
    # and the next sandbox call (or the readiness probe of `check`) ran it outside any
    # namespace. Set in the environment or in the plugin's table alike.
    ws = tmp_path / "ws"
    (ws / "bin").mkdir(parents=True)
    bwrap = ws / "bin" / "bwrap"
    bwrap.write_text("#!/bin/sh\n")
    bwrap.chmod(0o755)
    line = (f"toolhost: --workspace {str(ws)!r} holds the path toolhost-sandbox's "
            f"TOOLHOST_SANDBOX_BWRAP names ({str(bwrap)!r}), {_PLUGIN}: name a directory that "
            "neither holds it nor is inside it")

    def listed(workspace: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return run_toolhost("call", "workspace.list_files", "--workspace", str(workspace),
                            "--args", "{}", data_dir=tmp_path / "data",
                            plugins="toolhost-workspace,toolhost-sandbox", env=env)

    assert _refused(listed(ws, TOOLHOST_SANDBOX_BWRAP=str(bwrap))) == line
    (tmp_path / "etc").mkdir()
    config = tmp_path / "etc" / "toolhost.toml"
    config.write_text(f'[plugins.toolhost-sandbox]\nbwrap = "{bwrap}"\n')
    config.chmod(0o600)
    assert _refused(listed(ws, TOOLHOST_CONFIG=str(config))) == line
    # A directory beside it is a workspace; the setting's own file is the plugin's to check.
    (tmp_path / "other").mkdir()
    result = listed(tmp_path / "other", TOOLHOST_SANDBOX_BWRAP=str(bwrap))
    assert result.returncode == 0, result.stderr


def test_the_servers_workspace_may_not_hold_a_plugins_path_either(tmp_path: Path) -> None:
    from toolhost import SettingSpec

    (tmp_path / "ws").mkdir()
    settings = _settings(TOOLHOST_MCP_WORKSPACE=str(tmp_path / "ws"), HOME=str(tmp_path),
                         TOOLHOST_DATA_DIR=str(tmp_path / "data"),
                         FX_TOOL=str(tmp_path / "ws" / "tool"))
    declared = {"fx-plugin": (SettingSpec(name="FX_TOOL", type="path", description="a tool"),)}
    with pytest.raises(UsageError) as caught:
        ServeConfig.from_settings(settings, [], declared=declared)
    assert str(caught.value) == (
        f"TOOLHOST_MCP_WORKSPACE {str(tmp_path / 'ws')!r} holds the path fx-plugin's FX_TOOL "
        f"names ({str(tmp_path / 'ws' / 'tool')!r}), {_PLUGIN}: name a directory that neither "
        "holds it nor is inside it")
    # Another type of setting names no place.
    text = {"fx-plugin": (SettingSpec(name="FX_TOOL", type="text", description="a word"),)}
    assert ServeConfig.from_settings(settings, [], declared=text).workspace == tmp_path / "ws"
