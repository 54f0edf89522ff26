"""An index file deleted and made anew while another connection of the same process is being
opened on it: SQLite opens the ``-shm`` file by name after the database file, so the old
file's connection would map the new file's shared memory and, POSIX locks never conflicting
within a process, take itself for its first user and truncate it under the connection that
has it mapped (a review's host died of SIGBUS). Opening and deleting are one at a time."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Run in a process of its own: the failure this guards against kills the process.
_SCRIPT = textwrap.dedent("""
    import os, sqlite3, sys, threading
    from pathlib import Path
    from toolhost_people import index

    data = Path(sys.argv[1])
    index.open_index(data).close()  # an index in WAL mode, as every call leaves it
    shm = f"{index.index_path(data)}-shm"
    replaced = threading.Event()
    made = {}

    def replace():  # what another call does on finding the index damaged
        index.remove_index(data)
        made["conn"] = index.open_index(data)
        replaced.set()

    real = sqlite3.connect

    def connect(*args, **kwargs):  # the old file is open; its -shm not yet
        conn = real(*args, **kwargs)
        if not made and threading.current_thread() is threading.main_thread():
            made["thread"] = threading.Thread(target=replace)
            made["thread"].start()
            replaced.wait(1.0)  # replaced by now, unless opening and deleting take turns
        return conn

    sqlite3.connect = connect
    old = index.open_index(data)
    made["thread"].join()
    new = made["conn"]
    new.execute("BEGIN IMMEDIATE")
    new.execute("INSERT INTO meta VALUES ('probe', 'x')")
    new.execute("COMMIT")
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            pass
    # The old connection maps the deleted file's shared memory, the new one the new file's.
    print(sorted(link for link in links if link.startswith(shm)))
""")


def test_an_index_deleted_while_another_connection_opens_keeps_each_its_own_memory(
        tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert done.returncode == 0, done.stderr
    shm = f"{tmp_path / 'index.sqlite3'}-shm"
    assert done.stdout.strip() == str(sorted([shm, f"{shm} (deleted)"]))


def test_a_new_index_opens_its_log_and_shared_memory_under_the_files_lock(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Regression (D444): SQLite opens a new file's ``-wal`` and ``-shm`` at its first read,
    which came after the lock was released; a deletion in between would give the connection
    the next file's shared memory, the hazard the lock is for (D358)."""
    from toolhost_people import index

    path = index.index_path(tmp_path)
    open_at_release: list[list[str]] = []
    real = index._opening_or_deleting

    @contextlib.contextmanager
    def watched(opened: Path) -> Iterator[None]:
        with real(opened):
            yield
            open_at_release.append(_open_files(f"{path}-"))

    monkeypatch.setattr(index, "_opening_or_deleting", watched)
    index.open_index(tmp_path).close()  # a new file
    assert open_at_release == [[f"{path}-shm", f"{path}-wal"]]


def _open_files(prefix: str) -> list[str]:
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own, closed by now
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sorted(link for link in links if link.startswith(prefix))
