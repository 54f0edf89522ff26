"""Accounts with owners: in a cache of several people every email tool reads only the
caller's accounts and the caller's feedback; a cache of one person reads as it always did;
the operator's commands give, move and take owners, erase one owner's everything, and migrate
a cache written before owners existed."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from email_support import AUTHSERV, MODE, UNSUBSCRIBE, cache_dir, harness, list_mail, ok
from mail_support import mail, write_mbox
from toolhost.testing import Harness
from toolhost_email import open_mail_cache
from toolhost_email.importer import ImportFailed, import_path
from toolhost_email.messages import UNKNOWN_THREAD
from toolhost_email.store import SCHEMA_VERSION, open_writable

ALICE_MAIL = "alice@example.com"
BOB_MAIL = "bob@example.net"
TURN = "From now on please keep every reply short, thank you"
FEEDBACK = "please keep every reply short"
SETTINGS = {**MODE, **UNSUBSCRIBE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV}


def _mbox(tmp_path: Path, name: str, to: str) -> Path:
    return write_mbox(tmp_path / f"{name}.mbox", [
        mail(message_id=f"<{name}@example.org>", subject=f"For {name}", to=to),
        list_mail(message_id=f"<{name}-list@lists.example.org>",
                  unsubscribe=f"<https://unsub.lists.example.org/{name}>"),
    ])


def _cli(data_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLHOST_DATA_DIR": str(data_root)}
    return subprocess.run([sys.executable, "-m", "toolhost_email.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def one_person(tmp_path: Path) -> Path:
    """A cache of one person: two accounts, no owner."""
    root = tmp_path / "data"
    import_path(cache_dir(root), ALICE_MAIL, _mbox(tmp_path, "alice", ALICE_MAIL))
    import_path(cache_dir(root), BOB_MAIL, _mbox(tmp_path, "bob", BOB_MAIL))
    return root


@pytest.fixture
def two_people(tmp_path: Path) -> Path:
    """A cache of two people: each imported their account with its owner."""
    root = tmp_path / "data"
    import_path(cache_dir(root), ALICE_MAIL, _mbox(tmp_path, "alice", ALICE_MAIL), owner="alice")
    import_path(cache_dir(root), BOB_MAIL, _mbox(tmp_path, "bob", BOB_MAIL), owner="bob")
    return root


@pytest.fixture
def h(two_people: Path) -> Iterator[Harness]:
    with harness(two_people, SETTINGS) as harnessed:
        yield harnessed


def _as(h: Harness, principal: str, name: str, user_turn: str | None = None,
        **arguments: Any) -> Any:
    run = h.start_run(principal=principal, user_turn=user_turn)
    try:
        outcome = h.call(name, arguments, run=run)
        if outcome.paused:  # email.unsubscribe always asks (D430): approved within the call
            outcome = h.approve(outcome.invocation_id, run=run)
        return outcome
    finally:
        h.end_run(run)


def _thread(root: Path, account: str) -> str:
    with open_mail_cache(cache_dir(root)) as cache:  # the operator's view: every account
        return next(m.thread_id for m in cache.messages()
                    if m.account == account and m.subject.startswith("For "))


def _inbox_accounts(outcome: Any) -> set[str]:
    return {row["source"]["account"] for row in ok(outcome)["inbox"]}


def test_a_cache_of_one_person_reads_whole_for_every_principal(one_person: Path) -> None:
    with harness(one_person, SETTINGS) as h:
        for principal in ("alice", "bob", "someone"):
            assert _inbox_accounts(_as(h, principal, "email.context")) == {ALICE_MAIL, BOB_MAIL}


def test_each_person_reads_only_their_own_accounts(h: Harness, two_people: Path) -> None:
    assert _inbox_accounts(_as(h, "alice", "email.context")) == {ALICE_MAIL}
    assert _inbox_accounts(_as(h, "bob", "email.context")) == {BOB_MAIL}
    # Naming the other's account reads as an account with no mail; a principal that owns
    # nothing reads nothing at all.
    assert ok(_as(h, "alice", "email.context", account=BOB_MAIL))["inbox"] == []
    assert ok(_as(h, "carol", "email.context"))["inbox"] == []


def test_another_persons_thread_is_no_thread(h: Harness, two_people: Path) -> None:
    bobs = _thread(two_people, BOB_MAIL)
    assert ok(_as(h, "bob", "email.context", thread_id=bobs))["thread"]
    refused = _as(h, "alice", "email.context", thread_id=bobs)
    assert refused.failure is not None and refused.failure.reason_code == UNKNOWN_THREAD
    feedback = _as(h, "alice", "email.feedback", user_turn=TURN, thread_id=bobs,
                   quote=FEEDBACK, feedback=FEEDBACK)
    assert feedback.failure is not None and feedback.failure.reason_code == UNKNOWN_THREAD


def test_subscriptions_and_unsubscribe_are_the_callers_own(h: Harness) -> None:
    alices = ok(_as(h, "alice", "email.subscriptions"))["subscriptions"]
    bobs = ok(_as(h, "bob", "email.subscriptions"))["subscriptions"]
    assert [s["account"] for s in alices] == [ALICE_MAIL]
    assert [s["account"] for s in bobs] == [BOB_MAIL]
    pair = {k: bobs[0][k] for k in ("subscription_id", "evidence_digest")}
    # Bob's pair is unknown to Alice's call: decided before any request is sent.
    outcome = _as(h, "alice", "email.unsubscribe", requests=[pair])
    assert ok(outcome)["results"] == [{**{"subscription_id": pair["subscription_id"]},
                                      "outcome": "unknown_subscription"}]


def test_feedback_is_read_only_by_whoever_gave_it(h: Harness, two_people: Path) -> None:
    alices = ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                    feedback=FEEDBACK))
    bobs = ok(_as(h, "bob", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                  feedback=FEEDBACK))
    again = ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                   feedback=FEEDBACK))
    # The same words from two people are two records; from one person twice, one.
    assert alices["feedback_id"] != bobs["feedback_id"] and again == alices
    assert [f["feedback_id"] for f in ok(_as(h, "alice", "email.context"))["feedback"]] == [
        alices["feedback_id"]]
    assert [f["feedback_id"] for f in ok(_as(h, "bob", "email.context"))["feedback"]] == [
        bobs["feedback_id"]]
    assert ok(_as(h, "carol", "email.context"))["feedback"] == []


def test_an_account_without_an_owner_is_nobodys_until_given_one(
        tmp_path: Path, one_person: Path) -> None:
    with harness(one_person, SETTINGS) as h:
        kept = ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                      feedback=FEEDBACK))
        # One account given an owner: the cache is several people's, the other account and
        # the feedback recorded before are nobody's...
        moved = _cli(one_person, "owners", "set", BOB_MAIL.upper(), "bob")
        assert (moved.returncode, moved.stdout) == (0, f"{BOB_MAIL} is bob's\n")
        assert _inbox_accounts(_as(h, "alice", "email.context")) == set()
        assert ok(_as(h, "alice", "email.context"))["feedback"] == []
        listed = _cli(one_person, "owners")
        assert listed.stdout == f"{ALICE_MAIL} (no owner)\n{BOB_MAIL} bob\n"
        # ... until the one command gives them to one principal, ids kept.
        given = _cli(one_person, "owners", "set", "--unowned", "alice")
        assert given.stdout == "1 accounts without an owner are alice's\n"
        assert _inbox_accounts(_as(h, "alice", "email.context")) == {ALICE_MAIL}
        assert [f["feedback_id"] for f in ok(_as(h, "alice", "email.context"))["feedback"]] \
            == [kept["feedback_id"]]
        assert ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                      feedback=FEEDBACK)) == kept
        # Clearing an owner never turns the cache back into everyone's.
        cleared = _cli(one_person, "owners", "clear", ALICE_MAIL)
        assert cleared.returncode == 0
        assert _inbox_accounts(_as(h, "alice", "email.context")) == set()
        assert _inbox_accounts(_as(h, "bob", "email.context")) == {BOB_MAIL}
        assert _cli(one_person, "owners", "clear", ALICE_MAIL).returncode == 2


def test_an_account_of_another_owner_is_refused_and_nothing_is_imported(
        tmp_path: Path, two_people: Path) -> None:
    extra = write_mbox(tmp_path / "more.mbox", [mail(message_id="<more@example.org>",
                                                     to=BOB_MAIL)])
    with pytest.raises(ImportFailed, match="belongs to 'bob'"):
        import_path(cache_dir(two_people), BOB_MAIL, extra, owner="alice")
    with open_mail_cache(cache_dir(two_people)) as cache:
        assert all(m.message_id != "more@example.org" for m in cache.messages())
    result = _cli(two_people, "import", "--account", BOB_MAIL, "--owner", "alice", str(extra))
    assert result.returncode == 2
    assert result.stderr == (f"toolhost-email: account {BOB_MAIL} belongs to 'bob': give it "
                             f"another owner with toolhost-email owners set {BOB_MAIL} "
                             "PRINCIPAL\n")
    same = _cli(two_people, "import", "--account", BOB_MAIL, "--owner", "bob", str(extra))
    assert same.stdout.startswith(f"imported {extra} as {BOB_MAIL} (owner bob): 1 read, 1 added")


def test_erase_by_owner_removes_their_mail_feedback_and_ownership(
        h: Harness, two_people: Path) -> None:
    ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK, feedback=FEEDBACK))
    bobs = ok(_as(h, "bob", "email.feedback", user_turn=TURN, quote=FEEDBACK, feedback=FEEDBACK))
    erased = _cli(two_people, "erase", "--owner", " alice ")
    assert (erased.returncode, erased.stdout) == (0, "erased owner alice: 2 messages removed\n")
    with sqlite3.connect(cache_dir(two_people) / "mail.sqlite3") as conn:
        assert conn.execute("SELECT DISTINCT account FROM messages").fetchall() == [(BOB_MAIL,)]
        assert conn.execute("SELECT owner FROM feedback").fetchall() == [("bob",)]
        assert conn.execute("SELECT * FROM account_owners").fetchall() == [(BOB_MAIL, "bob")]
        assert conn.execute("SELECT DISTINCT feedback_id FROM feedback_versions").fetchall() \
            == [(bobs["feedback_id"],)]
    assert _inbox_accounts(_as(h, "bob", "email.context")) == {BOB_MAIL}
    assert ok(_as(h, "alice", "email.context"))["inbox"] == []


@pytest.mark.parametrize("args", [
    ("owners", "set", ALICE_MAIL, "  "),
    ("owners", "set", "--unowned", ""),
    ("owners", "set", "not-an-address", "alice"),
    ("erase", "--owner", " "),
    ("import", "--account", ALICE_MAIL, "--owner", " ", "in.mbox"),
])
def test_bad_owner_commands_are_one_line_and_status_2(two_people: Path, args: tuple[str, ...]
                                                      ) -> None:
    result = _cli(two_people, *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("toolhost-email: ") and result.stderr.count("\n") == 1


def _as_schema_1(root: Path) -> None:
    """The cache as toolhost-email wrote it before owners existed."""
    with sqlite3.connect(cache_dir(root) / "mail.sqlite3") as conn:
        conn.execute("DROP TABLE account_owners")
        conn.execute("ALTER TABLE feedback DROP COLUMN owner")
        conn.execute("UPDATE meta SET value = 1 WHERE key = 'schema'")


def test_a_cache_written_before_owners_reads_then_migrates(one_person: Path) -> None:
    with harness(one_person, SETTINGS) as h:
        kept = ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                      feedback=FEEDBACK))
        _as_schema_1(one_person)
        # Read as it is (no writer has opened it yet): everyone's, as before.
        assert _inbox_accounts(_as(h, "bob", "email.context")) == {ALICE_MAIL, BOB_MAIL}
        assert [f["feedback_id"] for f in ok(_as(h, "bob", "email.context"))["feedback"]] == [
            kept["feedback_id"]]
        open_writable(cache_dir(one_person)).close()  # what any import or command does
        with sqlite3.connect(cache_dir(one_person) / "mail.sqlite3") as conn:
            assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (
                SCHEMA_VERSION,)
            assert conn.execute("SELECT owner FROM feedback").fetchall() == [("",)]
        assert ok(_as(h, "bob", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                      feedback=FEEDBACK)) == kept
        assert _cli(one_person, "owners", "set", "--unowned", "alice").returncode == 0
        assert [f["feedback_id"] for f in ok(_as(h, "alice", "email.context"))["feedback"]] == [
            kept["feedback_id"]]
        assert ok(_as(h, "bob", "email.context"))["feedback"] == []


def test_a_reader_open_across_the_migration_follows_the_new_owners(one_person: Path) -> None:
    # Regression: a reader opened on a schema-1 cache decided once that owners did not apply
    # and went on reading every account after the first owners were given.
    _as_schema_1(one_person)
    with open_mail_cache(cache_dir(one_person), "bob") as bobs:
        assert {m.account for m in bobs.messages()} == {ALICE_MAIL, BOB_MAIL}
        assert _cli(one_person, "owners", "set", BOB_MAIL, "bob").returncode == 0
        assert {m.account for m in bobs.messages()} == {BOB_MAIL}
        assert bobs.shared() and bobs.accounts() == {BOB_MAIL}


def test_giving_unowned_feedback_keeps_one_record_of_the_same_words(one_person: Path) -> None:
    # Regression: words recorded before and again after the first owner were two records of
    # one principal, and undoing one left the other applied.
    with harness(one_person, SETTINGS) as h:
        before = ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                        feedback=FEEDBACK))
        assert _cli(one_person, "owners", "set", BOB_MAIL, "bob").returncode == 0
        after = ok(_as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                       feedback=FEEDBACK))
        assert after["feedback_id"] != before["feedback_id"]
        assert _cli(one_person, "owners", "set", "--unowned", "alice").returncode == 0
        shown = ok(_as(h, "alice", "email.context"))["feedback"]
        assert [f["feedback_id"] for f in shown] == [after["feedback_id"]]
        undone = _cli(one_person, "feedback", "undo", after["feedback_id"])
        assert undone.returncode == 0
        assert ok(_as(h, "alice", "email.context"))["feedback"] == []


def test_listing_owners_makes_and_migrates_nothing(tmp_path: Path, one_person: Path) -> None:
    empty = tmp_path / "empty"
    assert (_cli(empty, "owners").stdout, cache_dir(empty).exists()) == ("", False)
    _as_schema_1(one_person)
    listed = _cli(one_person, "owners")
    assert listed.stdout == f"{ALICE_MAIL} (no owner)\n{BOB_MAIL} (no owner)\n"
    with sqlite3.connect(cache_dir(one_person) / "mail.sqlite3") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (1,)


def test_feedback_about_a_thread_before_any_import_is_unknown_thread(tmp_path: Path) -> None:
    # Regression (found by the conformance property run): with no cache yet, asking whose
    # accounts a thread may be of failed an internal assertion instead of answering.
    with harness(tmp_path / "empty", SETTINGS) as h:
        outcome = _as(h, "alice", "email.feedback", user_turn=TURN, quote=FEEDBACK,
                      feedback=FEEDBACK, thread_id="t_" + "0" * 32)
    assert outcome.failure is not None and outcome.failure.reason_code == UNKNOWN_THREAD
