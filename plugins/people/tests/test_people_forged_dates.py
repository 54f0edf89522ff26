"""D160 in people's index: a Date more than a day past the clock ranks below every real date
(above no date), so a sender's forged far-future mail holds neither a person's history, last
interaction and recent threads, nor the name the person is shown by; once the clock comes
within a day of such a date, the index is rebuilt and ranks it by its date. Over the real
cache (toolhost-email's importer) and a real index, with the clock handed in as the tools
hand in theirs."""

from __future__ import annotations

import datetime as _dt
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from toolhost_email import MailCacheReader, open_mail_cache

from people_support import OWNER, Mail, email_dir, import_mail
from toolhost_people import index

NOW = _dt.datetime(2026, 12, 7, 9, tzinfo=_dt.UTC)
FORGED = "Fri, 31 Dec 9999 23:59:59 +0000"
ANNA = "anna@example.org"
ANNA_ID = index.person_id_for(ANNA)
#: Two real messages, one forged far ahead, one undated, each a thread of its own; and a
#: sender whose only message is forged.
MAIL = [
    Mail(f"Anna Smith <{ANNA}>", OWNER, "Real A", 1, "a@example.org"),
    Mail(f"Mallory <{ANNA}>", OWNER, "Forged", None, "f@example.org", date=FORGED),
    Mail(f"Anna S. <{ANNA}>", OWNER, "Real B", 2, "b@example.org"),
    Mail(f"Anna <{ANNA}>", OWNER, "Undated", None, "u@example.org"),
    Mail("Spam <spam@example.org>", OWNER, "Spam", None, "s@example.org", date=FORGED),
]


@contextmanager
def _cache(tmp_path: Path, mails: Sequence[Mail]) -> Iterator[
        tuple[MailCacheReader, sqlite3.Connection]]:
    data = tmp_path / "data"
    data.mkdir()
    import_mail(data, OWNER, mails, "owner")
    with open_mail_cache(email_dir(data)) as cache, \
            closing(index.open_index(tmp_path)) as conn:
        yield cache, conn


def _history(conn: sqlite3.Connection, limit: int) -> list[str]:
    subjects: list[str] = []
    after = None
    while page := index.history_page(conn, ANNA_ID, limit, after):
        subjects += [i.subject for i in page]
        after = (page[-1].ts, page[-1].message_key)
    return subjects


def test_a_forged_future_date_ranks_below_every_real_one(tmp_path: Path) -> None:
    with _cache(tmp_path, MAIL) as (cache, conn):
        assert index.refresh(conn, cache, {}, now=NOW)
        for limit in (1, 2, 50):  # paging crosses the forged sort key as the whole list does
            assert _history(conn, limit) == ["Real B", "Real A", "Forged", "Undated"]
        assert index.person(conn, ANNA_ID) == index.PersonRow(
            ANNA_ID, "Anna S.", 0, 4, 4, "2026-11-01T09:00:00Z", "2026-11-02T09:00:00Z")
        assert [t.subject for t in index.recent_threads(conn, ANNA_ID, 10)] == [
            "Real B", "Real A", "Forged", "Undated"]
        # A person with forged dates only keeps them: they are still that person's latest.
        assert [(p.name, p.last_date) for p in index.search(conn, "example.org", 10)] == [
            ("Anna S.", "2026-11-02T09:00:00Z"), ("Spam", "9999-12-31T23:59:59Z")]


def test_with_no_clock_every_date_is_trusted_until_a_caller_with_one(tmp_path: Path) -> None:
    # A caller with no clock trusts every date; the tools' next call ranks again.
    with _cache(tmp_path, MAIL) as (cache, conn):
        assert index.refresh(conn, cache, {})
        assert _history(conn, 50) == ["Forged", "Real B", "Real A", "Undated"]
        assert not index.is_current(conn, cache, {}, now=NOW)
        assert index.refresh(conn, cache, {}, now=NOW)
        assert _history(conn, 50) == ["Real B", "Real A", "Forged", "Undated"]
        assert index.is_current(conn, cache, {}) and not index.refresh(conn, cache, {})


def test_a_date_ranks_as_real_once_the_clock_is_a_day_from_it(tmp_path: Path) -> None:
    later = _dt.datetime(2026, 11, 12, 9, tzinfo=_dt.UTC)  # day 12 of the fixture month
    day_before = later - _dt.timedelta(days=1)
    second = _dt.timedelta(seconds=1)
    with _cache(tmp_path, [Mail(f"Anna <{ANNA}>", OWNER, "Sooner", 1, "a@example.org"),
                           Mail(f"Anna <{ANNA}>", OWNER, "Later", 12, "b@example.org")],
                ) as (cache, conn):
        assert index.refresh(conn, cache, {}, now=day_before - second)
        assert _history(conn, 50) == ["Sooner", "Later"]
        assert index.is_current(conn, cache, {}, now=day_before - second)
        assert not index.is_current(conn, cache, {}, now=day_before)
        assert index.refresh(conn, cache, {}, now=day_before)
        assert _history(conn, 50) == ["Later", "Sooner"]
        # Nothing forged any more: the clock no longer matters to this index.
        assert not index.refresh(conn, cache, {}, now=later + _dt.timedelta(days=400))
