"""Exporting a workspace file (1.0.0, and 2.0.0's path): exact bytes, the ref, identity within
a run, the ceiling, and the failures. Each behaviour both versions share runs on both."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from artifact_support import Call, Store
from toolhost import OutcomeStatus
from toolhost.testing import CancellationEvent, Harness, Run
from toolhost_artifact import export_file

VERSIONS = ["1.0.0", "2.0.0"]
BINARY = bytes(range(256)) * 3 + b"\x00\x89PNG\r\n\x1a\n"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_ref_describes_the_exact_bytes(
    call: Call, run: Run, root: Path, store: Store, version: str
) -> None:
    data = "naïve,café\r\n1,2\n".encode()
    (root / "docs").mkdir()
    (root / "docs" / "report.csv").write_bytes(data)

    outcome = call({"path": "docs/report.csv"}, version=version)

    assert outcome.ok, outcome.to_json()
    ref = outcome.structured
    assert ref is not None
    assert sorted(ref) == ["byte_count", "checksum", "id", "media_type", "name"]
    # Named after the last path component; a text type without a charset (encoding unknown).
    assert (ref["name"], ref["media_type"]) == ("report.csv", "text/csv")
    assert (ref["byte_count"], ref["checksum"]) == (len(data), sha256(data))
    assert store.read(ref["id"]) == data
    assert store.origin_and_run(ref["id"]) == ("EXPORT", run.id)


def test_the_text_lines_exact(call: Call, root: Path) -> None:
    (root / "r.txt").write_bytes(b"x")
    # A double quote is no longer a name the rule hands over (D361): Windows refuses it.
    (root / "say 'hi'.md").write_bytes(b"12345")

    v1 = call({"path": "r.txt"}, version="1.0.0")
    v2 = call({"path": "say 'hi'.md"}, version="2.0.0")

    assert v1.structured is not None and v2.structured is not None
    assert v1.content == f'Exported "r.txt": 1 byte, text/plain, artifact {v1.structured["id"]}.'
    assert v2.content == (
        'Exported "say \'hi\'.md" (5 bytes, text/markdown). It is attached to your reply.')


@pytest.mark.parametrize("version", VERSIONS)
def test_a_binary_file_round_trips(call: Call, root: Path, store: Store, version: str) -> None:
    (root / "image.PNG").write_bytes(BINARY)
    outcome = call({"path": "image.PNG"}, version=version)
    assert outcome.structured is not None
    assert outcome.structured["media_type"] == "image/png"
    assert outcome.structured["checksum"] == sha256(BINARY)
    assert store.read(outcome.structured["id"]) == BINARY


def test_an_empty_file_exports(call: Call, root: Path, store: Store) -> None:
    (root / "empty").write_bytes(b"")
    outcome = call({"path": "empty"})
    assert outcome.structured is not None
    assert (outcome.structured["byte_count"], outcome.structured["media_type"]) == (
        0, "application/octet-stream")
    assert store.read(outcome.structured["id"]) == b""


@pytest.mark.parametrize("version", VERSIONS)
def test_the_same_file_twice_is_one_artifact(
    call: Call, root: Path, store: Store, version: str
) -> None:
    (root / "a.bin").write_bytes(BINARY)
    first = call({"path": "a.bin"}, version=version)
    rows, files = store.rows(), store.files()

    second = call({"path": "a.bin"}, version=version)

    assert first.ok and second.ok
    assert second.structured == first.structured
    assert (rows, len(files)) == (1, 1)
    assert (store.rows(), store.files()) == (rows, files)


def test_both_versions_share_the_identity(call: Call, root: Path, store: Store) -> None:
    (root / "a.txt").write_bytes(b"same")
    v1 = call({"path": "a.txt"}, version="1.0.0")
    v2 = call({"path": "a.txt"}, version="2.0.0")
    assert v1.structured == v2.structured
    assert store.rows() == 1


def test_different_bytes_under_the_same_name_are_a_new_artifact(
    call: Call, root: Path, store: Store
) -> None:
    (root / "a.txt").write_bytes(b"first")
    first = call({"path": "a.txt"})
    (root / "a.txt").write_bytes(b"second")
    second = call({"path": "a.txt"})
    assert first.structured is not None and second.structured is not None
    assert first.structured["id"] != second.structured["id"]
    assert (store.rows(), len(store.files())) == (2, 2)
    assert store.read(second.structured["id"]) == b"second"


def test_another_run_exporting_the_same_file_gets_its_own_artifact(
    host: Harness, call: Call, root: Path, store: Store
) -> None:
    (root / "a.txt").write_bytes(b"same")
    mine = call({"path": "a.txt"})
    other = host.start_run(workspace=root)
    try:
        theirs = host.call("artifact.export", {"path": "a.txt"}, run=other)
    finally:
        host.end_run(other)
    assert mine.structured is not None and theirs.structured is not None
    assert mine.structured["id"] != theirs.structured["id"]
    # Two records, one content file: the store addresses content by its hash.
    assert (store.rows(), len(store.files())) == (2, 1)


# ------------------------------------------------------------------------ the ceiling


@pytest.mark.parametrize("version", VERSIONS)
def test_past_the_ceiling_is_too_large_and_nothing_is_published(
    call: Call, root: Path, store: Store, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setattr(export_file, "EXPORT_CEILING", 10)
    monkeypatch.setattr(export_file, "CHUNK_SIZE", 4)  # the crossing write is a later chunk
    (root / "big.bin").write_bytes(b"x" * 11)

    outcome = call({"path": "big.bin"}, version=version)

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        "tool.invalid_arguments.file_too_large", False)
    assert outcome.content == "That file is larger than the 64 MiB an export may hold."
    # No artifact, and no staged upload left behind.
    assert (store.rows(), store.files()) == (0, [])


def test_exactly_the_ceiling_exports(
    call: Call, root: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_file, "EXPORT_CEILING", 10)
    monkeypatch.setattr(export_file, "CHUNK_SIZE", 4)
    (root / "ten.bin").write_bytes(b"0123456789")
    outcome = call({"path": "ten.bin"})
    assert outcome.structured is not None
    assert outcome.structured["byte_count"] == 10
    assert store.rows() == 1


# ------------------------------------------------------------------------ failures


@pytest.mark.parametrize("version", VERSIONS)
def test_a_missing_path(call: Call, store: Store, version: str) -> None:
    outcome = call({"path": "nope.txt"}, version=version)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.content) == (
        "tool.not_found.no_such_file", "No file at that path in the workspace.")
    assert store.rows() == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_a_directory(call: Call, root: Path, store: Store, version: str) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_bytes(b"a")
    outcome = call({"path": "docs"}, version=version)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.content) == (
        "tool.invalid_arguments.is_directory", "That path is a directory. Export one file at a time.")
    assert (store.rows(), store.files()) == (0, [])


def test_a_cancelled_call_publishes_nothing(
    host: Harness, run: Run, root: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_file, "CHUNK_SIZE", 2)
    (root / "a.txt").write_bytes(b"abcdef")
    cancellation = CancellationEvent()
    cancellation.cancel()
    context = host.context(run=run, cancellation=cancellation)
    with pytest.raises(export_file.ExportCancelled):
        host.run_body("artifact.export", {"path": "a.txt"}, context)
    assert (store.rows(), store.files()) == (0, [])


# ------------------------------------------------------------------------ the file's name


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", [".bashrc", "report\u202efdp.exe", "zero\u200bwidth.txt",
                                  "\ufeffbom.txt", "line\u2028break.txt"])
def test_a_file_whose_name_breaks_the_name_rule_is_not_handed_over(
    call: Call, root: Path, store: Store, version: str, name: str
) -> None:
    # Regression (issue #26): a path export kept names the content export refuses, as the
    # attachment's name (report<RLO>fdp.exe shows as reportexe.pdf).
    (root / name).write_bytes(b"data")
    outcome = call({"path": name}, version=version)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.unsafe_file_name"
    assert name not in outcome.content
    assert (store.rows(), store.files()) == (0, [])
