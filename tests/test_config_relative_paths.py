"""A path setting written in toolhost.toml is relative to the file's directory, as its
``{ file = "PATH" }`` references are: one shared file names one data directory (one record)
whatever directory a command starts in. From the environment a relative path stays the
process's, as a variable always was (D268)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from toolhost import SettingSpec
from toolhost._model import host_settings
from toolhost._model.settings import SettingError, Settings
from toolhost._testing.cli import toolhost_command

PATH_SETTINGS = [spec.name for spec in host_settings.HOST_SETTINGS if spec.type == "path"]


def write(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "toolhost.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def line_of(name: str, value: str) -> str:
    return f"[{host_settings.group_of(name)}]\n{host_settings.key_of(name)} = {value}\n"


@pytest.mark.parametrize("name", PATH_SETTINGS)
def test_a_relative_path_in_the_file_is_relative_to_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    path = write(tmp_path / "etc", line_of(name, '"state/x"'))
    seen = set()
    for cwd in ("a", "b"):
        (tmp_path / cwd).mkdir()
        monkeypatch.chdir(tmp_path / cwd)
        seen.add(Settings.from_environ({"TOOLHOST_CONFIG": str(path)}).get(name))
    assert seen == {str(tmp_path / "etc" / "state" / "x")}


def test_a_relative_config_path_still_gives_an_absolute_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "etc", '[host]\ndata_dir = "../state"\n')
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_environ({"TOOLHOST_CONFIG": "etc/toolhost.toml"})
    assert settings.data_dir == tmp_path / "etc" / ".." / "state"
    assert settings.data_dir.is_absolute()


def test_an_absolute_an_empty_and_a_home_path_in_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(tmp_path, '[host]\ndata_dir = "/srv/th"\nca_bundle = "~/roots.pem"\n'
                           '[http]\ntokens_file = ""\n')
    settings = Settings.from_environ({"TOOLHOST_CONFIG": str(path)})
    assert settings.get("TOOLHOST_DATA_DIR") == "/srv/th"
    assert settings.get("TOOLHOST_CA_BUNDLE") == str(tmp_path / "home" / "roots.pem")
    # Empty is the default, as from the environment: no directory is made up for it.
    assert settings.get("TOOLHOST_HTTP_TOKENS_FILE") == ""
    write(tmp_path, '[host]\nca_bundle = "~no-such-user-th/roots.pem"\n')
    with pytest.raises(SettingError, match=rf"^{path}:2: \[host\] ca_bundle: names "
                                           r"'~no-such-user-th/roots.pem', whose home"):
        Settings.from_environ({"TOOLHOST_CONFIG": str(path)})


def test_a_relative_path_from_the_environment_is_the_processs(tmp_path: Path) -> None:
    path = write(tmp_path, '[host]\ndata_dir = "state"\n')
    settings = Settings.from_environ({"TOOLHOST_CONFIG": str(path), "TOOLHOST_DATA_DIR": "mine"})
    assert settings.data_dir == Path("mine")
    # Text that is not a path is taken as written.
    write(tmp_path, '[mcp]\nprincipal = "state"\n')
    assert Settings.from_environ({"TOOLHOST_CONFIG": str(path)}).get(
        "TOOLHOST_MCP_PRINCIPAL") == "state"


def test_a_plugins_path_setting_is_relative_to_the_file_too(tmp_path: Path) -> None:
    path = write(tmp_path, '[plugins.fake-dist]\nbinary = "bin/tool"\nlabel = "bin/tool"\n')
    specs = [SettingSpec(name="FAKE_BINARY", key="binary", type="path", description="x"),
             SettingSpec(name="FAKE_LABEL", key="label", type="text", description="x")]
    settings = Settings.from_environ({"TOOLHOST_CONFIG": str(path)}).with_plugin_settings(
        "fake-dist", specs)
    assert settings.get("FAKE_BINARY") == str(tmp_path / "bin" / "tool")
    assert settings.get("FAKE_LABEL") == "bin/tool"


def test_one_shared_file_is_one_record_from_any_directory(tmp_path: Path) -> None:
    """The review's journey: a call paused from one directory is pending from another."""
    path = write(tmp_path / "etc", '[host]\ndata_dir = "state"\n[policy]\n'
                                   '"NONE/LOW" = "approval"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_CONFIG=str(path), TOOLHOST_PLUGINS="toolhost-math")

    def toolhost(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / cwd).mkdir(exist_ok=True)
        return subprocess.run([*toolhost_command(), *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path / cwd, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)

    paused = toolhost("a", "call", "math.calculate", "--args", '{"expression": "1+1"}')
    assert paused.returncode == 3, paused.stderr
    invocation = paused.stdout.split()[0]
    pending = toolhost("b", "pending")
    assert pending.returncode == 0, pending.stderr
    assert pending.stdout.startswith(invocation)
    assert (tmp_path / "etc" / "state").is_dir()
    assert not (tmp_path / "a" / "state").exists() and not (tmp_path / "b" / "state").exists()
