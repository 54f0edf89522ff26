"""Derived data follows the cache: what toolhost-email erases is gone from people, and what it
imports later appears, without restarting the host."""

from __future__ import annotations

from pathlib import Path

from people_support import (
    ANNA,
    CAROL,
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
    people_command,
)
from toolhost.testing import Harness


def _names(host: Harness, query: str) -> list[str]:
    return [p["name"] for p in ok(host.invoke("people.search", query=query))["people"]]


def test_erase_an_account_then_search(fresh: Path) -> None:
    with harness(fresh) as host:
        carol = only_person(host, "carol")
        erase_mail(fresh, "account", OTHER_ACCOUNT)
        assert _names(host, "carol") == []
        assert failed(host.invoke("people.context", person_id=carol)) == (
            "tool.not_found.unknown_person")
        assert _names(host, "anna") == ["Anna Smith"]


def test_erase_a_thread_then_search(fresh: Path) -> None:
    with harness(fresh) as host:
        bob = only_person(host, "bob")
        history = ok(host.invoke("people.history", person_id=bob))["interactions"]
        report = next(i for i in history if i["subject"] == "Report")
        erase_mail(fresh, "thread", report["thread_id"])
        after = ok(host.invoke("people.search", query="bob"))["people"]
        assert [(p["sent"], p["received"]) for p in after] == [(1, 0)]
        assert failed(host.invoke("people.history", person_id=bob,
                                  interaction_id=report["interaction_id"])) == (
            "tool.not_found.unknown_interaction")


def test_an_import_after_the_first_call_appears(fresh: Path) -> None:
    with harness(fresh) as host:
        assert _names(host, "dave") == []
        import_mail(fresh, OWNER, [Mail("Dave <dave@example.org>", OWNER, "Hi", 25, "d1@x")],
                    "later")
        assert _names(host, "dave") == ["Dave"]
        anna = only_person(host, "anna")
        # Importing the same mailbox again adds nothing: same people, same counts.
        import_mail(fresh, OWNER, [Mail(ANNA, OWNER, "Lunch", 1, "m1@example.org")], "again")
        assert ok(host.invoke("people.context", person_id=anna))["received"] == 9


def test_parallel_calls_on_a_stale_index_all_see_the_new_cache(fresh: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with harness(fresh) as host:
        assert _names(host, "dave") == []
        import_mail(fresh, OWNER, [Mail("Dave <dave@example.org>", OWNER, "Hi", 25, "d1@x")],
                    "later")
        body = host.tool("people.search")

        def call(_: int) -> list[str]:
            output = body({"query": "dave", "limit": 10}, host.context())
            return [p["name"] for p in output.structured["people"]]  # type: ignore[union-attr]

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert list(pool.map(call, range(16))) == [["Dave"]] * 16


def test_erased_mail_leaves_the_index_files_on_refresh(fresh: Path) -> None:
    # Enough of the second account's mail that erasing it frees whole pages of the index:
    # a SQLite built without SECURE_DELETE leaves freed pages' bytes in the file unless the
    # connection says secure_delete (the index's does).
    import_mail(fresh, OTHER_ACCOUNT, [
        Mail(CAROL, OTHER_ACCOUNT, f"Carol Diaz writes, part {n}", 1 + n % 28, f"c{n}@x")
        for n in range(300)], "carol")
    with harness(fresh) as host:
        only_person(host, "carol")  # the index now holds Carol
    own = fresh / "plugins" / "toolhost-people"
    assert any(b"carol@example.org" in p.read_bytes() for p in own.iterdir())
    erase_mail(fresh, "account", OTHER_ACCOUNT)
    done = people_command(fresh, "refresh")
    assert (done.returncode, done.stdout) == (0, "rebuilt: 3 people\n")
    for path in own.iterdir():
        data = path.read_bytes()
        assert b"carol@example.org" not in data and b"Carol Diaz" not in data, path.name


def test_a_cache_that_cannot_be_read_is_a_static_failure(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    cache = email_dir(data_dir) / "mail.sqlite3"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not a database" * 100)
    with harness(data_dir) as host:
        outcome = host.invoke("people.search", query="anna")
        assert failed(outcome) == "tool.upstream_unavailable.people_source_unavailable"
        assert outcome.failure is not None and outcome.failure.retryable is False
    done = people_command(data_dir, "refresh")
    assert done.returncode == 1
    assert done.stderr.startswith(f"toolhost-people: cannot read the mail cache in "
                                  f"{email_dir(data_dir)}: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_no_cache_yet_is_no_people(tmp_path: Path) -> None:
    with harness(tmp_path / "data") as host:
        assert ok(host.invoke("people.search", query="anna")) == {"people": [], "more": False}
        assert failed(host.invoke("people.context", person_id="p_0000000000000000")) == (
            "tool.not_found.unknown_person")
