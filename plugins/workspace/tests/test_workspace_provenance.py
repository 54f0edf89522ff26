"""Hard gate 14 and the provenance rule: only a file this run's tools wrote reads back as
INTERNAL_TOOL, and a listing is INTERNAL_TOOL only when every entry it returns is.

Everything goes through the pipeline, so the trust asserted is the effective trust: the lower
of the spec's INTERNAL_TOOL and what the tool returned (step 11).
"""

from __future__ import annotations

import os
from pathlib import Path

from toolhost import Trust
from toolhost.testing import Harness
from workspace_support import Call

INTERNAL, UNTRUSTED = Trust.INTERNAL_TOOL, Trust.EXTERNAL_UNTRUSTED


def test_gate_14_a_md_written_b_md_placed(call: Call, root: Path) -> None:
    (root / "b.md").write_bytes(b"# placed by the fixture\n")
    assert call("workspace.write_text", path="a.md", content="# written by the run\n").ok

    a = call("workspace.read_text", path="a.md")
    b = call("workspace.read_text", path="b.md")
    listing = call("workspace.list_files")

    assert (a.ok, a.output_trust) == (True, INTERNAL)
    assert (b.ok, b.output_trust) == (True, UNTRUSTED)
    assert listing.structured is not None
    assert [e["path"] for e in listing.structured["entries"]] == ["a.md", "b.md"]
    assert listing.output_trust is UNTRUSTED


def test_a_listing_of_only_tool_written_files_is_internal(call: Call, root: Path) -> None:
    call("workspace.write_text", path="one.md", content="1")
    call("workspace.write_text", path="two.md", content="2")
    listing = call("workspace.list_files")
    assert [e["path"] for e in listing.structured["entries"]] == ["one.md", "two.md"]  # type: ignore[index]
    assert listing.output_trust is INTERNAL


def test_an_empty_listing_is_internal(call: Call) -> None:
    # Nothing in it came from disk: no name a third party chose reaches the model.
    assert call("workspace.list_files").output_trust is INTERNAL


def test_a_directory_entry_has_no_provenance(call: Call) -> None:
    # write_text creates "docs", but the handle stamps files, not directories, so a listing
    # that returns the directory's name is untrusted; listing inside it is not.
    call("workspace.write_text", path="docs/a.md", content="x")
    assert call("workspace.list_files").output_trust is UNTRUSTED
    assert call("workspace.list_files", path="docs").output_trust is INTERNAL


def test_reads_never_establish_provenance(call: Call, root: Path) -> None:
    (root / "b.md").write_bytes(b"placed")
    for _ in range(3):
        assert call("workspace.read_text", path="b.md").output_trust is UNTRUSTED


def test_a_tool_written_file_changed_outside_the_tools_is_untrusted(
    call: Call, root: Path
) -> None:
    call("workspace.write_text", path="a.md", content="mine")
    assert call("workspace.read_text", path="a.md").output_trust is INTERNAL
    (root / "a.md").write_bytes(b"someone else's, and longer")
    assert call("workspace.read_text", path="a.md").output_trust is UNTRUSTED
    assert call("workspace.list_files").output_trust is UNTRUSTED


def test_a_file_replaced_by_rename_is_untrusted(call: Call, root: Path) -> None:
    call("workspace.write_text", path="a.md", content="mine")
    (root / "other").write_bytes(b"mine")  # same bytes, same size: a different file
    os.replace(root / "other", root / "a.md")
    assert call("workspace.read_text", path="a.md").output_trust is UNTRUSTED


def test_writing_a_placed_file_makes_it_tool_written(call: Call, root: Path) -> None:
    (root / "b.md").write_bytes(b"placed")
    call("workspace.write_text", path="b.md", content="now the run's")
    assert call("workspace.read_text", path="b.md").output_trust is INTERNAL


def test_another_runs_writes_do_not_establish_this_runs_reads(
    toolhost_host: Harness, root: Path
) -> None:
    writer = toolhost_host.start_run(workspace=root)
    assert toolhost_host.call("workspace.write_text", {"path": "a.md", "content": "x"},
                              run=writer).ok
    reader = toolhost_host.start_run(workspace=root)
    read = toolhost_host.call("workspace.read_text", {"path": "a.md"}, run=reader)
    assert (read.ok, read.output_trust) == (True, UNTRUSTED)
