"""The operator's links (``toolhost-people link``): two addresses become one person, with both
addresses, the names of both and the interactions of both; and bad input is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from people_support import failed, harness, ok, only_person, people_command


def test_link_merges_two_people_and_unlink_splits_them(fresh: Path) -> None:
    with harness(fresh) as host:
        anna, bob = only_person(host, "anna"), only_person(host, "bob")
        done = people_command(fresh, "link", "BOB@example.net", "Anna.Smith@Example.org")
        assert (done.returncode, done.stdout) == (
            0, "linked: anna.smith@example.org bob@example.net\n")
        merged = only_person(host, "bob")
        # The group is named by its smallest address: Anna's, so Anna keeps her id.
        assert merged == anna
        context = ok(host.invoke("people.context", person_id=merged))
        assert context["addresses"] == ["anna.smith@example.org", "bob@example.net"]
        # Most used first: Bob's name is in two messages, Anna's short name in one.
        assert context["names"] == ["Anna Smith", "Bob Jones", "Anna"]
        # The reply to Anna with Bob in Cc is one interaction, not two.
        assert (context["sent"], context["received"]) == (1, 10)
        assert failed(host.invoke("people.context", person_id=bob)) == (
            "tool.not_found.unknown_person")
        listed = people_command(fresh, "links")
        assert listed.stdout == "anna.smith@example.org bob@example.net\n"

        assert people_command(fresh, "unlink", "bob@example.net").returncode == 0
        assert only_person(host, "bob") == bob
        assert people_command(fresh, "links").stdout == ""


def test_links_are_transitive(fresh: Path) -> None:
    with harness(fresh) as host:
        people_command(fresh, "link", "zoe@example.com", "bob@example.net")
        people_command(fresh, "link", "bob@example.net", "carol@example.org")
        people = ok(host.invoke("people.search", query="example"))["people"]
        assert [p["name"] for p in people] == ["Anna Smith", "Bob Jones"]
        assert people[1]["addresses"] == ["bob@example.net", "carol@example.org",
                                          "zoe@example.com"]


@pytest.mark.parametrize(("args", "message"), [
    (("link", "not-an-address", "bob@example.net"),
     "toolhost-people: 'not-an-address' is not an email address (local-part@domain, no "
     "spaces, at most 320 characters)\n"),
    (("link", "bob@example.net", "BOB@EXAMPLE.NET"),
     "toolhost-people: give two different addresses\n"),
    (("unlink", "bob@example.net"),
     "toolhost-people: bob@example.net is not linked to another address\n"),
])
def test_bad_input_is_one_line_and_status_2(tmp_path: Path, args: tuple[str, ...],
                                             message: str) -> None:
    done = people_command(tmp_path, *args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message)


def test_refresh_rebuilds_once(fresh: Path) -> None:
    first = people_command(fresh, "refresh")
    assert (first.returncode, first.stdout) == (0, "rebuilt: 4 people\n")
    assert people_command(fresh, "refresh").stdout == "already current: 4 people\n"
