"""Several writers at one cache: the first use of a fresh cache by several processes at once,
and a cache another writer holds past the wait (an import or an erase running), which is a
static, retryable answer, never a traceback or a cache called damaged."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from email_support import MODE, cache_dir, harness, ok
from mail_support import OTHER, OWNER, mail, write_mbox
from toolhost_email.importer import import_path
from toolhost_email.messages import MESSAGES

#: The reason's code is a contract with callers: spelled out, not imported.
BUSY = "tool.upstream_unavailable.mail_cache_busy"

def _open_at_once(data_dir: Path, barrier: Barrier, outcomes: Queue[str]) -> None:
    from toolhost_email.store import open_writable

    barrier.wait()
    try:
        open_writable(data_dir).close()
    except Exception as exc:  # what the test reports: every process's outcome
        outcomes.put(f"{type(exc).__name__}: {exc}")
    else:
        outcomes.put("ok")


def test_first_use_by_several_processes_at_once_is_one_healthy_cache(tmp_path: Path) -> None:
    # Spawned, not forked: the test process may run threads; a barrier starts them together.
    context = multiprocessing.get_context("spawn")
    results: list[str] = []
    for attempt in range(5):
        data_dir = tmp_path / f"data{attempt}"
        barrier, outcomes = context.Barrier(6), context.Queue()
        openers = [context.Process(target=_open_at_once, args=(data_dir, barrier, outcomes))
                   for _ in range(6)]
        for opener in openers:
            opener.start()
        results += [outcomes.get(timeout=120) for _ in openers]
        for opener in openers:
            opener.join(timeout=60)
        outcomes.close()
        outcomes.join_thread()
        with sqlite3.connect(data_dir / "mail.sqlite3") as conn:
            assert sorted(conn.execute("SELECT key, value FROM meta")) == [
                ("generation", 0), ("schema", 2)]
    assert results == ["ok"] * len(results)


@contextmanager
def _held(data_root: Path) -> Iterator[None]:
    """Another writer's transaction on the cache, as an import in progress holds it."""
    holder = sqlite3.connect(cache_dir(data_root) / "mail.sqlite3", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


def _stored(data_root: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(cache_dir(data_root) / "mail.sqlite3") as conn:
        counts = conn.execute("SELECT account, COUNT(*) FROM messages GROUP BY account "
                              "ORDER BY account").fetchall()
        feedback = conn.execute("SELECT COUNT(*) FROM feedback_versions").fetchone()[0]
    return [*counts, ("feedback_versions", feedback)]


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", [mail()]))
    return root


def test_import_and_erase_of_a_busy_cache_are_one_line_and_status_2(
        tmp_path: Path, data_root: Path) -> None:
    src = write_mbox(tmp_path / "other.mbox", [mail(message_id="<o1@example.org>")])
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_root)}
    before = _stored(data_root)
    commands = [["import", "--account", OTHER, str(src)], ["erase", "--account", OWNER]]
    with _held(data_root):
        # Both at once: each waits out the cache's 30 s for the other writer.
        running = [subprocess.Popen([sys.executable, "-m", "toolhost_email.cli", *args],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for args in commands]
        results = [(p.communicate(timeout=120), p.returncode) for p in running]
    for (stdout, stderr), status in results:
        assert (status, stdout) == (2, "")
        assert stderr == ("toolhost-email: the mail cache is busy (another import, erase or "
                          "command is writing it) and nothing was changed: try again when "
                          "that has finished\n")
    assert _stored(data_root) == before


def test_feedback_on_a_busy_cache_is_the_static_retryable_busy(data_root: Path) -> None:
    arguments = {"feedback": "keep replies short", "quote": "please keep replies short"}
    with harness(data_root, MODE) as h:
        run = h.start_run(user_turn="please keep replies short and friendly")
        with _held(data_root):
            started = time.monotonic()
            busy = h.call("email.feedback", arguments, run=run)
            waited = time.monotonic() - started
        assert _stored(data_root) == [(OWNER, 1), ("feedback_versions", 0)]
        applied = h.call("email.feedback", arguments, run=run)
    assert busy.failure is not None and busy.structured is None
    assert (busy.failure.reason_code, busy.failure.retryable) == (BUSY, True)
    assert busy.failure.message == MESSAGES[BUSY]
    assert waited < 25  # the tool's own wait, inside its 30 s timeout
    assert ok(applied)["status"] == "applied"
