"""The port contract suites a backend is held to (fsspec's abstract-test shape): subclass one
in a test module, name the subclass ``Test...``, define its factory, and pytest runs every test
against your backend. The ArtifactStore's is ``artifact_store_contract``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from toolhost._model.invocations import (
    InvocationNotFound,
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    OwnerState,
)
from toolhost._pipeline.rows import lists_rows
from toolhost._ports.clock import Clock
from toolhost._ports.invocations import InvocationStore
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost._testing.closing import ClosesItsStores

__all__ = ["ClockContract", "InvocationStoreContract"]


class ClockContract:
    """The Clock port's contract suite. Subclass, name it ``Test...``, define ``make_clock``."""

    def make_clock(self) -> Clock:
        raise NotImplementedError

    def test_now_is_aware(self) -> None:
        now = self.make_clock().now()
        assert isinstance(now, dt.datetime)
        assert now.tzinfo is not None and now.utcoffset() is not None

    def test_now_is_utc(self) -> None:
        now = self.make_clock().now()
        assert now.utcoffset() == dt.timedelta(0)
        assert now.tzinfo is dt.UTC


class InvocationStoreContract(ClosesItsStores):
    """The InvocationStore port's contract suite. Subclass with ``make_store(tmp_path)``.

    Any backend that replaces SQLite (a server database, say) must pass it unchanged. A
    backend that lists damaged rows (``RowListingStore.list_rows``) also defines
    ``damage_state`` to run the tests of them.
    """

    def make_store(self, tmp_path: Path) -> InvocationStore:
        raise NotImplementedError

    def damage_state(self, tmp_path: Path, store: InvocationStore, invocation_id: str) -> None:
        """Write a state no toolhost writes into ``invocation_id``'s row, behind ``store``'s
        back, as a hand edit of its database would. The suite cannot know where a backend
        keeps its rows, so by default those tests are skipped (D211's rule: the contract is
        public, and a third party's subclass must not start failing)."""
        pytest.skip(f"{type(self).__name__} does not define damage_state")

    @staticmethod
    def record(**changes: Any) -> InvocationRecord:
        fields: dict[str, Any] = dict(
            id="inv-1", run_id="run-1", principal_id="p", scopes=("a.read",),
            tool_name="fx.echo", tool_version="1.0.0", arguments={"x": "é", "n": [1, 2]},
            argument_digest="sha256:00", state=InvocationState.AWAITING_APPROVAL,
            policy={"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"},
            created_at=DEFAULT_INSTANT,
        )
        fields.update(changes)
        return InvocationRecord(**fields)

    def test_round_trips_every_field(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        full = self.record(
            approver="ops", denial_reason=None, result_structured={"ok": True},
            result_content="ok", output_trust="INTERNAL_TOOL", failure_kind="NOT_FOUND",
            reason_code="tool.not_found.x", retryable=True, failure_detail={"offset": 3},
            artifact_refs=({"id": "a1", "checksum": "sha256:ff"},), conversation_id="c1",
            started_at=DEFAULT_INSTANT, finished_at=DEFAULT_INSTANT, decided_at=DEFAULT_INSTANT,
            owner={"host": "h", "pid": 7, "start": 12},
            run_deadline=DEFAULT_INSTANT,
            attachments=({"id": "a2", "name": "r.csv", "media_type": "text/csv",
                          "byte_count": 3, "checksum": "sha256:ee"},),
            user_turn="keep it short, \x00 and \u202e",
            operator_directory={"host": "h", "path": "/srv/projet é"},
        )
        store.insert(full)
        assert store.get("inv-1") == full

    #: A large output as a reading tool returns it: the text, and a structured result that
    #: holds the text again (twice, the second time inside an array), over several pages.
    LARGE_TEXT = "naïve café, 日本語, 😀 \x00 \u202e line\n" * 12_000

    @classmethod
    def large_output(cls, text: str = LARGE_TEXT) -> dict[str, Any]:
        return dict(result_content=text, result_structured={
            "content": text, "bytes": len(text.encode()), "again": ["x", text],
            "rows": [{"n": i, "name": f"row {i}"} for i in range(500)]})

    def test_a_large_output_reads_back_exactly_however_it_is_stored(
        self, tmp_path: Path,
    ) -> None:
        store = self.make_store(tmp_path)
        succeeded = InvocationState.SUCCEEDED
        inserted = self.record(state=succeeded, **self.large_output())
        store.insert(inserted)
        assert store.get("inv-1") == inserted
        # The same output again, on a row that goes running then succeeded.
        mine = store.owner()
        store.insert(self.record(id="inv-2", state=InvocationState.RUNNING, owner=mine))
        assert store.settle("inv-2", from_owner=mine, to=succeeded, **self.large_output())
        # Another output of the same size, through transition.
        other = self.large_output(self.LARGE_TEXT.replace("café", "cafe"))
        store.insert(self.record(id="inv-3"))
        assert store.transition("inv-3", expected={InvocationState.AWAITING_APPROVAL},
                                to=succeeded, **other)
        # A structured result that is large alone; a text that is large alone.
        store.insert(self.record(id="inv-4", state=succeeded, result_content="ok",
                                 result_structured=self.large_output()["result_structured"]))
        store.insert(self.record(id="inv-5", state=succeeded, result_content=self.LARGE_TEXT,
                                 result_structured=None))
        listed = {r.id: r for r in store.list()}
        assert listed["inv-1"] == inserted == store.get("inv-1")
        assert (listed["inv-2"].result_structured, listed["inv-2"].result_content) == (
            inserted.result_structured, inserted.result_content)
        assert (listed["inv-3"].result_structured, listed["inv-3"].result_content) == (
            other["result_structured"], other["result_content"])
        assert listed["inv-4"].result_structured == inserted.result_structured
        assert listed["inv-4"].result_content == "ok"
        assert (listed["inv-5"].result_structured, listed["inv-5"].result_content) == (
            None, self.LARGE_TEXT)
        # Set back to nothing (as recovery does), it reads as nothing.
        assert store.transition("inv-3", expected={succeeded}, to=InvocationState.FAILED,
                                result_structured=None, result_content=None)
        assert (store.get("inv-3").result_structured, store.get("inv-3").result_content) == (
            None, None)

    def test_an_output_is_set_whole(self, tmp_path: Path) -> None:
        # The structured result and the text are one output: a write gives both or neither.
        store = self.make_store(tmp_path)
        store.insert(self.record(state=InvocationState.RUNNING))
        for half in ({"result_content": "ok"}, {"result_structured": {"ok": True}}):
            with pytest.raises(ValueError):
                store.transition("inv-1", expected={InvocationState.RUNNING},
                                 to=InvocationState.SUCCEEDED, **half)
            with pytest.raises(ValueError):
                store.settle("inv-1", from_owner=None, to=InvocationState.SUCCEEDED, **half)
        assert store.get("inv-1").state is InvocationState.RUNNING

    def test_insert_twice_is_refused(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        store.insert(self.record())
        with pytest.raises(ValueError):
            store.insert(self.record())
        assert store.count() == 1

    def test_get_unknown_raises(self, tmp_path: Path) -> None:
        with pytest.raises(InvocationNotFound):
            self.make_store(tmp_path).get("nope")

    def test_transition_is_compare_and_set(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        store.insert(self.record())
        awaiting = {InvocationState.AWAITING_APPROVAL}
        assert store.transition("inv-1", expected=awaiting, to=InvocationState.APPROVED,
                                approver="ops")
        assert not store.transition("inv-1", expected=awaiting, to=InvocationState.APPROVED,
                                    approver="someone-else")
        record = store.get("inv-1")
        assert (record.state, record.approver) == (InvocationState.APPROVED, "ops")

    def test_transition_refuses_unknown_fields(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        store.insert(self.record())
        with pytest.raises(ValueError):
            store.transition("inv-1", expected={InvocationState.AWAITING_APPROVAL},
                             to=InvocationState.DENIED, colour="red")

    def test_list_filters_and_orders(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        later = DEFAULT_INSTANT + dt.timedelta(seconds=1)
        store.insert(self.record(id="b", created_at=later))
        store.insert(self.record(id="a", created_at=later))
        store.insert(self.record(id="c", run_id="run-2", state=InvocationState.SUCCEEDED))
        assert [r.id for r in store.list()] == ["c", "a", "b"]
        assert [r.id for r in store.list(state=InvocationState.AWAITING_APPROVAL)] == ["a", "b"]
        assert [r.id for r in store.list(run_id="run-2")] == ["c"]
        assert [r.id for r in store.list(run_id="run-1", tool_name="fx.echo",
                                         tool_version="1.0.0",
                                         argument_digest="sha256:00")] == ["a", "b"]
        assert store.list(run_id="run-1", argument_digest="sha256:01") == []
        assert store.count() == 3

    def test_list_takes_at_most_limit_oldest_first(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        for i in range(3):
            store.insert(self.record(id=f"r{i}",
                                     created_at=DEFAULT_INSTANT + dt.timedelta(seconds=i)))
        assert [r.id for r in store.list(limit=2)] == ["r0", "r1"]
        assert [r.id for r in store.list(state=InvocationState.AWAITING_APPROVAL,
                                         limit=5)] == ["r0", "r1", "r2"]
        assert store.list(limit=0) == []

    def test_list_pages_after_an_id_in_the_same_order(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        later = DEFAULT_INSTANT + dt.timedelta(seconds=1)
        # Two rows share an instant: the id orders them, and a page may end between them.
        for id, created in (("b", later), ("a", later), ("c", DEFAULT_INSTANT), ("d", later)):
            store.insert(self.record(id=id, created_at=created))
        store.insert(self.record(id="e", created_at=later, state=InvocationState.SUCCEEDED))
        awaiting = InvocationState.AWAITING_APPROVAL
        pages, after = [], None
        while page := [r.id for r in store.list(state=awaiting, limit=2, after=after)]:
            pages.append(page)
            after = page[-1]
        assert pages == [["c", "a"], ["b", "d"]]
        assert [r.id for r in store.list(after="a")] == ["b", "d", "e"]
        # The anchor need not match the filter: a row approved since still marks the place.
        assert store.transition("a", expected={awaiting}, to=InvocationState.APPROVED)
        assert [r.id for r in store.list(state=awaiting, after="a")] == ["b", "d"]
        with pytest.raises(InvocationNotFound):
            store.list(after="nope")

    def test_pending_of_one_principal_is_only_theirs(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        store.insert(self.record(id="r1", principal_id="ada"))
        store.insert(self.record(id="r2", principal_id="bob \u00e9"))
        store.insert(self.record(id="r3", principal_id="ada"))
        assert [p.id for p in store.pending(limit=10, principal_id="ada")] == ["r1", "r3"]
        assert [p.id for p in store.pending(limit=10, principal_id="bob \u00e9")] == ["r2"]
        assert [p.id for p in store.pending(limit=10)] == ["r1", "r2", "r3"]
        assert [p.id for p in store.pending(limit=1, after="r1", principal_id="ada")] == ["r3"]

    def test_history_is_newest_first_filtered_and_paged(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        second = DEFAULT_INSTANT + dt.timedelta(seconds=1)
        failed = InvocationState.FAILED
        for id, created, principal, tool, state, reason in (
                ("a", DEFAULT_INSTANT, "ada", "fx.echo", failed, "fx.x.boom"),
                ("b", second, "ada", "fx.other", InvocationState.SUCCEEDED, None),
                ("c", second, "bob \u00e9", "fx.echo", failed, "fx.x.boom"),
                ("d", second, "ada", "fx.echo", failed, "fx.x.other"),
                ("e", DEFAULT_INSTANT, "ada", "fx.echo", InvocationState.AWAITING_APPROVAL,
                 None)):
            store.insert(self.record(id=id, created_at=created, principal_id=principal,
                                     tool_name=tool, state=state, reason_code=reason))

        def ids(**given: Any) -> list[str]:
            return [r.id for r in store.history(**{"limit": 10, **given})]

        assert ids() == ["d", "c", "b", "e", "a"]
        assert ids(principal_id="ada") == ["d", "b", "e", "a"]
        assert ids(principal_id="bob \u00e9") == ["c"]
        assert ids(tool_name="fx.echo", state=failed) == ["d", "c", "a"]
        assert ids(reason_code="fx.x.boom") == ["c", "a"]
        assert ids(since=second) == ["d", "c", "b"]
        assert ids(limit=2) == ["d", "c"]
        assert ids(limit=2, before="c") == ["b", "e"]
        assert ids(before="b", principal_id="ada") == ["e", "a"]
        assert ids(principal_id="nobody") == []
        # Free text is matched as text, whatever it holds (a backslash, a hex escape, NUL).
        store.insert(self.record(id="f", principal_id="CORP\\ada", created_at=second))
        assert ids(principal_id="CORP\\ada") == ["f"]
        assert ids(principal_id="\\x616461") == []  # "ada" as bytea hex: not Ada
        assert ids(principal_id="ada\x00") == ids(tool_name="fx\x00") == []
        with pytest.raises(InvocationNotFound):
            store.history(limit=1, before="nope")
        with pytest.raises(InvocationNotFound):
            store.history(limit=1, before="a\x00")

    def test_pending_is_the_awaiting_rows_as_list_pages_them(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        later = DEFAULT_INSTANT + dt.timedelta(seconds=1)
        for id, created in (("b", later), ("a", later), ("c", DEFAULT_INSTANT), ("d", later)):
            store.insert(self.record(id=id, created_at=created))
        store.insert(self.record(id="e", created_at=later, state=InvocationState.RUNNING))
        store.insert(self.record(id="f", state=InvocationState.SUCCEEDED))
        awaiting = InvocationState.AWAITING_APPROVAL
        for limit, after in ((10, None), (2, None), (2, "a"), (1, "c"), (0, None), (5, "f"),
                             (5, "d")):
            assert [p.id for p in store.pending(limit=limit, after=after)] == [
                r.id for r in store.list(state=awaiting, limit=limit, after=after)]
        with pytest.raises(InvocationNotFound):
            store.pending(limit=5, after="nope")

    def test_pending_gives_the_listed_columns_as_their_stored_text(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        arguments = {"x": "é\u202e", "n": [1, 2.5], "a": None}
        # A whole second still shows six fractional digits (isoformat() alone drops them).
        second = dt.datetime(2026, 7, 25, 13, 3, 11, tzinfo=dt.UTC)
        store.insert(self.record(id="one", arguments=arguments, tool_version=None,
                                 argument_digest=None, created_at=second))
        store.insert(self.record(id="two", policy=None, run_id="run-2",
                                 created_at=second + dt.timedelta(microseconds=7)))
        one, two = store.pending(limit=5)
        assert (one.id, one.run_id, one.tool_name, one.tool_version, one.argument_digest) == (
            "one", "run-1", "fx.echo", None, None)
        assert one.created == "2026-07-25T13:03:11.000000+00:00"
        assert two.created == "2026-07-25T13:03:11.000007+00:00"
        # Canonical JSON: sorted keys, no spaces, characters as themselves.
        assert one.arguments_json == '{"a":null,"n":[1,2.5],"x":"é\u202e"}'
        assert one.policy_json == '{"action":"approval","rule":"EXTERNAL_WRITE/HIGH"}'
        assert (two.id, two.run_id, two.tool_version, two.argument_digest, two.policy_json) == (
            "two", "run-2", "1.0.0", "sha256:00", None)

    # ------------------------------------------------------------------ group commit

    @staticmethod
    def transaction_of(store: InvocationStore) -> Callable[[], AbstractContextManager[None]]:
        """The store's ``transaction`` (``GroupCommitStore``): optional, so a backend without
        one skips these tests, and the pipeline commits each of its writes alone."""
        transaction: Callable[[], AbstractContextManager[None]] | None = getattr(
            store, "transaction", None)
        if transaction is None:
            pytest.skip("no transaction(): optional (GroupCommitStore); without it the "
                        "pipeline commits each write alone")
        return transaction

    def test_a_transaction_commits_its_writes_in_order_each_with_its_own_answer(
        self, tmp_path: Path,
    ) -> None:
        store = self.make_store(tmp_path)
        transaction = self.transaction_of(store)
        store.insert(self.record(id="before"))
        mine = store.owner()
        running, awaiting = InvocationState.RUNNING, {InvocationState.AWAITING_APPROVAL}
        with transaction():
            store.insert(self.record(id="inv-1", state=running, owner=mine))
            # Each write sees the ones before it: the compare-and-sets answer as they would
            # one after the other, outside a transaction.
            assert store.settle("inv-1", from_owner=mine, to=InvocationState.SUCCEEDED,
                                result_structured={"ok": True}, result_content="ok")
            assert not store.settle("inv-1", from_owner=mine, to=InvocationState.FAILED)
            assert store.transition("before", expected=awaiting, to=InvocationState.APPROVED,
                                    approver="ops")
            assert not store.transition("before", expected=awaiting,
                                        to=InvocationState.DENIED)
            store.insert(self.record(id="inv-2", state=InvocationState.SUCCEEDED))
        assert [(r.id, r.state) for r in store.list()] == [
            ("before", InvocationState.APPROVED), ("inv-1", InvocationState.SUCCEEDED),
            ("inv-2", InvocationState.SUCCEEDED)]
        assert store.get("inv-1").result_content == "ok"
        assert store.get("before").approver == "ops"

    def test_a_transaction_that_raises_leaves_none_of_its_writes(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        transaction = self.transaction_of(store)
        store.insert(self.record(id="before"))
        with pytest.raises(RuntimeError, match="the caller's"), transaction():
            store.insert(self.record(id="inv-1"))
            assert store.transition("before", expected={InvocationState.AWAITING_APPROVAL},
                                    to=InvocationState.APPROVED)
            raise RuntimeError("the caller's own failure")
        assert [(r.id, r.state) for r in store.list()] == [
            ("before", InvocationState.AWAITING_APPROVAL)]
        # The store goes on: a write alone, and another transaction.
        store.insert(self.record(id="inv-2"))
        with transaction():
            store.insert(self.record(id="inv-3"))
        assert [r.id for r in store.list()] == ["before", "inv-2", "inv-3"]

    def test_a_refused_write_in_a_transaction_raises_and_rolls_back_the_rest(
        self, tmp_path: Path,
    ) -> None:
        store = self.make_store(tmp_path)
        transaction = self.transaction_of(store)
        store.insert(self.record(id="inv-1"))
        with pytest.raises(ValueError), transaction():
            store.insert(self.record(id="inv-2"))
            store.insert(self.record(id="inv-1"))  # already recorded
        assert [r.id for r in store.list()] == ["inv-1"]
        assert store.count() == 1

    # ------------------------------------------------------------------ owners

    def test_this_process_owns_alive(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        owner = store.owner()
        assert owner == store.owner() and owner == dict(owner)
        assert store.owner_state(owner) is OwnerState.ALIVE

    def test_an_ended_login_is_refused_until_it_expires(self, tmp_path: Path) -> None:
        # The optional EndedLogins port (toolhost._ports.logins): a store that has it keeps
        # each ended login until its cookie's expiry, and forgets the expired ones.
        store: Any = self.make_store(tmp_path)
        if not hasattr(store, "end_login"):
            pytest.skip("no end_login(): optional (EndedLogins); without it the inbox's "
                        "logins stay stateless")
        assert not store.login_ended("n1")
        store.end_login("n1", 2000.0, now=1000.0)
        store.end_login("n1", 2000.0, now=1000.0)  # a second logout of the same login
        store.end_login("n2", 1500.0, now=1000.0)
        assert store.login_ended("n1") and store.login_ended("n2")
        assert not store.login_ended("n3")
        store.end_login("n3", 3000.0, now=1600.0)  # n2 expired: forgotten
        assert [store.login_ended(n) for n in ("n1", "n2", "n3")] == [True, False, True]

    def test_a_row_without_an_owner_has_none_alive(self, tmp_path: Path) -> None:
        assert self.make_store(tmp_path).owner_state(None) is OwnerState.GONE

    def test_the_owner_round_trips_on_the_row(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        store.insert(self.record(state=InvocationState.RUNNING, owner=store.owner()))
        owner = store.get("inv-1").owner
        assert owner == store.owner()
        assert store.owner_state(owner) is OwnerState.ALIVE

    def test_settle_is_compare_and_set_on_state_and_owner(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        gone = {"host": "h", "pid": 7, "start": 12}
        store.insert(self.record(state=InvocationState.RUNNING, owner=gone))
        store.insert(self.record(id="inv-2", state=InvocationState.RUNNING))  # no owner
        store.insert(self.record(id="inv-3"))  # awaiting approval
        failed = InvocationState.FAILED
        assert not store.settle("inv-1", from_owner={**gone, "pid": 8}, to=failed)
        assert not store.settle("inv-1", from_owner=None, to=failed)
        assert not store.settle("inv-3", from_owner=None, to=failed)
        mine = store.owner()
        assert store.settle("inv-1", from_owner=gone, to=InvocationState.RUNNING, owner=mine)
        assert not store.settle("inv-1", from_owner=gone, to=failed)  # taken over
        assert store.settle("inv-1", from_owner=mine, to=failed, reason_code="tool.internal.x")
        assert store.settle("inv-2", from_owner=None, to=failed)
        assert not store.settle("inv-2", from_owner=None, to=failed)  # settled once
        assert [(r.id, r.state, r.owner) for r in store.list()] == [
            ("inv-1", failed, mine), ("inv-2", failed, None),
            ("inv-3", InvocationState.AWAITING_APPROVAL, None)]
        with pytest.raises(ValueError):
            store.settle("inv-3", from_owner=None, to=failed, colour="red")

    # -- list_rows (RowListingStore): optional, as the port is ---------------------------------

    def _listing_store(self, tmp_path: Path) -> Any:
        store = self.make_store(tmp_path)
        if not lists_rows(store):
            pytest.skip(f"{type(store).__name__} does not list rows (RowListingStore)")
        return store

    def test_list_rows_of_sound_rows_is_list(self, tmp_path: Path) -> None:
        store = self._listing_store(tmp_path)
        later = DEFAULT_INSTANT + dt.timedelta(seconds=1)
        for id, created in (("b", later), ("a", later), ("c", DEFAULT_INSTANT)):
            store.insert(self.record(id=id, created_at=created))
        store.insert(self.record(id="d", run_id="run-2", state=InvocationState.SUCCEEDED))
        for given in ({}, {"state": InvocationState.AWAITING_APPROVAL}, {"run_id": "run-2"},
                      {"tool_name": "fx.echo", "tool_version": "1.0.0",
                       "argument_digest": "sha256:00"}, {"limit": 2}, {"after": "a"},
                      {"state": InvocationState.AWAITING_APPROVAL, "limit": 1, "after": "c"}):
            assert list(store.list_rows(**given)) == store.list(**given), given

    def test_list_rows_puts_a_damaged_row_in_its_place(self, tmp_path: Path) -> None:
        store = self._listing_store(tmp_path)
        made = [self.record(id=f"r{i}", created_at=DEFAULT_INSTANT + dt.timedelta(seconds=i))
                for i in range(4)]
        for row in made:
            store.insert(row)
        self.damage_state(tmp_path, store, "r1")
        r0, _, r2, r3 = made

        assert store.list() == [r0, r2, r3]
        rows = list(store.list_rows())
        assert [r.id for r in rows] == ["r0", "r1", "r2", "r3"]
        damaged = rows[1]
        assert isinstance(damaged, InvocationRecordDamaged)
        assert (damaged.field, damaged.tool_name, damaged.tool_version) == (
            "state", "fx.echo", "1.0.0")
        assert rows[::2] == [r0, r2] and rows[3] == r3
        # ``limit`` counts rows either way, and a damaged row still marks a page's place.
        assert [r.id for r in store.list_rows(limit=2)] == ["r0", "r1"]
        assert store.list(limit=2) == [r0]
        assert list(store.list_rows(after="r1")) == [r2, r3]
        with pytest.raises(InvocationRecordDamaged) as refused:
            store.get("r1")
        assert (refused.value.id, refused.value.field) == ("r1", "state")
