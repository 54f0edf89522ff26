"""What an adversarial review of people found, each test with the defect it guards against: a
mail cache made anew taken for the old one, two colliding person ids failing every call, one
index's stalled opening holding up every principal, ``refresh`` stopping at one file,
tracebacks from the command, another tool's connections keeping a deleted index open, and a
lock wait that outlasted the call so that ``people_busy`` never reached the caller."""

from __future__ import annotations

import hashlib
import itertools
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from toolhost_email.erase import erase
from toolhost_email.importer import import_path

from people_support import (
    OTHER_ACCOUNT,
    OTHER_MAIL,
    OWNER,
    OWNER_MAIL,
    Mail,
    email_dir,
    failed,
    harness,
    import_mail,
    ok,
    only_person,
    people_command,
    write_mbox,
)
from toolhost import Outcome
from toolhost.testing import Harness, remove_tree
from toolhost_people import cli, index

BUSY = "tool.upstream_unavailable.people_busy"

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                                reason="lists open files through /proc/self/fd")


def _own_dir(data_dir: Path) -> Path:
    return data_dir / "plugins" / "toolhost-people"


def _names(host: Harness, query: str) -> list[str]:
    return [p["name"] for p in ok(host.invoke("people.search", query=query))["people"]]


def _owned(tmp_path: Path) -> Path:
    """A data directory whose cache is two people's: alice owns the owner's account, bob the
    second account."""
    data = tmp_path / "data"
    import_path(email_dir(data), OWNER, write_mbox(tmp_path / "a.mbox", OWNER_MAIL),
                owner="alice")
    import_path(email_dir(data), OTHER_ACCOUNT, write_mbox(tmp_path / "b.mbox", OTHER_MAIL),
                owner="bob")
    return data


def _as(host: Harness, principal: str, name: str, arguments: dict[str, Any]) -> Outcome:
    run = host.start_run(principal=principal)
    try:
        return host.call(name, arguments, run=run)
    finally:
        host.end_run(run)


def _open_files(predicate: Callable[[str], bool]) -> list[str]:
    """The files this process holds open (Linux's /proc) whose names satisfy ``predicate``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed since the listing (the listing's own descriptor)
        if predicate(target):
            found.append(target)
    return found


# ------------------------------------------------------------------------------ a cache made anew

LOVER = Mail("Secret Lover <lover@example.org>", OWNER, "Our secret weekend", 1, "o1@example.org")
PLUMBER = Mail("Plumber <plumber@example.net>", OWNER, "Invoice", 2, "p1@example.net")


def test_a_cache_made_anew_at_the_same_generation_is_read_anew_by_a_running_host(
        tmp_path: Path) -> None:
    # Regression: the index was tagged with the cache's generation only, which a cache made
    # anew counts from 0 again: the erased correspondent stayed, the new one never came.
    data = tmp_path / "data"
    import_mail(data, OWNER, [LOVER], "old")  # generation 1
    with harness(data) as host:
        only_person(host, "lover")
        only_person(host, "lover")
        remove_tree(email_dir(data))  # everything erased ...
        import_mail(data, OWNER, [PLUMBER], "new")  # ... and imported again: generation 1
        assert _names(host, "lover") == []
        assert _names(host, "plumber") == ["Plumber"]


def test_refresh_rebuilds_from_a_cache_made_anew_at_the_same_generation(tmp_path: Path) -> None:
    data = tmp_path / "data"
    import_mail(data, OWNER, [LOVER], "old")
    with harness(data) as host:
        only_person(host, "lover")
    remove_tree(email_dir(data))
    import_mail(data, OWNER, [PLUMBER], "new")
    done = people_command(data, "refresh")  # answered "already current: 1 people"
    assert (done.returncode, done.stdout) == (0, "rebuilt: 1 people\n")
    with harness(data) as host:
        assert _names(host, "lover") == []
        assert _names(host, "plumber") == ["Plumber"]


# ------------------------------------------------------------------------------ person ids


def _narrowed(canonical: str, attempt: int = 0) -> str:
    """``index.person_id_for`` cut to 16 bits, in the same ``p_`` + 16 hex form: a collision
    in a few hundred tries, where the real 64 bits take an outsider about 2^32 hashes."""
    text = canonical if attempt == 0 else f"{canonical}\x00{attempt}"
    return "p_" + "0" * 12 + hashlib.sha256(text.encode()).hexdigest()[:4]


def _colliding_addresses() -> tuple[str, str]:
    seen: dict[str, str] = {}
    for n in itertools.count():
        address = f"x{n}@attacker.example"
        other = seen.setdefault(_narrowed(address), address)
        if other != address:
            return other, address
    raise AssertionError("unreachable")


def test_two_addresses_whose_ids_collide_are_two_people_and_fail_no_call(
        fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: the rebuild's INSERT hit the person table's primary key, and every call of
    # the owner failed people_index_unavailable until the mail was erased.
    pair = _colliding_addresses()
    import_mail(fresh, OWNER, [Mail(f"Mallory <{pair[0]}>", OWNER, "hi", 26,
                                    "evil@attacker.example", cc=pair[1])], "evil")
    monkeypatch.setattr(index, "person_id_for", _narrowed)
    with harness(fresh) as host:
        # Nobody else's id moves: it is still the one of their address alone.
        assert only_person(host, "anna") == _narrowed("anna.smith@example.org")
        first, second = sorted(pair)
        kept, moved = only_person(host, first), only_person(host, second)
        assert kept == _narrowed(first) == _narrowed(second) != moved  # the first keeps it
        for pid in (kept, moved):
            page = ok(host.invoke("people.history", person_id=pid))
            assert [i["subject"] for i in page["interactions"]] == ["hi"]
        assert only_person(host, second) == moved  # the same id at every call


def test_person_ids_move_only_the_colliding_ones_and_the_same_way_whatever_the_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "person_id_for", _narrowed)
    first, second = sorted(_colliding_addresses())
    others = [f"y{n}@example.org" for n in range(50)]
    ids = index.person_ids([second, *others, first])
    assert ids == index.person_ids(reversed([second, *others, first]))
    assert ids[first] == _narrowed(first) and ids[second] == _narrowed(second, 1)
    assert len(set(ids.values())) == len(ids)
    assert all(ids[o] == _narrowed(o) for o in others if _narrowed(o) != ids[second])


# ------------------------------------------------------------------------------ opening an index


def test_an_index_cut_to_nothing_under_its_log_is_rebuilt_not_waited_on(fresh: Path) -> None:
    # Regression: the next opening waited SQLite's whole 30 s for locks nobody would release,
    # then failed people_busy.
    own = _own_dir(fresh)
    with harness(fresh) as host:
        anna = only_person(host, "anna")  # made the file: the next call opens it again
        with open(own / index.INDEX_FILE, "r+b") as file:
            file.truncate(0)
        started = time.monotonic()
        assert only_person(host, "anna") == anna
        assert time.monotonic() - started < 15  # a loose bound: it was 30 s


@needs_proc
def test_one_principals_index_waiting_for_a_lock_holds_up_no_other_principal(
        tmp_path: Path) -> None:
    # Regression: one process-wide lock was held while an index's opening waited for a lock
    # (up to 30 s), and every call of a shared cache took it, for an index of anyone's.
    data = _owned(tmp_path)
    own = _own_dir(data)
    alices = index.index_path(own, "alice")
    with harness(data) as host:
        for _ in range(2):  # bob's index made, then kept open
            assert ok(_as(host, "bob", "people.search", {"query": "carol"}))["people"]
        # Alice's index is a file SQLite must turn to WAL while another connection reads it:
        # her call's opening waits for that reader.
        with closing(sqlite3.connect(alices, isolation_level=None)) as reader:
            reader.execute("CREATE TABLE other (x)")
            reader.execute("BEGIN")
            reader.execute("SELECT * FROM other").fetchall()
            outcomes: list[Outcome] = []
            alice = threading.Thread(target=lambda: outcomes.append(
                _as(host, "alice", "people.search", {"query": "anna"})))
            alice.start()
            give_up = time.monotonic() + 20
            while (len(_open_files(lambda t: t == str(alices))) < 2
                   and time.monotonic() < give_up):
                time.sleep(0.01)  # until her opening holds the file
            started = time.monotonic()
            assert ok(_as(host, "bob", "people.search", {"query": "carol"}))["people"]
            assert time.monotonic() - started < 10  # a loose bound: it waited for alice's
            reader.execute("ROLLBACK")
        alice.join(60)
    assert [o.ok for o in outcomes] == [True]


# ------------------------------------------------------------------------------ refresh


def test_refresh_goes_on_past_a_file_it_cannot_refresh_and_exits_1(tmp_path: Path) -> None:
    # Regression: the first file it could not open ended the command (exit 1), leaving the
    # principals after it as they were: an erased principal's index was not deleted.
    data = _owned(tmp_path)
    own = _own_dir(data)
    with harness(data) as host:
        _as(host, "alice", "people.search", {"query": "anna"})
        _as(host, "bob", "people.search", {"query": "carol"})
    erase(email_dir(data), "owner", "bob")
    blocker = own / index.PRINCIPALS_DIR / ("0" * 32 + ".sqlite3")  # listed first
    blocker.mkdir()
    done = people_command(data, "refresh")
    assert done.returncode == 1
    assert sorted(done.stdout.splitlines()) == [
        "alice: rebuilt: 3 people", "bob: owns no account, index and addresses deleted"]
    assert done.stderr.startswith(f"toolhost-people: cannot refresh {blocker}: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not index.index_path(own, "bob").exists()
    assert blocker.is_dir()  # not an index it can delete: the operator's to look at


def test_refresh_skips_a_file_deleted_after_it_was_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Regression: a host's call deleting its principal's file (it owns nothing any more)
    # between the listing and the opening ended refresh with exit 1.
    data = _owned(tmp_path)
    own = _own_dir(data)
    with harness(data) as host:
        _as(host, "alice", "people.search", {"query": "anna"})
        _as(host, "bob", "people.search", {"query": "carol"})
    first = min(index.index_path(own, who) for who in ("alice", "bob"))
    real = sqlite3.connect

    def deleted_first(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        # The host's deletion, forced between refresh's listing and its opening.
        if isinstance(target, str) and first.name in target and first.exists():
            index.remove_index_file(first)
        return real(target, *args, **kwargs)

    monkeypatch.setenv("TOOLHOST_DATA_DIR", str(data))
    monkeypatch.setenv("TOOLHOST_CONFIG", "")
    monkeypatch.setattr(sqlite3, "connect", deleted_first)
    assert cli.main(["refresh"]) == 0
    printed = capsys.readouterr()
    assert len(printed.out.splitlines()) == 1 and printed.err == ""


def test_refresh_leaves_alone_an_index_a_host_is_making(tmp_path: Path) -> None:
    # Regression: a file with no tables yet (a host's opening between making the file and its
    # tables) was deleted as "not an index of a principal", and the host's call failed
    # people_index_unavailable (SQLite: disk I/O error), as a stress run showed.
    data = _owned(tmp_path)
    with harness(data) as host:
        _as(host, "alice", "people.search", {"query": "anna"})
    carols = index.index_path(_own_dir(data), "carol")
    with closing(sqlite3.connect(carols, isolation_level=None)) as making:
        making.execute("PRAGMA journal_mode=WAL")  # as index._open leaves it, tables to come
        done = people_command(data, "refresh")
        assert (done.returncode, done.stderr) == (0, "")
        assert f"{carols.name}: no index in it yet, left alone" in done.stdout.splitlines()
        assert carols.exists()
        making.execute("CREATE TABLE meta (key TEXT PRIMARY KEY)")  # the making goes on


# ------------------------------------------------------------------------------ the command


@pytest.mark.parametrize("address", [[], ["alias@example.com"]])
def test_a_principal_that_is_not_utf8_is_one_line_and_exit_2(tmp_path: Path,
                                                              address: list[str]) -> None:
    # Regression: a traceback (UnicodeEncodeError) and exit 1.
    done = people_command(tmp_path, "me", "--principal", "\udcff", *address)  # the byte 0xff
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "toolhost-people: argument --principal: b'\\xff' is not UTF-8 text\n"


@pytest.mark.parametrize(("text", "where"), [
    ("[[[\n", "1: not TOML"),
    # Regression (D449): its own table's unknown key or bad value was taken without a word
    # (exit 0) where the host refuses to start.
    ("[plugins.toolhost-people]\nenabled = true\nbogus = 1\n",
     "3: [plugins.toolhost-people] bogus: not a setting"),
    ("[plugins.toolhost-people]\nenabled = \"yes\"\n",
     "2: [plugins.toolhost-people] enabled: must be true or false"),
])
def test_a_toolhost_toml_it_cannot_use_is_one_line_and_exit_2(tmp_path: Path, text: str,
                                                              where: str) -> None:
    # Regression: a traceback (ConfigFileError) and exit 1; the host's commands say exit 2.
    bad = tmp_path / "toolhost.toml"
    bad.write_text(text)
    script = Path(sys.executable).with_name("toolhost-people")
    done = subprocess.run([str(script), "links"], capture_output=True, text=True, check=False,
                          env={**os.environ, "TOOLHOST_DATA_DIR": str(tmp_path / "data"),
                               "TOOLHOST_CONFIG": str(bad)})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"toolhost-people: {bad}:{where}"), done.stderr
    assert done.stderr.count("\n") == 1


# ------------------------------------------------------------------------------ kept connections


@needs_proc
def test_deleting_an_index_closes_every_people_tools_connections_to_it(tmp_path: Path) -> None:
    # Regression: only the deleting tool's sessions were closed; the other tools kept the
    # deleted file (an erased principal's correspondents) open and readable.
    data = _owned(tmp_path)
    bobs = index.index_path(_own_dir(data), "bob")
    with harness(data) as host:
        for _ in range(2):
            carol = ok(_as(host, "bob", "people.search", {"query": "carol"}))["people"][0]
            ok(_as(host, "bob", "people.context", {"person_id": carol["person_id"]}))
            ok(_as(host, "bob", "people.history", {"person_id": carol["person_id"]}))
        erase(email_dir(data), "owner", "bob")
        assert ok(_as(host, "bob", "people.search", {"query": "carol"}))["people"] == []
        assert not bobs.exists()
        assert _open_files(lambda target: target.startswith(str(bobs))) == []


# ------------------------------------------------------------------------------ busy


def test_a_lock_held_past_the_wait_is_people_busy_before_the_calls_deadline(
        fresh: Path) -> None:
    # Regression: SQLite waited 30 s, as long as the call had, so the caller read the host's
    # deadline (the body abandoned, still waiting) and never the retryable people_busy.
    own = _own_dir(fresh)
    with harness(fresh) as host:
        only_person(host, "anna")
        import_mail(fresh, OWNER, [Mail("Dave <dave@example.org>", OWNER, "Hi", 25,
                                        "d1@example.org")], "more")  # the next call rebuilds
        with closing(sqlite3.connect(own / index.INDEX_FILE, isolation_level=None)) as holder:
            holder.execute("BEGIN IMMEDIATE")  # a rebuild in another process (refresh)
            run = host.start_run(timeout_s=20)  # 30 s of SQLite's would always pass it
            try:
                outcome = host.call("people.search", {"query": "anna"}, run=run)
            finally:
                host.end_run(run)
            holder.execute("ROLLBACK")
        assert failed(outcome) == BUSY
        assert outcome.failure is not None and outcome.failure.retryable
        assert only_person(host, "dave")  # and once the lock is gone, the rebuild is done
