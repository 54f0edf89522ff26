"""workspace.write_text through the pipeline: hard gate 12, exact bytes, created, the
description's lifetime sentence, and the failures."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost import Principal, ToolExecutionContext, ToolValidationError, Trust
from toolhost._host import Host
from toolhost._workspace import WorkspaceHandle
from toolhost_workspace.write_text import SPEC, write_text
from workspace_support import Call, make_host, remove_tree


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


def test_a_run_that_wrote_the_deepest_path_is_discarded(host: Host) -> None:
    run = host.start_run()  # a fresh workspace of its own, which end_run must remove
    root = run.workspace.root
    try:
        assert host.invoke_sync("workspace.write_text",
                                {"path": "/".join(["a"] * 2048), "content": "x"}, run=run).ok
        host.end_run(run)
        assert not root.exists()
    finally:
        remove_tree(root)


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
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert outcome.content == "The arguments do not match the tool's input schema."
    assert not (root / "big.txt").exists()


def test_content_at_the_limit_is_written(call: Call, root: Path) -> None:
    outcome = call("workspace.write_text", path="big.txt", content="é" * 1048576)
    assert outcome.ok and (root / "big.txt").stat().st_size == 2 * 1048576


@pytest.mark.parametrize("arguments", [{"path": "x"}, {"content": "x"}, {"path": "x",
                         "content": "y", "mode": "append"}, {"path": 1, "content": "y"}])
def test_malformed_arguments_are_schema_failures(host: Host, call: Call,
                                                 arguments: dict[str, object]) -> None:
    outcome = call("workspace.write_text", **arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"


def test_the_body_refuses_a_lone_surrogate_as_an_argument_error(root: Path) -> None:
    # A JSON string can carry \ud800, which is not text and has no UTF-8 form.
    context = ToolExecutionContext(run_id="r", principal=Principal("p"),
                                   workspace=WorkspaceHandle(root))
    with pytest.raises(ToolValidationError):
        write_text({"path": "s.txt", "content": "a\ud800b"}, context)
    assert os.listdir(root) == []


def test_a_lone_surrogate_through_the_pipeline_is_a_validation_failure(call: Call) -> None:
    outcome = call("workspace.write_text", path="s.txt", content="a\ud800b")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"


# ---------------------------------------------------------------------------- the description


def test_the_description_says_the_workspace_is_a_cache() -> None:
    text = SPEC.description
    assert "The workspace is a cache" in text
    assert "discarded when the run finishes or pauses" in text
    assert "artifact.export is the only way a file reaches the owner" in text


# ---------------------------------------------------------------------------- property


@settings(max_examples=60, deadline=None)
@given(content=st.text(st.characters(codec="utf-8"), max_size=200))
def test_any_content_round_trips(tmp_path_factory: pytest.TempPathFactory,
                                 content: str) -> None:
    base = tmp_path_factory.mktemp("write-property")
    (base / "root").mkdir()
    with make_host(base / "data") as host:
        run = host.start_run(workspace=base / "root")
        wrote = host.invoke_sync("workspace.write_text", {"path": "p", "content": content},
                                 run=run)
        read = host.invoke_sync("workspace.read_text", {"path": "p"}, run=run)
    assert (base / "root" / "p").read_bytes() == content.encode("utf-8")
    if "\x00" in content:
        # A NUL is text in a JSON string, but a file holding one is binary to the reader.
        assert read.failure is not None
        assert read.failure.reason_code == "tool.invalid_arguments.not_text"
    else:
        assert read.content == content
        assert wrote.structured is not None and read.structured is not None
        assert wrote.structured["checksum"] == read.structured["checksum"]
