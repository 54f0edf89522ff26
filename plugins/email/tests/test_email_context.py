"""email.context through the real pipeline: the thread, inbox rows and writing examples in
their source wrappers, bounded, and nothing of another account when one is named."""

from __future__ import annotations

import datetime as _dt
from email.utils import format_datetime
from pathlib import Path

import pytest

from email_support import MODE, cache_dir, harness, ok
from mail_support import OTHER, OWNER, mail, write_mbox
from toolhost import Trust
from toolhost.testing import DEFAULT_INSTANT, FixedClock
from toolhost_email import open_mail_cache
from toolhost_email.context_tool import TEXT_CHARS
from toolhost_email.importer import import_path
from toolhost_email.messages import CACHE_UNAVAILABLE, MESSAGES, UNKNOWN_THREAD


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<root@example.org>", subject="Dinner?", body="Dinner on Friday?\n",
             date="Tue, 01 Dec 2026 10:00:00 +0000"),
        mail(message_id="<re1@example.org>", subject="Re: Dinner?", sender=f"Me <{OWNER}>",
             to="Alice <alice@example.org>", body="Yes, gladly.\n" + "y" * TEXT_CHARS,
             headers={"References": "<root@example.org>"},
             date="Tue, 01 Dec 2026 11:00:00 +0000"),
        mail(message_id="<news@example.org>", subject="News", sender="news@example.org",
             body="Lots   of\n  news " * 30, date="Wed, 02 Dec 2026 09:00:00 +0000"),
    ])
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, src)
    import_path(cache_dir(root), OTHER, write_mbox(tmp_path / "other.mbox", [
        mail(message_id="<x@example.net>", subject="Other account", to=OTHER)]))
    return root


def _thread_of(data_root: Path, account: str, message_id: str) -> str:
    with open_mail_cache(cache_dir(data_root)) as cache:
        return next(m.thread_id for m in cache.messages()
                    if m.account == account and m.message_id == message_id)


def test_a_thread_with_its_sources_inbox_rows_and_writing_examples(data_root: Path) -> None:
    thread_id = _thread_of(data_root, OWNER, "root@example.org")
    with harness(data_root, MODE) as h:
        outcome = h.invoke("email.context", account=OWNER, thread_id=thread_id)
    result = ok(outcome)
    assert outcome.output_trust is Trust.EXTERNAL_UNTRUSTED
    assert [m["subject"] for m in result["thread"]] == ["Dinner?", "Re: Dinner?"]
    first, reply = result["thread"]
    assert first["source"]["account"] == OWNER and first["source"]["thread_id"] == thread_id
    assert first["text"] == "Dinner on Friday?\n" and first["text_truncated"] is False
    assert len(reply["text"]) == TEXT_CHARS and reply["text_truncated"] is True
    assert first["from"] == [{"name": "Alice", "address": "alice@example.org"}]
    assert first["date"] == "2026-12-01T10:00:00+00:00"
    # Inbox rows are received mail only, newest first; the owner's own mail is the examples.
    assert [r["subject"] for r in result["inbox"]] == ["News", "Dinner?"]
    assert result["inbox"][0]["snippet"].startswith("Lots of news Lots of news")
    assert [e["subject"] for e in result["writing_examples"]] == ["Re: Dinner?"]
    assert result["writing_examples"][0]["to"] == [
        {"name": "Alice", "address": "alice@example.org"}]
    assert {r["source"]["account"] for r in result["inbox"]} == {OWNER}


def test_without_an_account_every_accounts_rows_are_there(data_root: Path) -> None:
    with harness(data_root, MODE) as h:
        result = ok(h.invoke("email.context", inbox_limit=50, examples_limit=0))
    assert {r["source"]["account"] for r in result["inbox"]} == {OWNER, OTHER}
    assert result["thread"] == [] and result["writing_examples"] == []


def test_a_thread_of_another_account_or_made_up_is_not_found(data_root: Path) -> None:
    other_thread = _thread_of(data_root, OTHER, "x@example.net")
    with harness(data_root, MODE) as h:
        for arguments in ({"thread_id": "t_" + "0" * 32},
                          {"thread_id": other_thread, "account": OWNER}):
            outcome = h.invoke("email.context", **arguments)
            assert outcome.failure is not None
            assert (outcome.failure.reason_code, outcome.failure.message) == (
                UNKNOWN_THREAD, MESSAGES[UNKNOWN_THREAD])


def test_an_empty_cache_is_empty_lists(tmp_path: Path) -> None:
    with harness(tmp_path / "data", MODE) as h:
        assert ok(h.invoke("email.context")) == {
            "thread": [], "inbox": [], "writing_examples": [], "feedback": []}


@pytest.mark.parametrize("arguments", [
    {"inbox_limit": 51}, {"examples_limit": -1}, {"thread_id": "../etc"}, {"extra": 1}])
def test_the_bounds_are_in_the_closed_schema(tmp_path: Path,
                                             arguments: dict[str, object]) -> None:
    with harness(tmp_path / "data", MODE) as h:
        outcome = h.invoke("email.context", **arguments)
    assert outcome.failure is not None
    assert outcome.failure.kind.value == "INVALID_ARGUMENTS"


def test_a_damaged_cache_is_a_static_failure_not_a_traceback(tmp_path: Path) -> None:
    root = tmp_path / "data"
    cache_dir(root).mkdir(parents=True)
    (cache_dir(root) / "mail.sqlite3").write_bytes(b"not a database" * 100)
    with harness(root, MODE) as h:
        outcome = h.invoke("email.context")
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.message) == (
        CACHE_UNAVAILABLE, MESSAGES[CACHE_UNAVAILABLE])


def _at(hours: float) -> str:
    """A Date header ``hours`` after the harness's clock."""
    return format_datetime(DEFAULT_INSTANT + _dt.timedelta(hours=hours))


FORGED = "Fri, 31 Dec 9999 23:59:59 +0000"


def test_a_date_more_than_a_day_past_the_clock_ranks_below_every_plausible_one(
    tmp_path: Path,
) -> None:
    # D160: fifty forged far-future messages held every inbox row above any new mail.
    me = f"Me <{OWNER}>"
    src = write_mbox(tmp_path / "in.mbox", [
        mail(message_id="<forged@x.example>", subject="forged", date=FORGED),
        mail(message_id="<ahead@x.example>", subject="two days ahead", date=_at(48)),
        mail(message_id="<undated@x.example>", subject="undated", date=None),
        mail(message_id="<skew@x.example>", subject="within a day", date=_at(23)),
        mail(message_id="<real@x.example>", subject="an hour ago", date=_at(-1)),
        mail(message_id="<re@x.example>", subject="forged reply",
             date="Thu, 30 Dec 9999 23:59:59 +0000", headers={"References": "<real@x.example>"}),
        mail(message_id="<s1@x.example>", subject="sent forged", sender=me, date=FORGED),
        mail(message_id="<s2@x.example>", subject="sent yesterday", sender=me, date=_at(-24)),
    ])
    root = tmp_path / "data"
    import_path(cache_dir(root), OWNER, src)
    with harness(root, MODE, clock=FixedClock(DEFAULT_INSTANT)) as h:
        every = ok(h.invoke("email.context", inbox_limit=50))
        latest = ok(h.invoke("email.context", inbox_limit=2, examples_limit=1))
        thread = ok(h.invoke("email.context", thread_id=_thread_of(root, OWNER, "real@x.example")))
    assert [r["subject"] for r in every["inbox"]] == [
        "within a day", "an hour ago", "forged", "forged reply", "two days ahead", "undated"]
    # Oldest first in a thread: the forged reply counts as older than the real message.
    assert [m["subject"] for m in thread["thread"]] == ["forged reply", "an hour ago"]
    assert [e["subject"] for e in every["writing_examples"]] == [
        "sent yesterday", "sent forged"]
    assert [r["subject"] for r in latest["inbox"]] == ["within a day", "an hour ago"]
    assert [e["subject"] for e in latest["writing_examples"]] == ["sent yesterday"]



@pytest.mark.parametrize("emptied", ["inbox", "writing_examples"])
def test_a_result_over_its_budget_by_less_than_a_separator_still_fits(emptied: str) -> None:
    # The last item of a list has no ", " after it: counting one anyway stopped trimming 1
    # byte over the output limit, and the host then withheld the whole result as an excerpt.
    from toolhost_email.context_tool import _fit, _size

    item = {"subject": "x" * 40}
    out: dict[str, list[object]] = {"thread": [item, item], "inbox": [],
                                     "writing_examples": [], "feedback": []}
    out[emptied] = [item]
    budget = _size(out) - _size(item) - 1
    _fit(out, budget)
    assert _size(out) <= budget
    assert (out[emptied], len(out["thread"])) == ([], 1)
