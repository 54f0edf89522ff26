"""A whole-number float where a people tool's schema says integer (JSON Schema's integer admits
``3.0``): the bodies sliced ``rows[:3.0]`` and each call failed ``tool.internal.unexpected``
with TypeError. The host hands the body an int there (D404)."""

from __future__ import annotations

from people_support import ok, only_person
from toolhost.testing import Harness


def test_search_and_history_take_a_whole_number_float_limit(host: Harness) -> None:
    anna = only_person(host, "anna")
    found = ok(host.call("people.search", {"query": "anna", "limit": 3.0}))
    assert [p["person_id"] for p in found["people"]] == [anna]
    as_float = ok(host.call("people.history", {"person_id": anna, "limit": 2.0}))
    as_int = ok(host.call("people.history", {"person_id": anna, "limit": 2}))
    assert as_float == as_int and len(as_float["interactions"]) == 2
