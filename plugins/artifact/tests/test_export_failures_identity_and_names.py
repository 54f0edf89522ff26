"""artifact.export's failures, identity and names (each test failed before its fix): a local
store whose disk fails is the host's retryable ARTIFACT_STORE failure as an object store's is
(D359); the identity rule never hands one conversation or principal another's artifact
(D360); a path export's file name cannot hide its extension or break on the owner's machine
(D361); and an export a client cannot fetch whole is not said to be attached (D364)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from artifact_support import TOOL, Store
from toolhost import MAX_ATTACHED_BYTES as ATTACH_LIMIT
from toolhost import ArtifactRef, OutcomeStatus
from toolhost.testing import Harness, file_size_limit
from toolhost_artifact import names
from toolhost_artifact.result import attached_line


@pytest.mark.parametrize("version", ["1.0.0", "2.0.0"])
def test_a_disk_that_fails_the_export_is_the_retryable_store_failure(
    host: Harness, root: Path, store: Store, version: str,
) -> None:
    run = host.start_run(workspace=root)
    (root / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    host.call(TOOL, {"content": "warm up"}, run=run)  # the database made and warmed up
    with file_size_limit(2 * 1024 * 1024):
        outcome = host.call(TOOL, {"path": "big.bin"}, version=version, run=run)
    assert outcome.failure is not None, outcome.to_json()
    assert outcome.failure.reason_code == "tool.upstream_unavailable.artifact_store"
    assert outcome.failure.retryable is True  # artifact.export is IDEMPOTENT
    assert "unexpectedly" not in outcome.content
    assert store.rows() == 1  # the warm-up's only
    # The disk back, the same call succeeds.
    assert host.call(TOOL, {"path": "big.bin"}, version=version, run=run).ok
    host.end_run(run)


def test_one_run_id_in_two_conversations_gives_each_its_own_artifact(
    host: Harness, root: Path,
) -> None:
    first = host.start_run(workspace=root, run_id="R1", conversation_id="C1")
    a = host.call(TOOL, {"content": "hello", "name": "a.txt"}, run=first)
    second = host.start_run(workspace=root, run_id="R1", conversation_id="C2")
    b = host.call(TOOL, {"content": "hello", "name": "a.txt"}, run=second)
    assert a.structured is not None and b.structured is not None
    assert a.structured["id"] != b.structured["id"]
    record = host.host.pipeline.artifacts.get(b.structured["id"])
    assert record.conversation_id == "C2"
    # C2 can use the ref it was handed.
    host.host.artifact_resolver().resolve(
        b.structured["id"], principal_id=second.principal.id, run_id=second.id,
        conversation_id="C2")
    # And the same export again in C1 is still C1's one artifact.
    again = host.call(TOOL, {"content": "hello", "name": "a.txt"}, run=first)
    assert again.structured is not None and again.structured["id"] == a.structured["id"]


def test_one_run_id_for_two_principals_gives_each_its_own_artifact(
    host: Harness, root: Path,
) -> None:
    alice = host.start_run(workspace=root, run_id="R1", principal="alice")
    a = host.call(TOOL, {"content": "hello", "name": "a.txt"}, run=alice)
    bob = host.start_run(workspace=root, run_id="R1", principal="bob")
    b = host.call(TOOL, {"content": "hello", "name": "a.txt"}, run=bob)
    assert a.structured is not None and b.structured is not None
    assert a.structured["id"] != b.structured["id"]
    assert host.host.pipeline.artifacts.get(b.structured["id"]).principal_id == "bob"


@pytest.mark.parametrize("name", [
    "invoice.pdf" + "\u3164" * 40 + ".exe",  # HANGUL FILLER: draws as a blank
    "invoice.pdf" + "\u2000" * 40 + ".exe",  # EN QUAD
    "CON", "NUL.txt", "report.txt.", "report.txt ", 'a<b>:c|d?*".txt',
])
def test_a_workspace_file_whose_name_hides_or_breaks_is_not_handed_over(
    host: Harness, root: Path, store: Store, name: str,
) -> None:
    assert names.problem(name) is not None
    run = host.start_run(workspace=root)
    (root / name).write_bytes(b"MZ\x90\x00")
    outcome = host.call(TOOL, {"path": name}, run=run)
    assert outcome.status is OutcomeStatus.FAILED, outcome.to_json()
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.unsafe_file_name"
    assert store.rows() == 0
    host.end_run(run)


def test_an_export_no_client_can_fetch_whole_is_not_said_to_be_attached() -> None:
    checksum = "sha256:" + "0" * 64
    small = ArtifactRef(id="a1", name="r.bin", media_type="application/octet-stream",
                        byte_count=ATTACH_LIMIT, checksum=checksum)
    large = ArtifactRef(id="a2", name="r.bin", media_type="application/octet-stream",
                        byte_count=ATTACH_LIMIT + 1, checksum=checksum)
    assert attached_line(small).endswith("It is attached to your reply.")
    assert attached_line(large) == (
        f'Exported "r.bin" ({ATTACH_LIMIT + 1} bytes, application/octet-stream). It is too '
        "large to attach to your reply (over 32 MiB): it is stored as artifact a2, which the "
        "person can ask the host's operator for (toolhost artifacts get a2).")
    assert "attached to your reply" not in attached_line(large)
