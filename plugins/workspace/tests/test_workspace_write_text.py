"""workspace.write_text through the pipeline: hard gate 12, exact bytes, created, the
description's lifetime sentence, and the failures."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost import Trust
from toolhost.testing import Harness, Run
from toolhost_workspace.write_text import SPEC
from workspace_support import PLUGINS, Call, UnavailableWorkspace, in_run, remove_tree

SCHEMA = "tool.invalid_arguments.schema"
SCHEMA_MESSAGE = "The arguments do not match the tool's input schema."


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------- hard gate 12


def test_gate_12_writing_twice_is_idempotent(call: Call, root: Path) -> None:
    first = call("workspace.write_text", path="notes.md", content="# Notes\nsame bytes\n")
    second = call("workspace.write_text", path="notes.md", content="# Notes\nsame bytes\n")
    assert first.ok and second.ok
    assert first.structured is not None and second.structured is not None
    assert first.structured["checksum"] == second.structured["checksum"]
    assert first.structured["byte_count"] == second.structured["byte_count"] == 19
    assert (first.structured["created"], second.structured["created"]) == (True, False)
    # One file: no second copy, and no temporary file left behind by the atomic write.
    assert os.listdir(root) == ["notes.md"]
    assert (root / "notes.md").read_bytes() == b"# Notes\nsame bytes\n"


# ---------------------------------------------------------------------------- exact bytes


@pytest.mark.parametrize(
    "content",
    ["", "no trailing newline", "crlf\r\nkept\r\n", "lone\rcr", "\ufeffa BOM the model wrote",
     "naïve 日本語 😀", "\x00 is text in a JSON string"],
)
def test_the_bytes_written_are_the_strict_utf8_of_the_content(
    call: Call, root: Path, content: str
) -> None:
    outcome = call("workspace.write_text", path="f.txt", content=content)
    data = content.encode("utf-8")
    assert outcome.ok
    assert (root / "f.txt").read_bytes() == data  # no BOM, no translation, no added newline
    assert outcome.structured == {"path": "f.txt", "byte_count": len(data),
                                  "checksum": sha(data), "created": True}


def test_the_checksum_equals_the_readers(call: Call, root: Path) -> None:
    wrote = call("workspace.write_text", path="r/t.txt", content="round trip é\n")
    read = call("workspace.read_text", path="r/t.txt")
    assert wrote.structured is not None and read.structured is not None
    assert wrote.structured["checksum"] == read.structured["checksum"]
    assert wrote.structured["byte_count"] == read.structured["byte_count"] == 14
    assert read.content == "round trip é\n"


def test_created_is_true_only_when_the_path_did_not_exist(call: Call, root: Path) -> None:
    (root / "placed.txt").write_bytes(b"by the fixture")
    replaced = call("workspace.write_text", path="placed.txt", content="new")
    assert replaced.structured is not None and replaced.structured["created"] is False
    assert (root / "placed.txt").read_bytes() == b"new"
    assert replaced.content.startswith('Replaced "placed.txt": 3 bytes, sha256:')
    fresh = call("workspace.write_text", path="fresh.txt", content="x")
    assert fresh.structured is not None and fresh.structured["created"] is True
    assert fresh.content == f'Created "fresh.txt": 1 byte, {sha(b"x")}.'


def test_different_content_changes_checksum_and_size(call: Call) -> None:
    a = call("workspace.write_text", path="f", content="one")
    b = call("workspace.write_text", path="f", content="three")
    assert a.structured is not None and b.structured is not None
    assert a.structured["checksum"] != b.structured["checksum"]
    assert (a.structured["byte_count"], b.structured["byte_count"]) == (3, 5)


def test_missing_parent_directories_are_created_inside_the_root(call: Call, root: Path) -> None:
    outcome = call("workspace.write_text", path="a/b/c/d.txt", content="deep")
    assert outcome.ok
    assert (root / "a" / "b" / "c" / "d.txt").read_bytes() == b"deep"


def test_the_output_is_tool_trusted(call: Call) -> None:
    outcome = call("workspace.write_text", path="t.txt", content="x")
    assert outcome.output_trust is Trust.INTERNAL_TOOL


def test_the_deepest_path_the_schema_allows_is_written(call: Call, root: Path) -> None:
    path = "/".join(["a"] * 2048)  # 4095 characters: 2047 directories and a file
    try:
        outcome = call("workspace.write_text", path=path, content="deep")
        assert outcome.ok, outcome.to_json()
        read = call("workspace.read_text", path=path)
        assert read.ok and read.content == "deep"
    finally:
        remove_tree(root / "a")


def _shallow(top: Path, depth: int) -> list[Path]:
    """Every path under ``top`` at most ``depth`` levels down, without recursion (a deep tree
    left behind would otherwise overflow the stack of the search looking for it)."""
    found: list[Path] = []
    level = [top]
    for _ in range(depth):
        level = [Path(e.path) for d in level for e in os.scandir(d)
                 if not e.is_symlink()]
        found += level
        level = [p for p in level if p.is_dir()]
    return found


def test_a_run_that_wrote_the_deepest_path_is_discarded(tmp_path: Path) -> None:
    # A fresh workspace (no workspace= given) lives under the host's data directory, and
    # end_run discards it. Where exactly is the host's business: the search is a few levels
    # of the whole data directory, and it is shown to find the tree before the run ends.
    data = tmp_path / "data"
    with Harness.over(PLUGINS, data_dir=data) as harness:
        run = harness.start_run()
        try:
            assert harness.call("workspace.write_text",
                                {"path": "/".join(["a"] * 2048), "content": "x"}, run=run).ok
            assert [p for p in _shallow(data, 6) if p.name == "a"]
            harness.end_run(run)
            assert [p for p in _shallow(data, 6) if p.name == "a"] == []
        finally:
            for left in [p for p in _shallow(data, 6) if p.name == "a"]:
                remove_tree(left.parent)


# ---------------------------------------------------------------------------- failures


def test_a_directory_is_not_a_file(call: Call, root: Path) -> None:
    (root / "d").mkdir()
    outcome = call("workspace.write_text", path="d", content="x")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.not_a_file"
    assert outcome.content == "That path is a directory."
    assert (root / "d").is_dir() and os.listdir(root / "d") == []


def test_a_parent_that_is_a_file_is_no_such_path(call: Call, root: Path) -> None:
    (root / "notes.md").write_bytes(b"kept")
    outcome = call("workspace.write_text", path="notes.md/x", content="x")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.not_found.no_such_path"
    assert (root / "notes.md").read_bytes() == b"kept"


def test_over_long_content_is_a_schema_failure_and_writes_nothing(
    call: Call, root: Path
) -> None:
    outcome = call("workspace.write_text", path="big.txt", content="x" * 1048577)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == SCHEMA
    assert outcome.content == SCHEMA_MESSAGE
    assert not (root / "big.txt").exists()


def test_content_at_the_limit_is_written(call: Call, root: Path) -> None:
    outcome = call("workspace.write_text", path="big.txt", content="é" * 1048576)
    assert outcome.ok and (root / "big.txt").stat().st_size == 2 * 1048576


@pytest.mark.parametrize("arguments", [{"path": "x"}, {"content": "x"}, {"path": "x",
                         "content": "y", "mode": "append"}, {"path": 1, "content": "y"}])
def test_malformed_arguments_are_schema_failures(call: Call,
                                                 arguments: dict[str, object]) -> None:
    outcome = call("workspace.write_text", **arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == SCHEMA


@pytest.mark.parametrize("content", ["a\ud800b", "\udfff", "ok \ud83d"])
def test_a_lone_surrogate_in_content_is_a_schema_failure(
    call: Call, root: Path, content: str
) -> None:
    # A JSON string can carry \ud800, which is not text and has no UTF-8 form. Step 4 refuses
    # it, so the body (which encodes strictly and does not check again) never sees it.
    outcome = call("workspace.write_text", path="s.txt", content=content)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == SCHEMA
    assert outcome.content == outcome.failure.message == SCHEMA_MESSAGE
    assert os.listdir(root) == []


# ---------------------------------------------------------------------------- the description


def test_the_description_says_the_workspace_is_a_cache() -> None:
    text = SPEC.description
    assert "The workspace is a cache" in text
    assert "discarded when the run finishes or pauses" in text
    assert "artifact.export is the only way a file reaches the owner" in text


# ---------------------------------------------------------------------------- property


@pytest.fixture(scope="module")
def prop_host() -> Iterator[Harness]:
    # One host for every example (the kit's toolhost_host is per test, and hypothesis runs
    # many examples in one test); its data directory is a temporary one, removed on close.
    with Harness.over(PLUGINS) as harness:
        yield harness


@settings(max_examples=60)
@given(content=st.text(st.characters(codec="utf-8"), max_size=200))
def test_any_content_round_trips(prop_host: Harness, tmp_path_factory: pytest.TempPathFactory,
                                 content: str) -> None:
    root = tmp_path_factory.mktemp("write-property")
    run = prop_host.start_run(workspace=root)
    wrote = prop_host.call("workspace.write_text", {"path": "p", "content": content}, run=run)
    read = prop_host.call("workspace.read_text", {"path": "p"}, run=run)
    prop_host.end_run(run)
    assert (root / "p").read_bytes() == content.encode("utf-8")
    if "\x00" in content:
        # A NUL is text in a JSON string, but a file holding one is binary to the reader.
        assert read.failure is not None
        assert read.failure.reason_code == "tool.invalid_arguments.not_text"
    else:
        assert read.content == content
        assert wrote.structured is not None and read.structured is not None
        assert wrote.structured["checksum"] == read.structured["checksum"]


# ---------------------------------------------------------------------------- reliability


@pytest.mark.parametrize("name", ["漢" * 80, "漢" * 85, "a" + "漢" * 84, "😀" * 63 + "abc"],
                         ids=["cjk-240-bytes", "cjk-255-bytes", "cut-inside", "four-byte"])
def test_a_name_of_up_to_255_bytes_is_written_and_read_back(
    call: Call, root: Path, name: str
) -> None:
    """Defect 1: an 80-character CJK name (240 bytes) failed as tool.internal.unexpected."""
    wrote = call("workspace.write_text", path=f"d/{name}", content="名前")
    assert wrote.ok, wrote.to_json()
    assert wrote.structured is not None and wrote.structured["created"] is True
    read = call("workspace.read_text", path=f"d/{name}")
    assert read.ok and read.content == "名前"
    assert os.listdir(root / "d") == [name]  # no temp file left


def test_a_read_only_file_is_not_replaced(call: Call, root: Path) -> None:
    target = root / "ro.md"
    target.write_bytes(b"the operator's")
    target.chmod(0o444)
    outcome = call("workspace.write_text", path="ro.md", content="the model's")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == SCHEMA
    assert outcome.content == SCHEMA_MESSAGE
    assert outcome.failure.detail == {"workspace": "file is read-only"}
    assert target.read_bytes() == b"the operator's"
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    assert os.listdir(root) == ["ro.md"]


def test_a_replaced_file_keeps_its_mode(call: Call, root: Path) -> None:
    target = root / "run.sh"
    target.write_bytes(b"#!/bin/sh\n")
    target.chmod(0o750)
    outcome = call("workspace.write_text", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert outcome.ok and outcome.structured is not None
    assert outcome.structured["created"] is False
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def test_a_full_workspace_is_unavailable_and_retryable(
    toolhost_host: Harness, run: Run, root: Path
) -> None:
    broken = UnavailableWorkspace(run.workspace, "no space is left for the workspace")
    outcome = toolhost_host.call("workspace.write_text", {"path": "a/b.md", "content": "x"},
                                 run=in_run(run, broken))
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.upstream_unavailable.workspace_unavailable"
    assert outcome.failure.retryable is True
    assert outcome.content == ("The workspace cannot be used right now (no space or no file "
                               "handles left). Try again later.")
    assert outcome.failure.detail == {"problem": "no space is left for the workspace"}
    assert os.listdir(root) == []


def test_a_write_the_filesystem_refuses_leaves_no_directory_behind(
    call: Call, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC once the parents exist: the tool fails with the declared reason, and the
    directories this write created are gone again."""
    real_write = os.write

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    outcome = call("workspace.write_text", path="new/deeper/notes.md", content="x")
    monkeypatch.setattr(os, "write", real_write)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.upstream_unavailable.workspace_unavailable"
    assert outcome.failure.detail == {"problem": "no space is left for the workspace"}
    assert os.listdir(root) == []
