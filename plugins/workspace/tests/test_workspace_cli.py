"""The operator surface, as a real subprocess: ``toolhost call ... --workspace DIR`` points the
tools at real files, and a write then a read round-trips with equal checksums."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from toolhost.testing import run_toolhost


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The settings every command of the test sees (``run_toolhost`` gives it none of the
    machine's): its data directory and this plugin alone."""
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "data"), "TOOLHOST_PLUGINS": "toolhost-workspace"}


def toolhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=Path(env["TOOLHOST_DATA_DIR"]), env=env)


def test_write_then_read_round_trips_with_equal_checksums(
    env: dict[str, str], tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    content = "# Notes\nnaïve café, no trailing newline"
    wrote = toolhost(env, "call", "workspace.write_text", "--workspace", str(workspace),
                     "--args", json.dumps({"path": "notes/n.md", "content": content}), "--json")
    assert wrote.returncode == 0, wrote.stderr
    read = toolhost(env, "call", "workspace.read_text", "--workspace", str(workspace),
                    "--args", '{"path": "notes/n.md"}', "--json")
    assert read.returncode == 0, read.stderr
    w, r = json.loads(wrote.stdout), json.loads(read.stdout)
    assert w["structured"]["created"] is True
    assert w["structured"]["checksum"] == r["structured"]["checksum"]
    assert w["structured"]["byte_count"] == r["structured"]["byte_count"] == len(
        content.encode())
    assert r["content"] == content
    # Each `toolhost call` is a run of its own, and provenance is per run: the second process
    # did not write the file, so what it read is untrusted.
    assert r["output_trust"] == "EXTERNAL_UNTRUSTED"
    # The operator's directory is kept, and holds exactly the bytes written.
    assert (workspace / "notes" / "n.md").read_bytes() == content.encode()


def test_plain_output_is_what_the_model_reads(env: dict[str, str], tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.txt").write_bytes(b"hello\n")
    read = toolhost(env, "call", "workspace.read_text", "--workspace", str(workspace),
                    "--args", '{"path": "hello.txt"}')
    assert (read.returncode, read.stdout, read.stderr) == (0, "hello\n\n", "")
    listed = toolhost(env, "call", "workspace.list_files", "--workspace", str(workspace))
    assert (listed.returncode, listed.stdout) == (0, 'file "hello.txt" 6 bytes\n')


def test_a_refused_path_exits_1_with_the_static_message(
    env: dict[str, str], tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret").write_text("outside")
    result = toolhost(env, "call", "workspace.read_text", "--workspace", str(workspace),
                      "--args", '{"path": "../secret"}')
    assert (result.returncode, result.stdout) == (
        1, "The arguments do not match the tool's input schema.\n")
    assert "outside" not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_without_a_workspace_the_call_gets_a_fresh_one_that_is_discarded(
    env: dict[str, str], tmp_path: Path
) -> None:
    wrote = toolhost(env, "call", "workspace.write_text", "--args",
                     '{"path": "gone.txt", "content": "x"}')
    assert wrote.returncode == 0, wrote.stderr
    read = toolhost(env, "call", "workspace.read_text", "--args", '{"path": "gone.txt"}')
    assert (read.returncode, read.stdout) == (1, "No such path in the workspace.\n")
    leftovers = list((tmp_path / "data" / "workspaces").glob("*/*")) if (
        tmp_path / "data" / "workspaces").exists() else []
    assert leftovers == []
