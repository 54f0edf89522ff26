"""An import that ends badly, run as the operator runs it (the console script in a
subprocess): killed mid-way, its parse workers end with it and let go of the caller's pipe; a
disk that fills up is one line, and the cache is as it was."""

from __future__ import annotations

import os
import resource
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from email_support import cache_dir
from mail_support import OWNER, mail, write_mbox
from toolhost_email.importer import import_path

#: Enough messages that the import is still parsing in its pool seconds after it started.
_MESSAGES = 40_000


@pytest.fixture(scope="module")
def big_mbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mbox") / "big.mbox"
    with path.open("wb") as file:
        for n in range(_MESSAGES):
            file.write(b"From p%d@example.org Mon Jan  1 00:00:00 2024\nFrom: P <p%d@example.org>"
                       b"\nTo: %s\nSubject: message %d\nMessage-ID: <big%d@example.org>\n\n"
                       b"%s\n" % (n % 97, n % 500, OWNER.encode(), n, n, b"body line\n" * 8))
    return path


def _cli(data_root: Path, *args: str,
         preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_root)}
    return subprocess.Popen([sys.executable, "-m", "toolhost_email.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=preexec_fn)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Running, not a zombie (an init that reaps slowly keeps one for a while)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _eof_within(pipe: int, seconds: float) -> bool:
    """Whether every writer let go of ``pipe`` within ``seconds`` (what ends a ``| tee``)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if select.select([pipe], [], [], left)[0] and not os.read(pipe, 65536):
            return True
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="reads /proc; a pool needs two CPUs")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
def test_a_killed_import_takes_its_workers_and_lets_go_of_the_pipe(
        tmp_path: Path, big_mbox: Path, sig: signal.Signals) -> None:
    importer = _cli(tmp_path / "data", "import", "--account", OWNER, str(big_mbox))
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not workers and importer.poll() is None and time.monotonic() < deadline:
            workers = _children(importer.pid)
            time.sleep(0.005)
        assert workers, "the import started no worker"
        importer.send_signal(sig)
        importer.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [w for w in workers if _alive(w)] == []
        assert importer.stdout is not None and importer.stderr is not None
        assert _eof_within(importer.stdout.fileno(), 10)
        assert _eof_within(importer.stderr.fileno(), 10)
    finally:
        for worker in workers:  # the test's own orphans, were the fix to fail
            if _alive(worker):
                os.kill(worker, signal.SIGKILL)
        if importer.poll() is None:
            importer.kill()
        importer.communicate()


def _limit_file_size(size: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def test_a_full_disk_is_one_line_and_leaves_the_cache_as_it_was(
        tmp_path: Path, big_mbox: Path) -> None:
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", [mail()]))
    cache = cache_dir(root) / "mail.sqlite3"
    # No file of the import may grow past 2 MB: its write fails as on a full disk (EFBIG).
    full = _cli(root, "import", "--account", OWNER, str(big_mbox),
                preexec_fn=lambda: _limit_file_size(2 << 20))
    stdout, stderr = full.communicate(timeout=300)
    assert b"Traceback" not in stderr, stderr.decode()[-400:]
    assert (full.returncode, stdout) == (2, b"")
    assert stderr.startswith(b"toolhost-email: the mail cache could not be written (SQLITE_")
    assert stderr.endswith(f"nothing of {big_mbox} was imported\n".encode())
    assert stderr.count(b"\n") == 1
    with sqlite3.connect(cache) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone() == (1,)
    report = import_path(cache_dir(root), OWNER, big_mbox)
    assert (report.seen, report.added) == (_MESSAGES, _MESSAGES)
