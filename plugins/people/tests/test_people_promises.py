"""Adversarial review of toolhost-people (issue #16): each test states behaviour the issue, the
specification's people classes or the plugin's own README promises. Every test above the first
"held" section failed when written, for the reason its comment gives; the "held" ones pass and stay
as regression tests for what the review tried and found sound.
"""

from __future__ import annotations

import base64
import mailbox
import sqlite3
from collections.abc import Sequence
from email.message import EmailMessage
from pathlib import Path

import pytest

from people_support import (
    ANNA,
    OTHER_ACCOUNT,
    OWNER,
    Mail,
    email_dir,
    erase_mail,
    failed,
    harness,
    import_mail,
    ok,
    only_person,
)
from toolhost.testing import Harness


def _forged_cursor(person_id: str, position: str, message_key: str) -> str:
    raw = "\x1f".join((person_id, position, message_key)).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _import_messages(data_dir: Path, account: str, messages: Sequence[EmailMessage],
                     name: str) -> None:
    """Messages built by the test (headers the Mail tuple cannot express), imported through
    toolhost-email's importer as people_support.import_mail does."""
    from toolhost_email.importer import import_path

    path = data_dir.parent / f"{name}.mbox"
    box = mailbox.mbox(path, create=True)
    try:
        for message in messages:
            box.add(message)
        box.flush()
    finally:
        box.close()
    import_path(email_dir(data_dir), account, path)


def _message(sender: str, subject: str, message_id: str, **headers: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = OWNER
    message["Subject"] = subject
    message["Date"] = "Mon, 02 Nov 2026 09:00:00 +0000"
    message["Message-ID"] = f"<{message_id}>"
    for name, value in headers.items():
        message[name] = value
    message.set_content("Hello.\n")
    return message


# ------------------------------------------------------------------------------ cursor


@pytest.mark.parametrize("position", ["9" * 40, "-" + "9" * 40, str(2**63)])
def test_a_cursor_with_a_position_out_of_range_is_bad_cursor(host: Harness,
                                                             position: str) -> None:
    # Base64 of "<person>\x1f<digits>\x1f<key>" decodes, but the digits overflow SQLite's
    # 64-bit INTEGER when bound: the cursor did not come from this tool.
    anna = only_person(host, "anna")
    outcome = host.invoke("people.history", person_id=anna,
                          cursor=_forged_cursor(anna, position, "k"))
    assert failed(outcome) == "tool.invalid_arguments.bad_cursor"


# ------------------------------------------------------------------------------ index


def _index_path(data_dir: Path) -> Path:
    return data_dir / "plugins" / "toolhost-people" / "index.sqlite3"


def test_a_damaged_page_of_a_current_index_is_rebuilt(fresh: Path) -> None:
    with harness(fresh) as host:
        only_person(host, "anna")  # builds the index, current with the cache
    path = _index_path(fresh)
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'person'").fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size:root * page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))
    # The README: "The index is derived: deleting it is safe"; the notes: "a damaged or
    # other-layout file is deleted and rebuilt". Here the damage is past the header.
    with harness(fresh) as host:
        assert only_person(host, "anna")


def test_an_index_that_cannot_be_opened_is_a_static_failure(fresh: Path) -> None:
    _index_path(fresh).parent.mkdir(parents=True, exist_ok=True)
    _index_path(fresh).mkdir()  # not a file: neither opened nor removable as one
    with harness(fresh) as host:
        outcome = host.invoke("people.search", query="anna")
    assert failed(outcome) == (
        "tool.upstream_unavailable.people_index_unavailable"), outcome.failure


# ------------------------------------------------------------------------------ erase


def test_an_erased_account_does_not_become_a_person(fresh: Path) -> None:
    # The owner writes from one account to the other; both are the owner's, so neither is a
    # person. Erasing the second account must not turn its address into a person (derived
    # from the first account's mail): the issue says an erased account disappears.
    import_mail(fresh, OWNER, [Mail(OWNER, f"Me <{OTHER_ACCOUNT}>", "Note to self", 21,
                                    "self1@example.com")], "self")
    with harness(fresh) as host:
        assert ok(host.invoke("people.search", query="second"))["people"] == []
        erase_mail(fresh, "account", OTHER_ACCOUNT)
        assert ok(host.invoke("people.search", query="second"))["people"] == []


# ------------------------------------------------------------------------------ addresses


@pytest.mark.parametrize("address", [
    "stra\u00dfe@example.de",  # ß: casefold makes it "strasse", another mailbox
    "\u0391\u03bb\u03ad\u03be\u03b1\u03bd\u03b4\u03c1\u03bf\u03c2@example.gr",  # final sigma
])
def test_an_address_is_returned_as_the_mail_gives_it(fresh: Path, address: str) -> None:
    # Folding is for comparing; the address shown (and so the one the model would quote or
    # write to) must be the mailbox in the mail, not its fold.
    _import_messages(fresh, OWNER, [_message(f"Someone <{address}>", "Hi", "x1@example.de")],
                     "intl")
    with harness(fresh) as host:
        (entry,) = ok(host.invoke("people.search", query=address))["people"]
        # toolhost-email lower-cases an address (str.lower keeps ß and a final ς).
        assert entry["addresses"] == [address.lower()]
        context = ok(host.invoke("people.context", person_id=entry["person_id"]))
        assert context["addresses"] == [address.lower()]


def test_two_mailboxes_that_only_fold_alike_are_two_people(fresh: Path) -> None:
    _import_messages(fresh, OWNER, [
        _message("A <stra\u00dfe@example.de>", "One", "x1@example.de"),
        _message("B <strasse@example.de>", "Two", "x2@example.de"),
    ], "intl")
    with harness(fresh) as host:
        people = ok(host.invoke("people.search", query="example.de"))["people"]
        assert len(people) == 2, people


# ------------------------------------------------------------------------------ bounds


def test_long_display_names_within_the_caches_bound_keep_search_structured(
        fresh: Path) -> None:
    # Display names are text outsiders chose; toolhost-email keeps up to 200 characters of
    # one. search's output schema states no bound for name, and 25 entries of 200 four-byte
    # characters (~20 kB) pass its maximum_output_bytes (16,384): the host then withholds
    # the structured result and returns an excerpt. 26 mails are enough to do that to every
    # search that finds their senders.
    _import_messages(fresh, OWNER, [
        _message(f"Mallory{n} {chr(0x1F600 + n) * 190} <mallory{n}@example.net>", "Hi",
                 f"l{n}@example.net")
        for n in range(26)], "long")
    with harness(fresh) as host:
        outcome = host.invoke("people.search", query="mallory", limit=25)
        assert outcome.ok and not outcome.truncated
        assert len(ok(outcome)["people"]) == 25


def test_long_subjects_within_the_caches_bound_keep_context_and_history_structured(
        fresh: Path) -> None:
    # toolhost-email keeps up to 1,000 characters of a subject. Ten threads of such subjects
    # in CJK (three bytes a character, ~30 kB) pass people.context's 16,384 bytes, and a page
    # of 50 (~150 kB) history 1.0.0's 65,536: no maxLength on subject in either schema.
    _import_messages(fresh, OWNER, [
        _message("Mallory <mallory@example.net>", f"{n:02d}" + "\u984c" * 998,
                 f"l{n}@example.net")
        for n in range(50)], "long")
    with harness(fresh) as host:
        mallory = only_person(host, "mallory")
        context = host.invoke("people.context", person_id=mallory)
        assert context.ok and not context.truncated
        page = host.call("people.history", {"person_id": mallory, "limit": 50},
                         version="1.0.0")
        assert page.ok and not page.truncated
        assert len(ok(page)["interactions"]) == 50


def test_a_source_read_within_its_stated_bounds_stays_structured(fresh: Path) -> None:
    # The 1.1.0 source schema allows 100 headers of 2,000 characters plus 20,000 of text
    # (~220 kB); maximum_output_bytes is 131,072. A mail within toolhost-email's own bounds
    # (100 headers, 4,000 characters each) reaches it.
    extra = {f"X-Filler-{n}": "v" * 1990 for n in range(80)}
    _import_messages(fresh, OWNER, [
        _message("Mallory <mallory@example.net>", "Headers", "h1@example.net", **extra),
    ], "headers")
    with harness(fresh) as host:
        mallory = only_person(host, "mallory")
        (interaction,) = ok(host.invoke("people.history", person_id=mallory))["interactions"]
        outcome = host.invoke("people.history", person_id=mallory,
                              interaction_id=interaction["interaction_id"])
        assert outcome.ok and not outcome.truncated
        assert ok(outcome)["source"]["truncated"] is False


# ------------------------------------------------------------------------------ fold


@pytest.mark.parametrize("query", ["ilker", "ILKER", "Ilker"])
def test_a_dotted_capital_i_is_found_by_a_differently_cased_query(fresh: Path,
                                                                  query: str) -> None:
    # casefold(U+0130 CAPITAL I WITH DOT ABOVE) is "i" + U+0307 COMBINING DOT ABOVE, which
    # NFKC cannot compose: the folded name does not contain "ilker", so the only
    # case-insensitive query that finds this name starts with U+0130 itself.
    import_mail(fresh, OWNER, [Mail("\u0130lker Y\u0131lmaz <iy@example.com.tr>", OWNER,
                                    "Merhaba", 22, "tr1@example.com.tr")], "tr")
    with harness(fresh) as host:
        people = ok(host.invoke("people.search", query=query))["people"]
        assert [p["name"] for p in people] == ["\u0130lker Y\u0131lmaz"]


def test_an_invisible_soft_hyphen_does_not_split_a_name(fresh: Path) -> None:
    # U+00AD is invisible ("Annalena" on screen); fold() turns every Cf character into a
    # space, so the name folds to "anna lena" and the name as read is not found.
    import_mail(fresh, OWNER, [Mail("Anna\u00adlena Berg <ab@example.de>", OWNER, "Hallo", 22,
                                    "sh1@example.de")], "shy")
    with harness(fresh) as host:
        people = ok(host.invoke("people.search", query="annalena"))["people"]
        assert [p["name"] for p in people] == ["Anna\u00adlena Berg"]


# ------------------------------------------------------------------------------ direction


def test_the_owners_mail_copied_to_their_other_account_is_not_received(fresh: Path) -> None:
    # The owner writes to Dave from one account with the other in Cc; both mailboxes hold
    # the mail. Under the second account toolhost-email calls it "received" (From is not that
    # account), but people know both addresses are the owner's: the owner received nothing
    # from Dave.
    mail = Mail(OWNER, "Dave <dave@example.org>", "Plan", 23, "plan1@example.com",
                cc=OTHER_ACCOUNT)
    import_mail(fresh, OWNER, [mail], "sent")
    import_mail(fresh, OTHER_ACCOUNT, [mail], "copy")
    with harness(fresh) as host:
        dave = only_person(host, "dave")
        context = ok(host.invoke("people.context", person_id=dave))
        assert context["received"] == 0, context


# ------------------------------------------------------------------------------ scopes


def test_an_unpinned_history_page_needs_only_people_read(host: Harness) -> None:
    # The specification's people classes: all three tools require people.read; "the exception is
    # a people.history@1.1.0 source read ... It also requires email.read". 1.1.0 declares
    # email.read for every call, so a principal holding people.read (what the specification says
    # the tools need) cannot page history at all in a chat that is not pinned: an
    # unversioned call resolves to 1.1.0. The tool can see context.scopes and require
    # email.read for interaction_id only, as it lowers trust for that result only.
    anna = only_person(host, "anna")
    run = host.start_run(scopes={"people.read"})
    try:
        page = host.call("people.history", {"person_id": anna}, run=run)
        assert page.version == "1.1.0"
        assert len(ok(page)["interactions"]) == 10
    finally:
        host.end_run(run)


# ------------------------------------------------------------------------------ cache


def test_a_damaged_cache_on_a_source_read_is_a_static_failure(fresh: Path) -> None:
    with harness(fresh) as host:
        bob = only_person(host, "bob")
        (first, *_) = ok(host.invoke("people.history", person_id=bob))["interactions"]
    cache = email_dir(fresh) / "mail.sqlite3"
    with sqlite3.connect(cache) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(cache.read_bytes())
    data[(root - 1) * page_size:root * page_size] = b"\xa5" * page_size
    cache.write_bytes(bytes(data))
    # The index is current (the generation, in meta, is intact), so only the source read
    # touches the damaged table: it must end as the declared people_source_unavailable.
    with harness(fresh) as host:
        outcome = host.invoke("people.history", person_id=bob,
                              interaction_id=first["interaction_id"])
        assert failed(outcome) == (
            "tool.upstream_unavailable.people_source_unavailable"), outcome.failure


# ------------------------------------------------------------------------------ held: erase


def test_a_stale_cursor_after_an_erase_still_pages_without_repeat(fresh: Path) -> None:
    with harness(fresh) as host:
        anna = only_person(host, "anna")
        first = ok(host.invoke("people.history", person_id=anna, limit=3))
        erase_mail(fresh, "message", first["interactions"][-1]["interaction_id"])
        rest = ok(host.invoke("people.history", person_id=anna, limit=50,
                              cursor=first["next_cursor"]))
        seen = {i["interaction_id"] for i in first["interactions"]}
        assert not seen & {i["interaction_id"] for i in rest["interactions"]}
        assert len(rest["interactions"]) == 7


def test_erasing_the_only_mail_with_a_name_drops_the_name(fresh: Path) -> None:
    with harness(fresh) as host:
        anna = only_person(host, "anna")
        assert "Anna" in ok(host.invoke("people.context", person_id=anna))["names"]
        history = ok(host.invoke("people.history", person_id=anna, limit=50))["interactions"]
        reply = next(i for i in history if i["subject"] == "Re: Lunch")
        erase_mail(fresh, "message", reply["interaction_id"])
        context = ok(host.invoke("people.context", person_id=anna))
        assert context["names"] == ["Anna Smith"]
        assert (context["sent"], context["received"]) == (0, 9)
        assert ANNA.startswith(context["name"])


# ------------------------------------------------------------------------------ held: concurrency


def test_parallel_first_calls_on_a_new_data_directory(fresh: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with harness(fresh) as host:
        body = host.tool("people.search")

        def call(_: int) -> list[str]:
            output = body({"query": "anna", "limit": 10}, host.context())
            return [p["name"] for p in output.structured["people"]]  # type: ignore[union-attr]

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert list(pool.map(call, range(16))) == [["Anna Smith"]] * 16


def test_calls_while_an_import_runs(fresh: Path) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    batch = [Mail(f"P{n} <p{n}@bulk.example>", OWNER, f"Bulk {n}", 1 + n % 28, f"b{n}@bulk")
             for n in range(600)]
    with harness(fresh) as host:
        only_person(host, "anna")
        done = threading.Event()

        def importing() -> None:
            try:
                import_mail(fresh, OWNER, batch, "bulk")
            finally:
                done.set()

        def calling(_: int) -> list[str]:
            codes = []
            while not done.is_set():
                outcome = host.invoke("people.search", query="anna")
                codes.append("ok" if outcome.ok else failed(outcome))
            return codes

        with ThreadPoolExecutor(max_workers=4) as pool:
            callers = [pool.submit(calling, n) for n in range(3)]
            pool.submit(importing).result()
            results = [c.result() for c in callers]
        assert {code for codes in results for code in codes} <= {"ok"}
        assert len(ok(host.invoke("people.search", query="bulk.example", limit=25))[
            "people"]) == 25
