"""Settings that carry a store's or a server's address: a password in a gateway server's ``url``
follows D269 as ``[host] database_url`` does; a TOOLHOST_DATABASE_URL that is not a URL is a
wrong setting (exit 2, D253); TOOLHOST_ARTIFACT_STORE's refusal quotes no credential."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from toolhost._model.settings import SettingError, Settings
from toolhost._testing.cli import run_toolhost

SECRET_LINE = ('a secret written in a file every user can read: reference it '
               '({ env = "NAME" } or { file = "PATH" }) or chmod o-r ')


def _write(tmp_path: Path, text: str, mode: int) -> Path:
    path = tmp_path / "toolhost.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def _servers(path: Path, **environ: str) -> dict[str, str | None]:
    config = Settings.from_environ({"TOOLHOST_CONFIG": str(path), **environ}).config
    assert config is not None
    return {server.name: server.url for server in config.mcp_servers}


@pytest.mark.parametrize("url", ["http://u:hunter2@127.0.0.1:1/mcp",
                                 "https://tracker.example.com/mcp?access_token=tok123"])
def test_a_gateway_url_with_a_password_is_refused_inline_from_a_world_readable_file(
        tmp_path: Path, url: str) -> None:
    path = _write(tmp_path, f'[mcp.servers.x]\nurl = "{url}"\n', 0o644)
    with pytest.raises(SettingError) as caught:
        _servers(path)
    assert str(caught.value) == f"{path}:2: [mcp.servers.x] url: {SECRET_LINE}{path}"
    assert "hunter2" not in str(caught.value) and "tok123" not in str(caught.value)
    # The operator insists: a file other users cannot read may hold it.
    path.chmod(0o640)
    assert _servers(path) == {"x": url}


def test_a_gateway_url_may_be_a_reference_and_one_without_a_password_is_inline(
        tmp_path: Path) -> None:
    (tmp_path / "url.txt").write_text("https://u:pw@tracker.example.com/mcp\n")
    path = _write(tmp_path, '[mcp.servers.a]\nurl = { env = "TRACKER_URL" }\n'
                            '[mcp.servers.b]\nurl = { file = "url.txt" }\n'
                            '[mcp.servers.c]\nurl = "https://tracker.example.com/mcp"\n', 0o644)
    assert _servers(path, TRACKER_URL="http://u:pw@127.0.0.1:9/mcp") == {
        "a": "http://u:pw@127.0.0.1:9/mcp", "b": "https://u:pw@tracker.example.com/mcp",
        "c": "https://tracker.example.com/mcp"}
    # What a reference stands for is a URL too, and is not quoted back when it is not one.
    with pytest.raises(SettingError) as caught:
        _servers(path, TRACKER_URL="ftp://u:pw@host/")
    assert str(caught.value) == (
        f"{path}:2: [mcp.servers.a] url: must be an http:// or https:// URL (or a reference: "
        '{ env = "NAME" } or { file = "PATH" })')


def _pending(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost("pending", data_dir=tmp_path / "data", plugins="", env=env,
                        drop=("AWS_", "PG"))


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                    reason="the PostgreSQL client is not installed")
@pytest.mark.parametrize("value", ["mysql://u@127.0.0.1/db", "not a url at all ==="])
def test_a_database_url_that_is_not_one_is_a_wrong_setting(tmp_path: Path, value: str) -> None:
    result = _pending(tmp_path, TOOLHOST_DATABASE_URL=value)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", "toolhost: TOOLHOST_DATABASE_URL is neither a postgresql:// URL nor a libpq "
               "conninfo string\n")


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                    reason="the PostgreSQL client is not installed")
def test_a_database_that_cannot_be_reached_is_still_exit_1(tmp_path: Path) -> None:
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    result = _pending(tmp_path, TOOLHOST_DATABASE_URL="postgresql://u:pw@127.0.0.1:1/db")
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.splitlines()) == 1 and "pw" not in result.stderr


@pytest.mark.parametrize(("value", "shown"), [
    ("s3://AKIAEXAMPLE:wJalrXUtnFEMIsecret@my-bucket/x", "s3://***@my-bucket/x"),
    # An S3 secret key often holds a "/", which ends a URL's userinfo as a parser reads it.
    ("s3://AKIAEXAMPLE:wJalr/XUtnFEMIsecret@my-bucket/x", "s3://***@my-bucket/x"),
    ("s3://Bad_Bucket/x?secret_key=wJalrXUtnFEMIsecret", "s3://Bad_Bucket/x?secret_key=***"),
])
def test_the_artifact_stores_refusal_quotes_no_credential(tmp_path: Path, value: str,
                                                          shown: str) -> None:
    result = _pending(tmp_path, TOOLHOST_ARTIFACT_STORE=value)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == (
        f"toolhost: TOOLHOST_ARTIFACT_STORE={shown!r} is not s3://bucket or s3://bucket/prefix "
        "(a bucket name is 3 to 63 lower-case letters, digits, '.' or '-')\n")
    assert "wJalr" not in result.stderr
