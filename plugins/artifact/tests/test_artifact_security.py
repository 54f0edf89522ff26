"""A path the workspace handle refuses reaches the model as the host's one validation failure,
through either version, and nothing is read or stored: the tool never catches WorkspaceEscape.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from artifact_support import SECRET, Call, Store
from toolhost import OutcomeStatus

VERSIONS = ["1.0.0", "2.0.0"]
SCHEMA = "tool.invalid_arguments.schema"
SCHEMA_MESSAGE = "The arguments do not match the tool's input schema."


@pytest.fixture
def placed(root: Path, base: Path) -> Path:
    """Links inside the root: to the secret beside it, and to a file inside it; and a file
    with a second (hard) link outside the root."""
    (root / "inside.txt").write_bytes(b"inside")
    os.symlink(base / "secret", root / "to_secret")
    os.symlink("inside.txt", root / "to_inside")
    os.symlink(base, root / "up")
    (root / "hard.txt").write_bytes(b"hard")
    os.link(root / "hard.txt", base / "hard-outside.txt")
    return root


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", [
    "../secret", "/etc/passwd", "./inside.txt", "a/../inside.txt", "inside.txt/", "to_secret",
    "to_inside", "up/secret", "hard.txt", "inside.txt\x00",
])
def test_a_refused_path_is_the_hosts_validation_failure(
    call: Call, placed: Path, store: Store, version: str, path: str
) -> None:
    outcome = call({"path": path}, version=version)
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.content) == (SCHEMA, SCHEMA_MESSAGE)
    assert SECRET.decode() not in outcome.content
    assert (store.rows(), store.files()) == (0, [])

