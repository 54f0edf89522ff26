"""Review of the streaming ``toolhost artifacts get`` and ``serve``'s recover thread (D209,
D210, D215): each test is a defect found, failing before its fix.

The CLI runs as a child process over a real data directory (SQLite and content files), so
what the operator sees (exit code, stdout's bytes, stderr's one line, no traceback) is what
is asserted. The recover tests use the host's real SQLite invocation store, wrapped at the
port so that one call can be held while the test stops the pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_tool

from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._cli.exit_codes import ExitCode
from toolhost._composition import Host
from toolhost._model.artifacts import ArtifactOrigin, ArtifactRecord, NewArtifact
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.spec import Trust
from toolhost._pipeline.recovery import RecoveryAction
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock
from toolhost.testing import host_for, run_toolhost, toolhost_command

#: More than the CLI's 1 MiB chunk: stdout gets the two-pass path.
BIG = bytes(range(256)) * (5 * 4096)
SMALL = b"the other artifact's content"
#: A bound on a held store call, so that a defect fails the test instead of hanging it.
BOUND_S = 10.0


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data: Path) -> Iterator[SQLiteArtifactStore]:
    s = open_artifact_store(data, FixedClock(T0))
    yield s
    s.close()


def put(store: SQLiteArtifactStore, content: bytes) -> ArtifactRecord:
    return store.put(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a.bin",
            media_type="application/octet-stream", trust=Trust.INTERNAL_TOOL), content)


def toolhost(data: Path, *args: str, shell: str | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """``toolhost ARGS`` as a child over ``data``; ``shell`` wraps it (``"$@"`` is the
    command), for a redirect the test cannot make with subprocess alone."""
    command = None if shell is None else ["/bin/sh", "-c", shell, "sh", *toolhost_command()]
    return run_toolhost(*args, data_dir=data, plugins="", command=command, cwd=cwd,
                        text=False)


# ------------------------------------------------------------------ artifacts get


@pytest.mark.parametrize("content", [BIG, SMALL], ids=["two-passes", "one-chunk"])
def test_o_dev_stdout_writes_into_a_pipe(
    store: SQLiteArtifactStore, data: Path, content: bytes,
) -> None:
    # /dev/stdout resolves to /proc/self/fd/1, whose target, for a pipe, is "pipe:[N]": no
    # path. Writing through what the name opens is what a shell redirect does.
    record = put(store, content)
    done = toolhost(data, "artifacts", "get", record.id, "-o", "/dev/stdout")
    assert (done.returncode, done.stderr) == (ExitCode.OK, b"")
    assert done.stdout == content


def test_a_closed_stdout_is_one_line_not_a_traceback(
    store: SQLiteArtifactStore, data: Path,
) -> None:
    record = put(store, SMALL)
    done = toolhost(data, "artifacts", "get", record.id, "-o", "-", shell='exec "$@" >&-')
    assert done.returncode == ExitCode.FAILED
    assert done.stderr == b"toolhost: cannot write standard output: it is closed\n"


def test_an_o_name_too_long_is_one_line_not_a_traceback(
    store: SQLiteArtifactStore, data: Path, tmp_path: Path,
) -> None:
    # Path.is_dir() swallows only "no such file"-like errors; ENAMETOOLONG escaped it.
    record = put(store, SMALL)
    name = str(tmp_path / ("x" * (os.pathconf(tmp_path, "PC_NAME_MAX") + 1)))
    done = toolhost(data, "artifacts", "get", record.id, "-o", name)
    assert done.returncode == ExitCode.FAILED
    assert done.stderr == f"toolhost: cannot write {name!r}: File name too long\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("name", ["y" * 250, "\u00e9" * 127], ids=["ascii", "two-byte"])
def test_o_a_name_near_the_limit_is_written(
    store: SQLiteArtifactStore, data: Path, tmp_path: Path, name: str,
) -> None:
    # A legal name (250 and 254 bytes): the temp file beside it, named ".NAME.XXXXXXXX.part",
    # was not, and the get failed with "File name too long".
    record = put(store, SMALL)
    out = tmp_path / "out"
    out.mkdir()
    done = toolhost(data, "artifacts", "get", record.id, "-o", str(out / name))
    assert (done.returncode, done.stderr) == (ExitCode.OK, b"")
    assert [p.name for p in out.iterdir()] == [name]
    assert (out / name).read_bytes() == SMALL


def test_o_through_a_symlink_never_overwrites_the_stores_own_content(
    store: SQLiteArtifactStore, data: Path, tmp_path: Path,
) -> None:
    # Another artifact's content file, reached through a symlink: replacing it would damage
    # that artifact for good (every later read refused).
    wanted, other = put(store, SMALL), put(store, BIG)
    link = tmp_path / "out.bin"
    link.symlink_to(store._blob_path(other.checksum))
    done = toolhost(data, "artifacts", "get", wanted.id, "-o", str(link))
    assert done.returncode == ExitCode.USAGE
    assert done.stderr == (
        f"toolhost: -o {str(link)!r} is inside the data directory, where the host keeps its "
        "stores, caches and plugins' files: name a file elsewhere\n").encode()
    assert store.read(other.id) == BIG
    assert sorted(p.name for p in store._blob_path(other.checksum).parent.iterdir()) == [
        store._blob_path(other.checksum).name]


def test_o_the_database_file_is_refused(store: SQLiteArtifactStore, data: Path) -> None:
    record = put(store, SMALL)
    database = data / DATABASE_NAME
    before = database.stat().st_ino  # replaced, it would be another file
    done = toolhost(data, "artifacts", "get", record.id, "-o", DATABASE_NAME, cwd=data)
    assert done.returncode == ExitCode.USAGE
    assert done.stderr == (
        f"toolhost: -o {DATABASE_NAME!r} is inside the data directory, where the host keeps "
        "its stores, caches and plugins' files: name a file elsewhere\n").encode()
    assert database.stat().st_ino == before
    assert store.read(record.id) == SMALL


def test_o_anywhere_under_the_data_directory_is_refused(store: SQLiteArtifactStore,
                                                        data: Path) -> None:
    # Regression (issue #26): the validators' cache, whose code every start runs, and any
    # plugin's files could be overwritten by an artifact's bytes.
    record = put(store, SMALL)
    for target in (data / "cache" / "validators.json",
                   data / "plugins" / "toolhost-email" / "mail.sqlite3"):
        done = toolhost(data, "artifacts", "get", record.id, "-o", str(target))
        assert done.returncode == ExitCode.USAGE, done.stderr
        assert b"is inside the data directory" in done.stderr
        assert not target.exists()


# ------------------------------------------------------------------ the recover thread


class HeldCall:
    """The host's invocation store; its first call to ``method`` waits for the test, as a
    call to a server gone does. Records every call's name."""

    def __init__(self, store: Any, method: str) -> None:
        self.store = store
        self.method = method
        self.names: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.names.append(name)
            if name == self.method and not self.entered.is_set():
                self.entered.set()
                self.release.wait(BOUND_S)
            return attribute(*args, **kwargs)

        return call


@pytest.fixture
def host(data: Path) -> Iterator[Host]:
    h = host_for({"fx": make_plugin(tools=[make_tool()])}, data_dir=data)
    store = h.pipeline.invocations
    yield h
    h.pipeline.invocations = store
    h.close()


def dead_owner(host: Host) -> dict[str, Any]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return {**host.pipeline.invocations.owner(), "pid": child.pid}


def left_running(host: Host) -> InvocationRecord:
    """fx.echo's row (READ_ONLY), left ``running`` by a process now gone."""
    now = host.clock.now()
    row = InvocationRecord(
        id="row-of-a-dead-process", run_id="run-1", principal_id="local", scopes=(),
        tool_name="fx.echo", tool_version="1.0.0", arguments={"x": "k"},
        argument_digest=None, state=InvocationState.RUNNING, created_at=now, started_at=now,
        owner=dead_owner(host))
    host.pipeline.invocations.insert(row)
    return row


def stopped_during(host: Host, method: str) -> tuple[HeldCall, list[Any]]:
    """``recover_interrupted`` on a thread of its own, stopped while its first ``method``
    call is under way: the calls it made, and its report."""
    held = HeldCall(host.pipeline.invocations, method)
    host.pipeline.invocations = held
    stopping = threading.Event()
    report: list[Any] = []
    worker = threading.Thread(
        target=lambda: report.extend(host.pipeline.recover_interrupted(stopping)))
    worker.start()
    try:
        assert held.entered.wait(BOUND_S)
        stopping.set()
    finally:
        held.release.set()
        worker.join(BOUND_S)
    assert not worker.is_alive()
    return held, report


def test_stopping_during_the_owner_check_begins_no_settle(host: Host) -> None:
    # D215: the event is checked before each store call, and a stop waits only for the call
    # under way. The owner check is one; the settle and the read after it are two more.
    row = left_running(host)
    held, report = stopped_during(host, "owner_state")
    assert held.names == ["list_rows", "owner_state"]
    assert held.store.get(row.id).state is InvocationState.RUNNING
    assert [(r.invocation_id, r.action) for r in report] == [(row.id, RecoveryAction.LEFT)]


def test_stopping_during_the_settle_reports_the_row_without_reading_it_back(
    host: Host,
) -> None:
    row = left_running(host)
    held, report = stopped_during(host, "settle")
    assert held.names == ["list_rows", "owner_state", "settle"]
    assert held.store.get(row.id).state is InvocationState.FAILED
    assert [(r.invocation_id, r.action, r.outcome) for r in report] == [
        (row.id, RecoveryAction.FAILED, None)]
