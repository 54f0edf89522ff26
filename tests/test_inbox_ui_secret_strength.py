"""A TOOLHOST_HTTP_UI_SECRET shorter than 32 bytes is refused, by ``toolhost serve --http`` at
its start and by ``toolhost check``: one line naming the setting (where it was written), never
its value. Before, any secret was taken (a review's was one letter, found offline from the
login form's cookie, which anyone gets, and then signed an admin's login)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_config_file import write
from test_http_setting_pairs_named_where_written import serve_http, tokens_file

from toolhost._testing.cli import run_toolhost

TOO_SHORT = ("must be at least 32 bytes of a random string, not {n} (python3 -c 'import "
             "secrets; print(secrets.token_urlsafe(32))' makes one)\n")


def test_serve_refuses_a_short_inbox_secret_naming_it(tmp_path: Path) -> None:
    tokens = str(tokens_file(tmp_path))
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_TOKENS_FILE=tokens,
                           TOOLHOST_HTTP_UI_SECRET="hunter2")
    assert stderr == "toolhost: TOOLHOST_HTTP_UI_SECRET " + TOO_SHORT.format(n=7)
    # Counted in bytes (what signs), around spaces the setting's reading strips.
    stderr, path = serve_http(tmp_path, '[http]\nui_secret = " ' + "\u00e9" * 15 + ' "\n',
                              TOOLHOST_HTTP_TOKENS_FILE=tokens)
    assert stderr == f"toolhost: {path}:3: [http] ui_secret: " + TOO_SHORT.format(n=30)
    assert "\u00e9" not in stderr.replace(str(path), "")


def test_check_refuses_a_short_inbox_secret_and_takes_a_long_one(tmp_path: Path) -> None:
    def check(secret: str) -> tuple[int, str, str]:
        result = run_toolhost("check", data_dir=tmp_path / "data", plugins="",
                              env={"TOOLHOST_HTTP_UI_SECRET": secret}, timeout=60)
        return result.returncode, result.stdout, result.stderr

    assert check("k") == (2, "", "toolhost: TOOLHOST_HTTP_UI_SECRET " + TOO_SHORT.format(n=1))
    code, stdout, stderr = check("k" * 32)
    assert (code, stderr) == (0, ""), stderr
    assert stdout.startswith("ok: ")
    # Written in toolhost.toml: named there.
    path = write(tmp_path, '# the team\n[http]\nui_secret = "short"\n')
    result = run_toolhost("check", data_dir=tmp_path / "data", plugins="",
                          env={"TOOLHOST_CONFIG": str(path)}, timeout=60)
    assert (result.returncode, result.stderr) == (
        2, f"toolhost: {path}:3: [http] ui_secret: " + TOO_SHORT.format(n=5))
