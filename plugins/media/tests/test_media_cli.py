"""The operator surface, as real subprocesses over the installed distribution: ``toolhost
tools`` lists the four tools only with the key, and ``toolhost call`` generates an image from
the fake TensorScale (which a thread of this test process serves)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from media_support import JPEG, KEY, PNG, FakeTensorScale, settings
from toolhost.testing import run_toolhost

FOUR = ["image.generate@1.0.0", "image.generate@1.1.0", "video.generate@1.0.0",
        "video.generate@1.1.0"]


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    """The settings every command of the test sees (``run_toolhost`` gives it none of the
    machine's): its data directory and this plugin alone."""
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "data"), "TOOLHOST_PLUGINS": "toolhost-media"}


def toolhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=Path(env["TOOLHOST_DATA_DIR"]), env=env,
                        drop=("TENSORSCALE_",))


def listed(env: dict[str, str]) -> list[str]:
    done = toolhost(env, "tools", "--json")
    assert done.returncode == 0, done.stderr
    return sorted(f"{t['name']}@{t['version']}" for t in json.loads(done.stdout))


def test_tools_lists_the_four_only_with_the_key(base_env: dict[str, str]) -> None:
    assert listed(base_env) == []
    assert listed({**base_env, "TENSORSCALE_API_KEY": KEY}) == FOUR


def test_call_generates_an_image_and_leaks_no_key(
    base_env: dict[str, str], server: FakeTensorScale, bundle: Path, tmp_path: Path
) -> None:
    env = {**base_env, **settings(server, bundle), "TOOLHOST_LOG_LEVEL": "debug"}
    done = toolhost(env, "call", "image.generate", "--args", '{"prompt": "a fox"}', "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "succeeded"
    ref = outcome["structured"]["artifact"]
    assert [a["id"] for a in outcome["attachments"]] == [ref["id"]]
    out = tmp_path / "out.png"
    got = toolhost(env, "artifacts", "get", ref["id"], "-o", str(out))
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == PNG
    for text in (done.stdout, done.stderr):
        assert KEY not in text
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_the_operator_can_generate_from_an_upload_of_its_conversation_only(
    base_env: dict[str, str], server: FakeTensorScale, bundle: Path, tmp_path: Path
) -> None:
    """The CLI's run is granted artifact.read (D-numbered in docs/decisions.md): an operator's
    upload to conversation c1 is a reference of a c1 call and unavailable to a c2 call, which
    sends nothing."""
    env = {**base_env, **settings(server, bundle)}
    image = tmp_path / "cat.jpg"
    image.write_bytes(JPEG)
    up = toolhost(env, "artifacts", "upload", str(image), "--conversation", "c1")
    assert up.returncode == 0, up.stderr
    arguments = json.dumps({"prompt": "make it blue", "reference_image_ids": [up.stdout.strip()]})
    other = toolhost(env, "call", "image.generate", "--args", arguments, "--json",
                     "--conversation", "c2")
    assert json.loads(other.stdout)["reason_code"] == "tool.not_found.reference_unavailable"
    assert server.received == []
    done = toolhost(env, "call", "image.generate", "--args", arguments, "--json",
                    "--conversation", "c1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    assert len(server.received) == 1
