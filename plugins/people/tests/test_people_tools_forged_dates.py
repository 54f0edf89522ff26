"""D160 through the people tools, with the host's clock (needs store.py to pass it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from people_support import ENABLED, OWNER, PLUGINS, import_mail, ok, only_person
from test_people_forged_dates import MAIL, NOW
from toolhost.testing import FixedClock, Harness


def _history(host: Harness, person_id: str, limit: int) -> list[str]:
    subjects, cursor = [], None
    while True:
        arguments: dict[str, Any] = {"person_id": person_id, "limit": limit}
        if cursor is not None:
            arguments["cursor"] = cursor
        page = ok(host.invoke("people.history", **arguments))
        subjects += [i["subject"] for i in page["interactions"]]
        if (cursor := page["next_cursor"]) is None:
            return subjects


def test_the_tools_rank_a_forged_future_date_below_every_real_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    import_mail(data, OWNER, MAIL, "owner")
    with Harness.over(PLUGINS, settings=ENABLED, data_dir=data, clock=FixedClock(NOW)) as host:
        anna = only_person(host, "anna")
        for limit in (1, 2, 50):
            assert _history(host, anna, limit) == ["Real B", "Real A", "Forged", "Undated"]
        context = ok(host.invoke("people.context", person_id=anna))
        found = ok(host.invoke("people.search", query="example.org"))["people"]
    assert (context["name"], context["first_interaction"], context["last_interaction"]) == (
        "Anna S.", "2026-11-01T09:00:00Z", "2026-11-02T09:00:00Z")
    assert [t["subject"] for t in context["recent_threads"]] == [
        "Real B", "Real A", "Forged", "Undated"]
    assert [(p["name"], p["last_interaction"]) for p in found] == [
        ("Anna S.", "2026-11-02T09:00:00Z"), ("Spam", "9999-12-31T23:59:59Z")]
