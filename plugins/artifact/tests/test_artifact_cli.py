"""The operator surface, as a real subprocess over the installed distribution:
``toolhost call artifact.export --workspace DIR`` exports a real file."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from toolhost.testing import run_toolhost


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The settings every command of the test sees (``run_toolhost`` gives it none of the
    machine's): its data directory and this plugin alone."""
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "data"), "TOOLHOST_PLUGINS": "toolhost-artifact"}


def toolhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=Path(env["TOOLHOST_DATA_DIR"]), env=env)


def test_call_exports_the_file(env: dict[str, str], tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data = b"\x00binary\xff bytes"
    (workspace / "a.bin").write_bytes(data)

    done = toolhost(env, "call", "artifact.export", "--workspace", str(workspace),
                    "--args", '{"path": "a.bin"}', "--json")

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["status"], outcome["version"]) == ("succeeded", "2.0.0")
    ref = outcome["structured"]
    assert {k: ref[k] for k in ("name", "media_type", "byte_count", "checksum")} == {
        "name": "a.bin", "media_type": "application/octet-stream", "byte_count": len(data),
        "checksum": "sha256:" + hashlib.sha256(data).hexdigest()}
    assert outcome["content"] == (
        'Exported "a.bin" (14 bytes, application/octet-stream). It is attached to your reply.')
    # The operator's file was only read.
    assert (workspace / "a.bin").read_bytes() == data


def test_plain_output_is_what_the_model_reads(env: dict[str, str], tmp_path: Path) -> None:
    done = toolhost(env, "call", "artifact.export", "--args",
                    '{"content": "# Report\\n", "name": "report.md"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == ('Exported "report.md" (9 bytes, text/markdown; charset=utf-8). '
                           "It is attached to your reply.\n")


def test_the_same_export_twice_in_one_run_is_one_artifact_the_operator_can_get(
        env: dict[str, str], tmp_path: Path) -> None:
    # The "done when", end to end: two commands sharing a run, then the operator's get.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data = bytes(range(256)) * 40
    (workspace / "a.txt").write_bytes(data)
    ids = []
    for _ in range(2):
        done = toolhost(env, "call", "artifact.export", "--workspace", str(workspace),
                        "--run", "run-1", "--args", '{"path": "a.txt"}', "--json")
        assert done.returncode == 0, done.stderr
        outcome = json.loads(done.stdout)
        ids.append(outcome["structured"]["id"])
        # Every file the run exported is an attachment of the run, listed beside the outcome.
        assert outcome["run_id"] == "run-1"
        assert outcome["attachments"] == [outcome["structured"]]
    assert ids[0] == ids[1]
    listed = toolhost(env, "artifacts", "list", "--run", "run-1", "--json")
    assert [a["id"] for a in json.loads(listed.stdout)] == [ids[0]]

    out = tmp_path / "out.bin"
    got = toolhost(env, "artifacts", "get", ids[0], "-o", str(out))
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == data

    # Tamper with the stored bytes (same length): get refuses and writes nothing.
    digest = hashlib.sha256(data).hexdigest()
    blob = Path(env["TOOLHOST_DATA_DIR"]) / "artifacts" / "sha256" / digest[:2] / digest[2:]
    blob.chmod(0o600)
    blob.write_bytes(b"X" + data[1:])
    refused_to = tmp_path / "refused.bin"
    refused = toolhost(env, "artifacts", "get", ids[0], "-o", str(refused_to))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert not refused_to.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.bin", "ws"]
