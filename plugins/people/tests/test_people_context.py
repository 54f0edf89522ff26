"""people.context on the fixture mailbox."""

from __future__ import annotations

from people_support import ok, only_person
from toolhost.testing import Harness


def test_context_of_anna(host: Harness) -> None:
    anna = only_person(host, "anna")
    context = ok(host.invoke("people.context", person_id=anna))
    threads = context.pop("recent_threads")
    assert context == {
        "person_id": anna,
        "name": "Anna Smith",
        "addresses": ["anna.smith@example.org"],
        "names": ["Anna Smith", "Anna"],
        "first_interaction": "2026-11-01T09:00:00Z",
        "last_interaction": "2026-11-12T09:00:00Z",
        "sent": 1,
        "received": 9,
    }
    # Every message but the reply starts a thread of its own; the newest threads first.
    assert len(threads) == 9
    assert {t["subject"] for t in threads[:2]} == {"Same day A", "Same day B"}
    assert [t["subject"] for t in threads[2:]] == [
        "Note 4", "Note 3", "Note 2", "Note 1", "Note 0", "Re: Lunch", "Undated"]
    lunch = threads[7]
    assert (lunch["interactions"], lunch["last_interaction"]) == (2, "2026-11-02T09:00:00Z")
    assert threads[8]["last_interaction"] is None


def test_context_of_someone_cc_d(host: Harness) -> None:
    bob = only_person(host, "bob")
    context = ok(host.invoke("people.context", person_id=bob))
    assert (context["name"], context["addresses"], context["sent"], context["received"]) == (
        "Bob Jones", ["bob@example.net"], 1, 1)
    assert [t["subject"] for t in context["recent_threads"]] == ["Report", "Re: Lunch"]
