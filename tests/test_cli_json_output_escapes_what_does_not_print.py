"""Every ``--json`` output escapes what does not print by the host's one rule
(``toolhost.escaped``), as ``show`` does: a tool's output, an argument or a name comes from a
plugin or a model, and a C1 control or a direction override written raw moves the operator's
terminal or reorders the line. It is still JSON, read back to the same value. Through the real
CLI, with the fixture plugin test_cli_approvals installs as a real distribution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import toolhost
from test_cli_approvals import env, pause

from toolhost import escaped
from toolhost.testing import run_toolhost

__all__ = ["env"]  # the fixture, used by name

#: What a model may put in an argument: a direction override, a C1 CSI, a line separator, an
#: ESC sequence, a zero-width space, then text that prints.
HOSTILE = "crm://acme\u202e\u009b2J\u2028moc\x1b[2J\u200b é"


def assert_escaped_json(stdout: str) -> Any:
    """The value ``stdout`` holds, once checked to be what ``escaped`` leaves as it is."""
    assert escaped(stdout, one_line=False) == stdout, stdout
    return json.loads(stdout)


def test_approve_json_escapes_the_tools_output_and_reads_back_the_same(
    env: dict[str, Any],
) -> None:
    # Regression: common.print_json (approve, deny, call, runs, plugins, config, tools --json)
    # wrote U+202E and U+009B raw; only approvals.py's own copy escaped them.
    approved = toolhost("approve", pause(env, HOSTILE), "--json", **env)
    assert approved.returncode == 0, approved.stderr
    assert "\u202e" not in approved.stdout and "\u009b" not in approved.stdout
    assert '"content": "recorded crm://acme\\u202e\\u009b2J\\u2028moc\\u001b[2J\\u200b é"' in (
        approved.stdout)
    assert assert_escaped_json(approved.stdout)["content"] == f"recorded {HOSTILE}"


def test_artifacts_list_json_escapes_a_name_and_reads_back_the_same(tmp_path: Path) -> None:
    source, data = tmp_path / "a.txt", tmp_path / "d"
    source.write_bytes(b"x")
    uploaded = run_toolhost("artifacts", "upload", str(source), "--conversation", "c1",
                            "--name", f"{HOSTILE}.txt", data_dir=data, plugins="")
    assert uploaded.returncode == 0, uploaded.stderr
    listed = run_toolhost("artifacts", "list", "--json", data_dir=data, plugins="")
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in assert_escaped_json(listed.stdout)] == [f"{HOSTILE}.txt"]


def test_artifacts_list_json_on_a_stream_that_is_not_utf8_is_still_json(tmp_path: Path) -> None:
    # Regression (D532): on PYTHONIOENCODING=ascii the stdout wrapper wrote é as Python's
    # `\xe9` (not a JSON escape), and on latin-1 as the byte 0xE9: no JSON reader took either.
    source, data = tmp_path / "a.txt", tmp_path / "d"
    source.write_bytes(b"x")
    name = "caf\u00e9 \U0001f600.txt"
    uploaded = run_toolhost("artifacts", "upload", str(source), "--conversation", "c1",
                            "--name", name, data_dir=data, plugins="")
    assert uploaded.returncode == 0, uploaded.stderr
    for encoding in ("ascii", "latin-1"):
        listed = run_toolhost("artifacts", "list", "--json", data_dir=data, plugins="",
                              env={"PYTHONIOENCODING": encoding}, text=False)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.isascii(), listed.stdout
        assert [r["name"] for r in json.loads(listed.stdout)] == [name]
