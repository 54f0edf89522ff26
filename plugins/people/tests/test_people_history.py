"""people.history: newest first, undated last, and paging that never repeats or skips."""

from __future__ import annotations

from typing import Any

import pytest

from people_support import failed, ok, only_person
from toolhost.testing import Harness

ANNA_SUBJECTS_NEWEST_FIRST = {
    # The two messages of day 12 are ordered by message key (descending), so only as a set.
    "day 12": {"Same day A", "Same day B"},
    "rest": ["Note 4", "Note 3", "Note 2", "Note 1", "Note 0", "Re: Lunch", "Lunch", "Undated"],
}


def _pages(host: Harness, person_id: str, limit: int, version: str) -> list[list[dict[str, Any]]]:
    pages, cursor = [], None
    while True:
        arguments: dict[str, Any] = {"person_id": person_id, "limit": limit}
        if cursor is not None:
            arguments["cursor"] = cursor
        page = ok(host.call("people.history", arguments, version=version))
        pages.append(page["interactions"])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.parametrize("version", ["1.0.0", "1.1.0"])
def test_whole_history_newest_first(host: Harness, version: str) -> None:
    anna = only_person(host, "anna")
    (page,) = _pages(host, anna, 50, version)
    subjects = [i["subject"] for i in page]
    assert set(subjects[:2]) == ANNA_SUBJECTS_NEWEST_FIRST["day 12"]
    assert subjects[2:] == ANNA_SUBJECTS_NEWEST_FIRST["rest"]
    first = page[2]
    assert (first["date"], first["direction"], first["message_id"]) == (
        "2026-11-09T09:00:00Z", "received", "n4@example.org")
    reply = page[7]
    assert (reply["direction"], reply["subject"]) == ("sent", "Re: Lunch")
    # The reply is in Anna's first message's thread.
    assert reply["thread_id"] == page[8]["thread_id"]
    assert page[-1]["date"] is None
    assert len({i["interaction_id"] for i in page}) == 10


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 7, 9, 10])
def test_paging_never_repeats_or_skips(host: Harness, limit: int) -> None:
    anna = only_person(host, "anna")
    (whole,) = _pages(host, anna, 50, "1.0.0")
    pages = _pages(host, anna, limit, "1.0.0")
    assert [i for page in pages for i in page] == whole
    assert all(len(page) == limit for page in pages[:-1])
    assert 1 <= len(pages[-1]) <= limit


def test_a_cursor_of_another_person_or_made_up_is_refused(host: Harness) -> None:
    anna, bob = only_person(host, "anna"), only_person(host, "bob")
    cursor = ok(host.invoke("people.history", person_id=anna, limit=1))["next_cursor"]
    assert isinstance(cursor, str)
    for bad in ("bm9wZQ", "AAAA", "x" * 512):
        outcome = host.invoke("people.history", person_id=anna, cursor=bad)
        assert failed(outcome) == "tool.invalid_arguments.bad_cursor"
    outcome = host.invoke("people.history", person_id=bob, cursor=cursor)
    assert failed(outcome) == "tool.invalid_arguments.bad_cursor"
    assert outcome.content == ("That cursor is not one people.history returned for this "
                               "person_id. Omit cursor to start from the newest interaction.")
    for bad in ("not base64!", "x" * 513):  # the schema's pattern and maxLength, same code
        assert failed(host.invoke("people.history", person_id=anna, cursor=bad)) == (
            "tool.invalid_arguments.bad_cursor")


@pytest.mark.parametrize("tool", ["people.history", "people.context"])
def test_an_unknown_person_is_a_static_failure(host: Harness, tool: str) -> None:
    for person_id in ("p_0000000000000000", "someone"):
        outcome = host.invoke(tool, person_id=person_id)
        assert failed(outcome) == "tool.not_found.unknown_person"
        assert outcome.content == ("No person has that person_id. Use a person_id that "
                                   "people.search returned.")
