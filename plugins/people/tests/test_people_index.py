"""The pieces under the tools: the fold, the cursor, and the index's refresh rule (rebuilt when
the cache's generation or the links change, and only then; a damaged file is rebuilt).

The refresh rule is tested over a stand-in of the cache reader holding real ``CachedMessage``
values, so the generation can be moved without an import; everything the tools do with a
real cache is tested through toolhost-email's import command in the other files.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from toolhost_email import CachedMessage, MailAddress

from toolhost_people import cursor, index
from toolhost_people.fold import fold
from toolhost_people.links import link, read_links


@given(st.text())
def test_fold_is_idempotent(text: str) -> None:
    assert fold(fold(text)) == fold(text)


def test_fold_is_width_and_case_insensitive() -> None:
    assert fold("\uff21\uff4e\uff4e\uff41  SMITH") == "anna smith"
    assert fold("Straße") == fold("STRASSE") == "strasse"
    # A control character blanks, an invisible format character (zero-width space) goes.
    assert fold("a\x1fb\u200bc") == "a bc"
    assert fold("\u0130lker") == fold("ILKER") == "ilker"


PERSON = "p_0000000000000001"


@given(st.text(max_size=600))
def test_any_text_decodes_to_nothing_or_to_a_position_it_encodes(text: str) -> None:
    position = cursor.decode(text, PERSON)  # never raises
    if position is not None:
        assert cursor.decode(cursor.encode(PERSON, *position), PERSON) == position


def test_a_cursor_is_only_its_persons() -> None:
    assert cursor.decode(cursor.encode(PERSON, 5, "k"), "p_0000000000000002") is None


def test_a_cursor_round_trips() -> None:
    made = cursor.encode("p_0000000000000001", index.NO_DATE, "abc")
    assert cursor.decode(made, "p_0000000000000001") == (index.NO_DATE, "abc")


class _Cache:
    """The three reader methods ``refresh`` uses, over a list it is handed."""

    def __init__(self) -> None:
        self.state_value = "1"
        self.generation_value = 0
        self.stored: list[CachedMessage] = []
        self.reads = 0

    def state(self) -> str:
        return self.state_value

    def generation(self) -> int:
        return self.generation_value

    def messages(self) -> Iterator[CachedMessage]:
        self.reads += 1
        return iter(self.stored)


def _message(key: str, sender: str) -> CachedMessage:
    return CachedMessage(
        message_key=key, account="owner@example.com", thread_id=key, message_id="",
        date=_dt.datetime(2026, 1, 1, tzinfo=_dt.UTC), subject=key,
        sender=(MailAddress(name="", address=sender),),
        to=(MailAddress(name="Owner", address="owner@example.com"),), cc=(), reply_to=(),
        direction="received",
    )


def _count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM person").fetchone()[0])


def test_refresh_rebuilds_on_a_new_generation_or_new_links_only(tmp_path: Path) -> None:
    cache = _Cache()
    cache.stored = [_message("k1", "a@example.org"), _message("k2", "b@example.org")]
    cache.generation_value = 1
    with closing(index.open_index(tmp_path)) as conn:
        assert index.refresh(conn, cache, {}) is True
        assert index.refresh(conn, cache, {}) is False
        assert (cache.reads, _count(conn)) == (1, 2)
        cache.stored = cache.stored[:1]  # an erase: the generation moves
        cache.generation_value = 2
        assert index.refresh(conn, cache, {}) is True
        assert _count(conn) == 1
        cache.stored.append(_message("k3", "c@example.org"))
        cache.generation_value = 3
        index.refresh(conn, cache, {})
        link(tmp_path, "a@example.org", "c@example.org")
        assert index.refresh(conn, cache, read_links(tmp_path)) is True
        assert _count(conn) == 1


def test_refresh_rebuilds_for_other_mail_at_the_same_generation(tmp_path: Path) -> None:
    # Regression: a cache made anew counts generations from 0 again, and an index tagged with
    # the generation alone took it for the cache it was built from.
    cache = _Cache()
    cache.stored = [_message("k1", "a@example.org")]
    cache.generation_value = 1
    with closing(index.open_index(tmp_path)) as conn:
        assert index.refresh(conn, cache, {}) is True
        cache.state_value = "2"
        cache.stored = [_message("k9", "z@example.org")]
        assert index.is_current(conn, cache, {}) is False
        assert index.refresh(conn, cache, {}) is True
        assert [a for (a,) in conn.execute("SELECT address FROM person_address")] == [
            "z@example.org"]


def test_a_damaged_index_is_rebuilt(tmp_path: Path) -> None:
    (tmp_path / index.INDEX_FILE).write_bytes(b"not a database" * 100)
    cache = _Cache()
    cache.stored = [_message("k1", "a@example.org")]
    with closing(index.open_index(tmp_path)) as conn:
        assert index.refresh(conn, cache, {}) is True
        assert _count(conn) == 1
