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
