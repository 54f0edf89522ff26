"""artifact.export against an outsider sharing the workspace (from a security review): what
they can do between the provenance check and the read, and special files that must never be
read or waited on."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from artifact_support import Store, in_run
from toolhost import OutcomeStatus, Trust
from toolhost.testing import Harness, Run, SwappingWorkspace

VERSIONS = ["1.0.0", "2.0.0"]


def _export_through_the_double(host: Harness, run: Run, root: Path, store: Store, version: str,
                               *, swapping: bool) -> tuple[bytes, Trust, Trust]:
    """Export d/a.md, the run's own file, through SwappingWorkspace; (the bytes exported, their
    stored trust, the outcome's trust)."""
    run.workspace.write("d/a.md", b"written by the run")
    (root / "theirs").mkdir()
    (root / "theirs" / "a.md").write_bytes(b"an outsider's bytes")
    outcome = host.call("artifact.export", {"path": "d/a.md"}, version=version,
                        run=in_run(run, SwappingWorkspace(run.workspace, root, swapping=swapping)))
    assert outcome.ok and outcome.structured is not None, outcome.to_json()
    assert outcome.output_trust is not None
    exported_id = outcome.structured["id"]
    return store.read(exported_id), store.trust(exported_id), outcome.output_trust


@pytest.mark.parametrize("version", VERSIONS)
def test_bytes_read_from_a_swapped_in_directory_are_not_internal(
    host: Harness, run: Run, root: Path, store: Store, version: str,
) -> None:
    exported, trust, told = _export_through_the_double(host, run, root, store, version,
                                                       swapping=True)
    # Either the run's own bytes at INTERNAL_TOOL, or whatever was read at EXTERNAL_UNTRUSTED:
    # never the outsider's bytes passed off as the run's.
    assert (exported, trust) != (b"an outsider's bytes", Trust.INTERNAL_TOOL)
    if exported != b"written by the run":
        assert told is Trust.EXTERNAL_UNTRUSTED


@pytest.mark.parametrize("version", VERSIONS)
def test_the_same_read_with_no_outsider_keeps_the_runs_trust(
    host: Harness, run: Run, root: Path, store: Store, version: str,
) -> None:
    # The control that gives the test above its teeth: the double by itself lowers nothing
    # (as a generator, hiding the chunks' provenance, it lowered every read's trust).
    exported, trust, _ = _export_through_the_double(host, run, root, store, version,
                                                    swapping=False)
    assert (exported, trust) == (b"written by the run", Trust.INTERNAL_TOOL)


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_fifo_or_socket_is_refused_without_waiting(
    host: Harness, run: Run, root: Path, store: Store, kind: str,
) -> None:
    # A FIFO with no writer would block a plain open forever; a socket cannot be read at all.
    listener = None
    if kind == "fifo":
        os.mkfifo(root / "special")
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(root / "special"))
    try:
        outcome = host.call("artifact.export", {"path": "special"}, run=run)
    finally:
        if listener is not None:
            listener.close()
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert (store.rows(), store.files()) == (0, [])
