"""A run of plain spaces in a name pads a false extension away from the real one: a client
shows ``r.pdf    ...`` and the file saved is an ``.exe``. Both exports refuse it, through the
host's pipeline, as D361 refuses the same padding made of other blanks."""

from __future__ import annotations

from pathlib import Path

import pytest

from artifact_support import TOOL, Call, Store
from toolhost import OutcomeStatus
from toolhost.testing import Harness
from toolhost_artifact.messages import INVALID_NAME, MESSAGES, UNSAFE_FILE_NAME

PADDED = [
    "r.pdf" + " " * 40 + ".exe",
    "r.pdf" + " " * 40 + "x.exe",  # not only before the last dot
    "two  spaces.txt",
]


@pytest.mark.parametrize("version", ["1.0.0", "2.0.0"])
@pytest.mark.parametrize("name", PADDED)
def test_a_workspace_file_padded_with_spaces_is_not_handed_over(
    host: Harness, root: Path, store: Store, name: str, version: str,
) -> None:
    run = host.start_run(workspace=root)
    (root / name).write_bytes(b"MZ\x90\x00")
    outcome = host.call(TOOL, {"path": name}, version=version, run=run)
    assert outcome.status is OutcomeStatus.FAILED, outcome.to_json()
    assert outcome.failure is not None
    assert outcome.failure.reason_code == UNSAFE_FILE_NAME
    assert outcome.content == MESSAGES[UNSAFE_FILE_NAME]
    assert "two spaces in a row" in outcome.content
    assert store.rows() == 0
    host.end_run(run)


@pytest.mark.parametrize("name", [
    "invoice.pdf" + " " * 40 + ".html",
    "invoice.pdf" + " " * 40 + "x.txt",
    "two  spaces.txt",
])
def test_content_under_a_name_padded_with_spaces_is_not_saved(
    call: Call, store: Store, name: str,
) -> None:
    outcome = call({"content": "x", "name": name})
    assert outcome.failure is not None, outcome.to_json()
    assert outcome.failure.reason_code == INVALID_NAME
    assert outcome.content == MESSAGES[INVALID_NAME]
    assert "no two spaces in a row" in outcome.content
    assert store.rows() == 0


def test_single_spaces_between_words_are_still_a_name(call: Call) -> None:
    outcome = call({"content": "x", "name": "a b c.txt"})
    assert outcome.ok, outcome.to_json()
