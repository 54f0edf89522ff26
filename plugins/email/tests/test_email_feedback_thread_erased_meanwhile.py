"""email.feedback about a thread records nothing when the thread is erased (or stops being the
caller's) between the tool's check of it and the write: the write lock it waits for may be an
erase's. The check is made again in the write transaction that records the feedback, and the
call fails with the tool's own unknown_thread (D156: feedback goes with its erased thread or
account, never recorded after it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from email_support import MODE, cache_dir, harness, ok
from mail_support import OTHER, OWNER, mail, write_mbox
from toolhost_email import feedback_tool, open_mail_cache
from toolhost_email.erase import erase_source
from toolhost_email.feedback import UnknownThread, record_feedback
from toolhost_email.importer import import_path
from toolhost_email.messages import UNKNOWN_THREAD
from toolhost_email.owners import clear_owner, set_owner

TURN = "About the rent thread: please be less formal with my landlord."
QUOTE = "please be less formal"
PRINCIPAL = "ben"  # whose run it is, and who owns the accounts


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<rent@example.org>", subject="Rent")]))
    # Another account's mail stays: only the erased source goes.
    import_path(cache_dir(root), OTHER, write_mbox(tmp_path / "other.mbox", [
        mail(message_id="<other@example.org>", to=OTHER)]))
    return root


def _thread(data_root: Path) -> str:
    with open_mail_cache(cache_dir(data_root)) as cache:
        return next(m.thread_id for m in cache.messages() if m.account == OWNER)


def _feedback(data_root: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with closing(sqlite3.connect(cache_dir(data_root) / "mail.sqlite3")) as conn:
        return (conn.execute("SELECT * FROM feedback").fetchall(),
                conn.execute("SELECT * FROM feedback_versions").fetchall())


#: What happens between the tool's check and its write, as another process would do it.
MEANWHILE: dict[str, Callable[[Path, str], object]] = {
    "erase --account": lambda cache, thread: erase_source(cache, "account", OWNER),
    "erase --thread": lambda cache, thread: erase_source(cache, "thread", thread),
    "owners clear": lambda cache, thread: clear_owner(cache, OWNER),
}


@pytest.mark.parametrize("meanwhile", sorted(MEANWHILE))
@pytest.mark.parametrize("with_account", [False, True])
def test_a_thread_gone_before_the_write_is_unknown_and_nothing_is_recorded(
        data_root: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: str,
        with_account: bool) -> None:
    # Regression: the thread was checked in a read snapshot, then the feedback was inserted
    # once the erase released the write lock: the erased account's address, thread id and the
    # owner's quote stayed in the cache after the erase said it was done.
    cache = cache_dir(data_root)
    set_owner(cache, OWNER, PRINCIPAL)
    set_owner(cache, OTHER, PRINCIPAL)
    thread = _thread(data_root)
    recorded = feedback_tool.record_feedback
    seen: list[str] = []

    def after_the_check(*args: Any, **kwargs: Any) -> Any:
        # The seam: the tool has checked the thread (in its read snapshot); another process
        # commits its change before this call gets the write lock.
        seen.append(kwargs["thread_id"])
        MEANWHILE[meanwhile](cache, thread)
        return recorded(*args, **kwargs)

    monkeypatch.setattr(feedback_tool, "record_feedback", after_the_check)
    arguments = {"feedback": QUOTE, "quote": QUOTE, "thread_id": thread}
    if with_account:
        arguments["account"] = OWNER
    with harness(data_root, MODE) as h:
        outcome = h.call("email.feedback", arguments,
                         run=h.start_run(user_turn=TURN, principal=PRINCIPAL))
    assert seen == [thread]  # the check passed: the thread was there then
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (UNKNOWN_THREAD, False)
    assert _feedback(data_root) == ([], [])


def test_the_same_call_with_the_thread_still_there_is_recorded(
        data_root: Path) -> None:
    # The check inside the write refuses only what is gone: the thread's feedback is recorded.
    cache = cache_dir(data_root)
    set_owner(cache, OWNER, PRINCIPAL)
    thread = _thread(data_root)
    with harness(data_root, MODE) as h:
        result = ok(h.call("email.feedback", {"feedback": QUOTE, "quote": QUOTE,
                                              "thread_id": thread},
                           run=h.start_run(user_turn=TURN, principal=PRINCIPAL)))
    rows, versions = _feedback(data_root)
    assert [(r[0], r[1], r[2]) for r in rows] == [(result["feedback_id"], OWNER, thread)]
    assert [(v[0], v[1], v[2]) for v in versions] == [(result["feedback_id"], 1, "applied")]


def test_record_feedback_checks_the_thread_in_its_own_write(data_root: Path) -> None:
    # Two connections: the erase's write transaction commits while the recorder waits for the
    # lock (here: before it asks); the recorder's check is in its own transaction.
    cache = cache_dir(data_root)
    thread = _thread(data_root)
    with closing(sqlite3.connect(cache / "mail.sqlite3", isolation_level=None)) as eraser:
        eraser.execute("BEGIN IMMEDIATE")
        eraser.execute("DELETE FROM messages WHERE thread_id = ?", (thread,))
        eraser.execute("COMMIT")
    with pytest.raises(UnknownThread):
        record_feedback(cache, account=OWNER, thread_id=thread, feedback=QUOTE, quote=QUOTE,
                        recorded_at="2026-12-01T10:00:00+00:00", principal=PRINCIPAL)
    with pytest.raises(UnknownThread):  # nor under any account
        record_feedback(cache, account="", thread_id=thread, feedback=QUOTE, quote=QUOTE,
                        recorded_at="2026-12-01T10:00:00+00:00", principal=PRINCIPAL)
    assert _feedback(data_root) == ([], [])
    # General and account-wide feedback name no thread: recorded as before.
    record_feedback(cache, account=OWNER, thread_id="", feedback=QUOTE, quote=QUOTE,
                    recorded_at="2026-12-01T10:00:00+00:00", principal=PRINCIPAL)
    assert len(_feedback(data_root)[0]) == 1
