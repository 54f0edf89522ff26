"""Helpers the artifact tests share (a module with a name of its own: two plugins' test
directories each have a conftest, so importing from "conftest" is ambiguous)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from toolhost import Outcome, Trust, Workspace
from toolhost.testing import ForwardingWorkspace, Harness, Run, WatchedChunks
from toolhost_artifact import plugin

#: What the kit's host runs: this plugin alone, as an object (not the installed set).
PLUGINS: Mapping[str, object] = {"toolhost-artifact": plugin}
SECRET = b"outside the root\n"
TOOL = "artifact.export"

Call = Callable[..., Outcome]


def make_call(host: Harness, run: Run) -> Call:
    def invoke(arguments: Any, version: str | None = None) -> Outcome:
        return host.call(TOOL, arguments, version=version, run=run)

    return invoke


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


class Store:
    """The host's artifact store, seen from outside: the ``artifacts`` table's row count in
    the host's one SQLite database (found by its file header), the files under the store's
    content root (staged uploads included), and records and verified reads through the store
    the pipeline uses."""

    def __init__(self, host: Harness, data_dir: Path) -> None:
        self.host = host
        self.data_dir = data_dir

    def rows(self) -> int:
        found = [p for p in self.data_dir.iterdir() if p.is_file() and _is_sqlite(p)]
        assert len(found) == 1, found
        conn = sqlite3.connect(found[0])
        try:
            return int(conn.execute("SELECT count(*) FROM artifacts").fetchone()[0])
        finally:
            conn.close()

    def files(self) -> list[Path]:
        content_root = self.data_dir / "artifacts"
        return sorted(p for p in content_root.rglob("*") if p.is_file())

    def trust(self, artifact_id: str) -> Trust:
        return self.host.host.pipeline.artifacts.get(artifact_id).trust

    def origin_and_run(self, artifact_id: str) -> tuple[str, str]:
        record = self.host.host.pipeline.artifacts.get(artifact_id)
        return record.origin.value, record.run_id

    def read(self, artifact_id: str) -> bytes:
        """The bytes, verified against their checksum by the store."""
        return self.host.host.pipeline.artifacts.read(artifact_id)


class ChangingWorkspace(ForwardingWorkspace):
    """A ``Workspace`` that hands every call to the run's real one, and, once the tool has
    been given the first chunk of a read, lets ``change`` act on the file (through the real
    filesystem, as an outsider would)."""

    def __init__(self, real: Workspace, change: Callable[[], None]) -> None:
        super().__init__(real)
        self.change = change
        self.reads = 0

    def read_chunks(self, path: str, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        self.reads += 1
        first = self.reads == 1
        # WatchedChunks, not a generator: the chunks keep saying whose bytes they were.
        return WatchedChunks(self.real.read_chunks(path, chunk_size),
                             after=lambda i: self.change() if first and i == 0 else None)


def in_run(run: Run, workspace: Workspace) -> Run:
    """``run`` with another workspace, so a call through the real pipeline uses it."""
    return attrs.evolve(run, workspace=workspace)
