"""Trust follows the bytes: a file this run's tools wrote exports as INTERNAL_TOOL, anything
else as EXTERNAL_UNTRUSTED, and so does the result that shows the model the file's name.

Provenance is asked before the read and again before the commit: a file changed while it was
read loses the higher trust, and the aborted first pass leaves nothing behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from artifact_support import Call, ChangingWorkspace, Store, in_run
from toolhost import Trust
from toolhost.testing import Harness, Run
from toolhost_artifact import export_file

INTERNAL, UNTRUSTED = Trust.INTERNAL_TOOL, Trust.EXTERNAL_UNTRUSTED
VERSIONS = ["1.0.0", "2.0.0"]


def trusts(call: Call, store: Store, path: str, version: str | None = None) -> tuple[Trust, Trust]:
    """(the result's effective trust, the stored artifact's trust)."""
    outcome = call({"path": path}, version=version)
    assert outcome.ok and outcome.structured is not None, outcome.to_json()
    assert outcome.output_trust is not None
    return outcome.output_trust, store.trust(outcome.structured["id"])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_the_run_wrote_is_internal(
    call: Call, run: Run, store: Store, version: str
) -> None:
    # Written through the Workspace port, as workspace.write_text does: TOOL_WRITTEN.
    run.workspace.write("notes.md", b"# mine\n")
    assert trusts(call, store, "notes.md", version) == (INTERNAL, INTERNAL)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_placed_file_is_untrusted(call: Call, root: Path, store: Store, version: str) -> None:
    # Created with plain open(): the handle has no record of it (UNKNOWN).
    with open(root / "URGENT_read_me.md", "wb") as f:
        f.write(b"placed")
    assert trusts(call, store, "URGENT_read_me.md", version) == (UNTRUSTED, UNTRUSTED)


def test_a_written_file_changed_outside_the_tools_is_untrusted(
    call: Call, run: Run, root: Path, store: Store
) -> None:
    run.workspace.write("a.md", b"mine")
    (root / "a.md").write_bytes(b"someone else's, and longer")
    assert trusts(call, store, "a.md") == (UNTRUSTED, UNTRUSTED)


def test_a_written_file_replaced_by_rename_is_untrusted(
    call: Call, run: Run, root: Path, store: Store
) -> None:
    run.workspace.write("a.md", b"mine")
    (root / "other").write_bytes(b"mine")  # same bytes and size: a different file
    os.replace(root / "other", root / "a.md")
    assert trusts(call, store, "a.md") == (UNTRUSTED, UNTRUSTED)


def test_another_runs_writes_do_not_make_this_runs_export_internal(
    host: Harness, call: Call, root: Path, store: Store
) -> None:
    writer = host.start_run(workspace=root)
    writer.workspace.write("a.md", b"x")
    assert trusts(call, store, "a.md") == (UNTRUSTED, UNTRUSTED)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_changed_mid_read_loses_the_higher_trust(
    host: Harness, run: Run, root: Path, store: Store, monkeypatch: pytest.MonkeyPatch,
    version: str,
) -> None:
    monkeypatch.setattr(export_file, "CHUNK_SIZE", 4)
    run.workspace.write("a.md", b"written by the run")

    def change() -> None:  # an outsider appends while the export is between chunks
        with open(root / "a.md", "ab") as f:
            f.write(b" and then someone else")

    changing = ChangingWorkspace(run.workspace, change)
    outcome = host.call("artifact.export", {"path": "a.md"}, version=version,
                        run=in_run(run, changing))

    assert outcome.ok and outcome.structured is not None, outcome.to_json()
    assert outcome.output_trust is UNTRUSTED
    assert store.trust(outcome.structured["id"]) is UNTRUSTED
    # Read twice: the first pass (begun at INTERNAL_TOOL) was aborted and published nothing;
    # the second exported the file as it now is.
    assert changing.reads == 2
    assert store.read(outcome.structured["id"]) == b"written by the run and then someone else"
    assert (store.rows(), len(store.files())) == (1, 1)


def test_exporting_the_written_file_again_after_a_placed_twin_keeps_the_lower_trust(
    call: Call, run: Run, root: Path, store: Store
) -> None:
    # Identical bytes and name first arrive untrusted; the writer's identity rule returns the
    # same artifact for the tool-written copy and never raises its trust.
    (root / "a.md").write_bytes(b"same")
    first = call({"path": "a.md"})
    run.workspace.write("a.md", b"same")
    second = call({"path": "a.md"})
    assert first.structured is not None and second.structured is not None
    assert second.structured["id"] == first.structured["id"]
    assert store.trust(first.structured["id"]) is UNTRUSTED
