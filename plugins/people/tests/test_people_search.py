"""people.search on the fixture mailbox: width- and case-insensitive matching on names and
addresses, the documented order, the owner left out, and the static failures."""

from __future__ import annotations

import pytest

from people_support import failed, ok, only_person
from toolhost.testing import Harness


@pytest.mark.parametrize("query", [
    "\uff21\uff2e\uff2e\uff21",  # fullwidth ANNA
    "aNNa",
    "ANNA.SMITH@EXAMPLE.ORG",
    "\uff53\uff4d\uff49\uff54\uff48",  # fullwidth smith
    "Example.ORG",
])
def test_anna_is_found_by_a_fullwidth_or_differently_cased_query(
        host: Harness, query: str) -> None:
    people = ok(host.invoke("people.search", query=query))["people"]
    assert [p["name"] for p in people][:1] == ["Anna Smith"]
    assert people[0]["addresses"] == ["anna.smith@example.org"]


def test_a_name_with_diacritics_is_found_folded(host: Harness) -> None:
    assert only_person(host, "ZOË ÅNGSTRÖM") == only_person(host, "zoë")


def test_an_entry_counts_interactions_per_direction(host: Harness) -> None:
    (anna,) = [p for p in ok(host.invoke("people.search", query="anna"))["people"]]
    # Nine messages from Anna (one undated) and the owner's reply to her.
    assert (anna["sent"], anna["received"]) == (1, 9)
    assert anna["last_interaction"] == "2026-11-12T09:00:00Z"
    (bob,) = ok(host.invoke("people.search", query="bob"))["people"]
    assert (bob["name"], bob["sent"], bob["received"]) == ("Bob Jones", 1, 1)


def test_the_owner_is_not_a_person(host: Harness) -> None:
    assert ok(host.invoke("people.search", query="owner@example.com"))["people"] == []


def test_order_is_rank_then_interactions_and_is_deterministic(host: Harness) -> None:
    # "example" is in every address: no address equals or starts with it, so the word-start
    # matches (after "@") order by interactions: Anna 10, Bob 2, then Carol, Zoë by recency.
    first = ok(host.invoke("people.search", query="example"))
    assert [p["name"] for p in first["people"]] == [
        "Anna Smith", "Bob Jones", "Carol Diaz", "Zoë Ångström"]
    assert ok(host.invoke("people.search", query="example")) == first
    # An address equal to the query ranks before more active people that merely contain it.
    exact = ok(host.invoke("people.search", query="zoe@example.com"))["people"]
    assert [p["name"] for p in exact] == ["Zoë Ångström"]


def test_limit_and_more(host: Harness) -> None:
    page = ok(host.invoke("people.search", query="example", limit=2))
    assert [p["name"] for p in page["people"]] == ["Anna Smith", "Bob Jones"]
    assert page["more"] is True
    assert ok(host.invoke("people.search", query="example", limit=4))["more"] is False


def test_no_match_is_an_empty_list(host: Harness) -> None:
    assert ok(host.invoke("people.search", query="nobody at all")) == {
        "people": [], "more": False}


@pytest.mark.parametrize("query", ["   ", "\u200b", "\t\n"])
def test_a_blank_query_is_refused(host: Harness, query: str) -> None:
    assert failed(host.invoke("people.search", query=query)) == (
        "tool.invalid_arguments.blank_query")


def test_bounds_get_static_failures(host: Harness) -> None:
    too_long = host.invoke("people.search", query="a" * 201)
    assert failed(too_long) == "tool.invalid_arguments.query_too_long"
    assert too_long.content == ("query is longer than 200 characters. Give part of a name or "
                                "an email address.")
    assert failed(host.invoke("people.search", query="")) == "tool.invalid_arguments.blank_query"
    assert failed(host.invoke("people.search", query="a", limit=26)) == (
        "tool.invalid_arguments.schema")
    assert ok(host.invoke("people.search", query="a" * 200))["people"] == []


def test_results_are_memory_trust(host: Harness) -> None:
    outcome = host.invoke("people.search", query="anna")
    assert outcome.output_trust is not None and outcome.output_trust.name == "MEMORY"
