"""A gateway server's ``command`` given by a relative path names the program beside
``toolhost.toml``, as every other path written in the file does (D497): a shared file starts
one program whatever directory a command is run from. A bare name is still PATH's to find, and
an absolute path is run as written."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from toolhost._model.config_file import ConfigFileError, read_config
from toolhost.testing import run_toolhost

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

UPSTREAM = Path(__file__).with_name("gateway_upstream.py")


def server_config(directory: Path, command: str) -> Path:
    """``directory``/toolhost.toml naming one stdio server ``beside`` run as ``command``."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "toolhost.toml"
    config.write_text(f'''
[mcp.servers.beside]
command = "{command}"
args = ["beside"]
connect_timeout_s = 60  # a loaded CI machine is slow to start a Python SDK server

[mcp.servers.beside.tools.lookup]
side_effect = "NONE"
risk = "LOW"
idempotency = "READ_ONLY"
''')
    return config


@pytest.mark.parametrize(("written", "runs"), [
    ("./upstream.py", "{config}/upstream.py"),
    ("bin/upstream", "{config}/bin/upstream"),
    ("../tools/upstream", "{config}/../tools/upstream"),
    ("~/bin/upstream", "{home}/bin/upstream"),
    ("/opt/upstream/server", "/opt/upstream/server"),
    ("npx", "npx"),
])
def test_a_command_given_by_a_relative_path_is_relative_to_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str, runs: str) -> None:
    """It was run as written, so ``./upstream.py`` named the working directory's file."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    config = server_config(tmp_path / "shared" / "etc", written)
    (server,) = read_config(config, {}).mcp_servers
    assert server.command == runs.format(config=config.parent, home=tmp_path / "home")


def test_a_command_under_a_home_directory_that_does_not_exist_is_one_line(
        tmp_path: Path) -> None:
    config = server_config(tmp_path, "~no_such_user_here/upstream")
    with pytest.raises(ConfigFileError) as refused:
        read_config(config, {})
    assert str(refused.value) == (
        f"{config}:3: [mcp.servers.beside] command: names '~no_such_user_here/upstream', "
        "whose home directory does not exist")


def test_a_server_beside_the_file_is_started_from_another_directory(tmp_path: Path) -> None:
    """``toolhost check``, ``call`` and ``config`` run from a directory that holds no
    ``upstream.py`` start the executable script beside toolhost.toml."""
    shared, elsewhere = tmp_path / "a", tmp_path / "b"
    config = server_config(shared, "./upstream.py")
    script = shared / "upstream.py"
    script.write_text(f"#!{sys.executable}\n{UPSTREAM.read_text()}")
    script.chmod(0o755)
    elsewhere.mkdir()
    env = {"TOOLHOST_CONFIG": str(config)}

    def toolhost(*args: str) -> str:
        done = run_toolhost(*args, data_dir=tmp_path / "data", plugins="", env=env,
                            cwd=elsewhere)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    checked = toolhost("check")
    assert "tools registered from toolhost (mcp gateway)" in checked, checked
    assert "server beside" not in checked, checked  # said only when it is unreachable
    assert toolhost("call", "mcp.beside__lookup", "--args", '{"word": "far"}') \
        .strip() == "far: a word"
    assert f"stdio {os.fspath(script)}" in toolhost("config")
