"""What sits at an artifact's content address on disk is read only when it is a regular file:
a FIFO or a symbolic link put there (by hand, by another program) is damaged content, refused
at once, and the next write of the same bytes puts a good file back (issue #26)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_artifacts import T0, FixedClock, blob_path, write, writer_for

from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model.artifacts import ArtifactCorrupted

CONTENT = b"the quarterly numbers\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(tmp_path / "data", FixedClock(T0))
    yield s
    s.close()


def _fifo(path: Path, tmp_path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _link(path: Path, tmp_path: Path) -> None:
    # The right bytes, elsewhere: still not read through the link.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(CONTENT)
    path.unlink()
    path.symlink_to(elsewhere)


def _within(seconds: float, work: Callable[[], object]) -> object:
    """``work()``'s result, or its exception, when it ends within ``seconds``."""
    done: list[object] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # handed to the test
            done.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert done, f"still waiting after {seconds} s"
    return done[0]


@pytest.mark.parametrize("replace", [_fifo, _link], ids=["fifo", "symlink"])
def test_what_is_no_regular_file_is_refused_at_once_and_repaired_by_the_next_write(
        store: SQLiteArtifactStore, tmp_path: Path,
        replace: Callable[[Path, Path], None]) -> None:
    # Regression: a FIFO at the content address made `artifacts get` (and a write of the
    # same bytes, which checks the file there) wait for ever; a link was followed.
    ref = write(writer_for(store), content=CONTENT)
    path = blob_path(store, ref)
    replace(path, tmp_path)
    refused = _within(10, lambda: store.read(ref.id))
    assert isinstance(refused, ArtifactCorrupted), refused
    assert "not a regular file" in str(refused)
    again = _within(10, lambda: write(writer_for(store, run_id="run-2"), content=CONTENT))
    assert not isinstance(again, BaseException), again
    assert path.is_file() and not path.is_symlink()
    assert store.read(ref.id) == CONTENT
