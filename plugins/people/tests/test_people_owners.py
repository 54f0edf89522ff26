"""People in a mail cache of several people (toolhost-email's owners): each principal's
people come from the accounts it owns, in an index of its own; a correspondent two people
share is, for each, only what that person exchanged with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from toolhost_email.erase import erase
from toolhost_email.importer import import_path
from toolhost_email.owners import set_owner

from people_support import (
    ANNA,
    OTHER_ACCOUNT,
    OTHER_MAIL,
    OWNER,
    OWNER_MAIL,
    Mail,
    email_dir,
    failed,
    harness,
    ok,
    people_command,
    write_mbox,
)
from toolhost.testing import Harness
from toolhost_people.index import INDEX_FILE, PRINCIPALS_DIR, index_path
from toolhost_people.messages import UNKNOWN_INTERACTION, UNKNOWN_PERSON

#: Bob's mailbox: Carol, and one message from Anna, whom Alice writes with too.
BOB_MAIL = [*OTHER_MAIL, Mail(ANNA, OTHER_ACCOUNT, "For Bob", 21, "b1@example.org")]


def _own_dir(data_dir: Path) -> Path:
    return data_dir / "plugins" / "toolhost-people"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    import_path(email_dir(root), OWNER, write_mbox(tmp_path / "a.mbox", OWNER_MAIL),
                owner="alice")
    import_path(email_dir(root), OTHER_ACCOUNT, write_mbox(tmp_path / "b.mbox", BOB_MAIL),
                owner="bob")
    return root


def _call(h: Harness, principal: str, name: str, **arguments: Any) -> Any:
    run = h.start_run(principal=principal)
    try:
        return h.call(name, arguments, run=run)
    finally:
        h.end_run(run)


def _found(h: Harness, principal: str, query: str) -> list[dict[str, Any]]:
    return list(ok(_call(h, principal, "people.search", query=query))["people"])


def test_each_person_finds_only_their_own_correspondents(data_dir: Path) -> None:
    with harness(data_dir) as h:
        assert [p["name"] for p in _found(h, "alice", "carol")] == []
        assert [p["name"] for p in _found(h, "bob", "carol")] == ["Carol Diaz"]
        (alices_anna,) = _found(h, "alice", "anna")
        (bobs_anna,) = _found(h, "bob", "anna")
        # One person, the same id; for each, only the mail of their own accounts.
        assert alices_anna["person_id"] == bobs_anna["person_id"]
        assert (alices_anna["received"], bobs_anna["received"]) == (9, 1)
        assert _found(h, "carol", "anna") == []  # owns nothing: nobody
        carol_id = _found(h, "bob", "carol")[0]["person_id"]
        assert failed(_call(h, "alice", "people.context", person_id=carol_id)) == UNKNOWN_PERSON
    own = _own_dir(data_dir)
    assert not (own / INDEX_FILE).exists()
    assert sorted(p.name for p in (own / PRINCIPALS_DIR).iterdir()
                  if p.suffix == ".sqlite3") == sorted(
        index_path(own, who).name for who in ("alice", "bob"))


def test_a_shared_correspondents_messages_of_another_person_are_never_read(
        data_dir: Path) -> None:
    with harness(data_dir) as h:
        anna = _found(h, "alice", "anna")[0]["person_id"]
        alices = ok(_call(h, "alice", "people.history", person_id=anna, limit=50))
        key = alices["interactions"][0]["interaction_id"]
        assert ok(_call(h, "alice", "people.history", person_id=anna, interaction_id=key))
        refused = _call(h, "bob", "people.history", person_id=anna, interaction_id=key)
        assert failed(refused) == UNKNOWN_INTERACTION
        bobs = ok(_call(h, "bob", "people.history", person_id=anna, limit=50))
        assert [i["subject"] for i in bobs["interactions"]] == ["For Bob"]


def test_the_one_person_index_goes_once_accounts_have_owners(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    import_path(email_dir(root), OWNER, write_mbox(tmp_path / "a.mbox", OWNER_MAIL))
    with harness(root) as h:
        assert len(_found(h, "alice", "anna")) == 1
        assert (_own_dir(root) / INDEX_FILE).exists()
        set_owner(email_dir(root), OWNER, "alice")
        assert len(_found(h, "alice", "anna")) == 1
        assert _found(h, "bob", "anna") == []
    assert not (_own_dir(root) / INDEX_FILE).exists()
    assert not index_path(_own_dir(root), "bob").exists()


def test_an_alias_of_one_principal_is_nobodys_person_for_that_principal_only(
        data_dir: Path) -> None:
    added = people_command(data_dir, "me", "--principal", "bob", "anna.smith@example.org")
    assert (added.returncode, added.stdout) == (0, "added: anna.smith@example.org\n")
    listed = people_command(data_dir, "me", "--principal", "bob")
    assert listed.stdout == "anna.smith@example.org\n"  # (bob's account: once people saw it)
    with harness(data_dir) as h:
        assert _found(h, "bob", "anna") == []
        assert len(_found(h, "alice", "anna")) == 1


def test_refresh_brings_every_principals_index_up_to_date_and_deletes_the_erased(
        data_dir: Path) -> None:
    with harness(data_dir) as h:
        _found(h, "alice", "anna")
        _found(h, "bob", "carol")
    erase(email_dir(data_dir), "owner", "bob")
    result = people_command(data_dir, "refresh")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == [
        "alice: rebuilt: 3 people", "bob: owns no account, index and addresses deleted"]
    assert not index_path(_own_dir(data_dir), "bob").exists()


def test_an_account_that_moves_on_stays_its_former_owners_own_address(tmp_path: Path) -> None:
    # Regression: the accounts a principal owned were never kept as its own addresses, so an
    # account moved to another principal turned into a person in its former owner's index.
    root = tmp_path / "data"
    root.mkdir()
    first, work = "ana@example.com", "ana.work@example.com"
    import_path(email_dir(root), first, write_mbox(tmp_path / "1.mbox", [
        Mail("Dan <dan@example.org>", first, "Hi", 1, "d1@example.org")]), owner="ana")
    import_path(email_dir(root), work, write_mbox(tmp_path / "2.mbox", [
        Mail(f"Ana <{first}>", work, "Note to self", 2, "n1@example.com")]), owner="ana")
    with harness(root) as h:
        assert _found(h, "ana", "ana") == []
        set_owner(email_dir(root), first, "bob")  # the operator moves one account
        assert _found(h, "ana", "ana") == []


def test_a_principal_that_owns_nothing_any_more_leaves_no_index(data_dir: Path) -> None:
    # Regression: after erase --owner, the principal's own calls read an empty index but
    # left its old file, with its correspondents, on disk.
    with harness(data_dir) as h:
        assert _found(h, "bob", "carol")
        bobs = index_path(_own_dir(data_dir), "bob")
        assert bobs.exists()
        erase(email_dir(data_dir), "owner", "bob")
        assert _found(h, "bob", "carol") == []
    assert not bobs.exists()


def test_refresh_forgets_an_erased_principal_and_survives_a_damaged_file(
        data_dir: Path) -> None:
    # Regressions: one damaged file under principals/ stopped refresh before it reached the
    # others, and an erased principal's addresses stayed in links.sqlite3.
    assert people_command(data_dir, "me", "--principal", "bob", "bob.alias@example.net"
                          ).returncode == 0
    with harness(data_dir) as h:
        _found(h, "alice", "anna")
        _found(h, "bob", "carol")
    junk = _own_dir(data_dir) / PRINCIPALS_DIR / ("0" * 32 + ".sqlite3")
    junk.write_bytes(b"not a database" * 100)
    erase(email_dir(data_dir), "owner", "bob")
    result = people_command(data_dir, "refresh")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == sorted([
        f"{junk.name}: not an index of a principal, deleted",
        "alice: rebuilt: 3 people",
        "bob: owns no account, index and addresses deleted"])
    assert not junk.exists() and not index_path(_own_dir(data_dir), "bob").exists()
    assert people_command(data_dir, "me", "--principal", "bob").stdout == ""
