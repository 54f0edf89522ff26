"""The ArtifactStore port's contract suite, for any backend (fsspec's abstract-test shape).

Subclass ``ArtifactStoreContract`` in a test module, name the subclass ``Test...`` and define
``make_store(tmp_path, clock)``: pytest then runs every test below against your backend::

    class TestMyStore(ArtifactStoreContract):
        def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
            return MyStore(tmp_path, clock)

        def damage_content(self, store, record, stored):  # optional: the corruption tests
            MyStore.path_of(record).write_bytes(stored)

The suite uses only the port (and ``RunArtifactWriter`` over it), so it says nothing about how a
backend lays out its content or stages a stream; a backend's own tests cover that. Needs pytest
(the ``test`` extra); the host never imports this module at runtime.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolhost._model.artifacts import (
    ARTIFACT_CEILING,
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactRef,
    ArtifactTooLarge,
    NewArtifact,
    PurgeReport,
)
from toolhost._model.spec import Trust
from toolhost._pipeline.artifacts import RunArtifactWriter
from toolhost._ports.artifacts import READ_CHUNK, ArtifactChunks, ArtifactStore, ArtifactUpload
from toolhost._ports.clock import Clock
from toolhost._testing.clocks import DEFAULT_INSTANT, FixedClock, ScriptedClock
from toolhost._testing.closing import ClosesItsStores

__all__ = ["T0", "ArtifactStoreContract"]

#: The instant the suite's clocks start at: the deterministic harness's.
T0 = DEFAULT_INSTANT
_SECOND = dt.timedelta(seconds=1)


def _put(store: ArtifactStore, *, content: bytes = b"hello artifacts",
         **overrides: Any) -> ArtifactRecord:
    # A refused field is refused where it is given: by NewArtifact, before the store.
    fields: dict[str, Any] = dict(
        run_id="run-1",
        origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE,
        name="output.txt",
        media_type="text/plain",
        trust=Trust.INTERNAL_TOOL,
    )
    fields.update(overrides)
    return store.put(NewArtifact(**fields), content)


def _begin(store: ArtifactStore, *, max_bytes: int = 1024,
           **overrides: Any) -> ArtifactUpload:
    fields: dict[str, Any] = dict(
        run_id="run-1",
        origin=ArtifactOrigin.MODEL_OUTPUT,
        name="image.png",
        media_type="image/png",
        trust=Trust.EXTERNAL_UNTRUSTED,
    )
    fields.update(overrides)
    return store.begin(NewArtifact(**fields), max_bytes=max_bytes)


def _streamed(store: ArtifactStore, chunks: list[bytes], now: dt.datetime = T0,
              **overrides: Any) -> ArtifactRecord:
    upload = _begin(store, **overrides)
    for chunk in chunks:
        upload.write(chunk)
    return upload.commit(now)


def _identity(record: ArtifactRecord) -> dict[str, Any]:
    return dict(
        run_id=record.run_id,
        conversation_id=record.conversation_id,
        principal_id=record.principal_id,
        origin=record.origin,
        name=record.name,
        media_type=record.media_type,
        checksum=record.checksum,
    )


class ArtifactStoreContract(ClosesItsStores):
    """What every ArtifactStore backend must do. Override ``make_store``, and
    ``damage_content`` to run the tests of reads over damaged content."""

    def make_store(self, tmp_path: Path, clock: Clock) -> ArtifactStore:
        raise NotImplementedError

    def damage_content(
        self, store: ArtifactStore, record: ArtifactRecord, stored: bytes | None
    ) -> None:
        """Make ``store`` hold ``stored`` as ``record``'s content, or nothing (None), as damage
        from outside the store would: behind its back, the record unchanged. The suite
        cannot know where a backend keeps its bytes, so by default those tests are skipped."""
        pytest.skip(f"{type(self).__name__} does not define damage_content")

    # -- put / get / read ----------------------------------------------------------------------

    def test_is_an_artifact_store(self, tmp_path: Path) -> None:
        assert isinstance(self.make_store(tmp_path, FixedClock(T0)), ArtifactStore)

    def test_put_returns_the_full_record(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, content=b"abc", conversation_id="conv-1")
        assert record.id
        assert (record.run_id, record.conversation_id) == ("run-1", "conv-1")
        assert record.origin is ArtifactOrigin.TOOL_OUTPUT_CAPTURE
        assert (record.name, record.media_type) == ("output.txt", "text/plain")
        assert record.size == 3
        assert record.checksum == "sha256:" + hashlib.sha256(b"abc").hexdigest()
        assert record.trust is Trust.INTERNAL_TOOL
        assert record.created_at == T0 and record.created_at.tzinfo is dt.UTC
        assert record.expires_at is None

    def test_get_returns_what_put_returned(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        plus_two = dt.timezone(dt.timedelta(hours=2))
        record = _put(store, expires_at=(T0 + 60 * _SECOND).astimezone(plus_two))
        assert record.expires_at == T0 + 60 * _SECOND
        assert record.expires_at is not None and record.expires_at.tzinfo is dt.UTC
        assert store.get(record.id) == record

    def test_ref_carries_the_handle_fields(self, tmp_path: Path) -> None:
        record = _put(self.make_store(tmp_path, FixedClock(T0)))
        ref = record.ref
        assert isinstance(ref, ArtifactRef)
        assert (ref.id, ref.name, ref.media_type, ref.byte_count, ref.checksum) == (
            record.id, record.name, record.media_type, record.size, record.checksum,
        )

    def test_read_returns_the_content(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        for content in (b"", b"\x00\xff" * 1000, "naïve ✓".encode()):
            assert store.read(_put(store, content=content).id) == content

    def test_unknown_ids_raise_not_found(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        with pytest.raises(ArtifactNotFound):
            store.get("nope")
        with pytest.raises(ArtifactNotFound):
            store.read("nope")

    # -- read_chunks: the content one bounded chunk at a time ----------------------------------

    def test_read_chunks_concatenate_to_the_content(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        contents = [b"", b"x", bytes(range(256)) * 4, bytes(range(256)) * 4 + b"tail"]
        records = [_put(store, content=c) for c in contents]
        records.append(_streamed(store, [b"streamed ", b"in ", b"parts"], max_bytes=64))
        contents.append(b"streamed in parts")
        for record, content in zip(records, contents, strict=True):
            for chunk_size in (1, 7, 1024, 1025, 4096):
                chunks = list(store.read_chunks(record.id, chunk_size))
                assert b"".join(chunks) == content, (len(content), chunk_size)
                assert all(type(c) is bytes for c in chunks)
                # Every chunk full but the last, and none empty (so an empty artifact has none).
                assert [len(c) for c in chunks[:-1]] == [chunk_size] * (len(chunks) - 1)
                assert all(0 < len(c) <= chunk_size for c in chunks)
            assert b"".join(store.read_chunks(record.id)) == content  # the default size

    def test_read_chunks_default_to_read_chunk_bytes(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        content = bytes(range(256)) * (READ_CHUNK // 256) + b"more"
        chunks = list(store.read_chunks(_put(store, content=content).id))
        assert [len(c) for c in chunks] == [READ_CHUNK, 4]
        assert b"".join(chunks) == content

    def test_read_chunks_close_and_stop(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, content=b"abcdefgh")
        with store.read_chunks(record.id, 3) as chunks:
            assert isinstance(chunks, ArtifactChunks)
            assert iter(chunks) is chunks
            assert next(chunks) == b"abc"
        assert list(chunks) == []  # closed: nothing more, and no error
        chunks.close()  # idempotent
        unclosed = store.read_chunks(record.id, 3)
        assert next(unclosed) == b"abc"
        del unclosed  # dropped half-read: the store is none the worse
        assert b"".join(store.read_chunks(record.id, 3)) == b"abcdefgh"
        assert store.read(record.id) == b"abcdefgh"

    def test_read_chunks_of_an_unknown_id_raise_not_found_at_once(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        with pytest.raises(ArtifactNotFound) as caught:
            store.read_chunks("nope")  # before any chunk is asked for
        assert caught.value.artifact_id == "nope"

    @pytest.mark.parametrize(
        ("chunk_size", "error"),
        [(0, ValueError), (-1, ValueError), (True, TypeError), (1.5, TypeError),
         ("8", TypeError)],
    )
    def test_read_chunks_refuse_a_bad_chunk_size(
        self, tmp_path: Path, chunk_size: Any, error: type[Exception]
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store)
        with pytest.raises(error):
            store.read_chunks(record.id, chunk_size)

    def test_expired_artifacts_stay_readable_in_chunks(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, expires_at=T0 + _SECOND)
        assert b"".join(store.read_chunks(record.id, 4)) == b"hello artifacts"

    _PRECIOUS = b"precious bytes " * 100  # 1500 bytes

    @pytest.mark.parametrize(
        ("stored", "reason"),
        [
            (_PRECIOUS[:700] + b"P" + _PRECIOUS[701:], "checksum mismatch"),  # a byte flipped
            (_PRECIOUS[:-1], "size 1499 bytes, expected 1500"),
            (_PRECIOUS + b"!", "size more than 1500 bytes, expected 1500"),
            (b"", "size 0 bytes, expected 1500"),
            (None, None),  # gone: the backend names what is missing
        ],
        ids=["flipped", "truncated", "extended", "emptied", "missing"],
    )
    def test_damaged_content_fails_read_and_read_chunks_alike(
        self, tmp_path: Path, stored: bytes | None, reason: str | None
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, content=self._PRECIOUS)
        self.damage_content(store, record, stored)
        with pytest.raises(ArtifactCorrupted) as by_read:
            store.read(record.id)
        if reason is None:
            assert by_read.value.reason.endswith("is missing"), by_read.value.reason
        else:
            assert by_read.value.reason == reason
        for chunk_size in (64, 1500, 4096):
            received = bytearray()
            with pytest.raises(ArtifactCorrupted) as by_chunks:
                for chunk in store.read_chunks(record.id, chunk_size):
                    received += chunk
            assert by_chunks.value.reason == by_read.value.reason
            assert by_chunks.value.artifact_id == record.id
            # The chunk that would complete the content is never handed out; content that
            # fits one chunk is not handed out at all.
            assert len(received) < len(self._PRECIOUS)
            if chunk_size >= len(self._PRECIOUS):
                assert received == b""

    @pytest.mark.parametrize("origin", list(ArtifactOrigin))
    @pytest.mark.parametrize("trust", list(Trust))
    def test_every_origin_and_trust_round_trips(
        self, tmp_path: Path, origin: ArtifactOrigin, trust: Trust
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, origin=origin, trust=trust)
        got = store.get(record.id)
        assert got.origin is origin and got.trust is trust

    def test_principal_and_claim_default_to_none_and_claimed(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store)
        assert (record.principal_id, record.claimed) == (None, True)
        assert store.get(record.id) == record

    @pytest.mark.parametrize("claimed", [True, False])
    def test_principal_and_claim_round_trip(self, tmp_path: Path, claimed: bool) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, origin=ArtifactOrigin.UPLOAD, principal_id="alice",
                      conversation_id="conv-1", claimed=claimed)
        assert (record.principal_id, record.claimed) == ("alice", claimed)
        assert store.get(record.id) == record
        assert store.list_run("run-1") == [record]
        reused = store.put_or_reuse(NewArtifact(
                run_id="run-2", origin=ArtifactOrigin.UPLOAD, name="output.txt",
                media_type="text/plain", trust=Trust.USER, principal_id="bob", claimed=claimed),
            b"x", now=T0)
        assert store.get(reused.id) == reused
        assert (reused.principal_id, reused.claimed) == ("bob", claimed)

    def test_claim_marks_an_upload_claimed(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        unsent = _put(store, origin=ArtifactOrigin.UPLOAD, principal_id="alice", claimed=False)
        claimed = store.claim(unsent.id)
        assert claimed == attrs.evolve(unsent, claimed=True)
        assert store.get(unsent.id) == claimed
        assert store.claim(unsent.id) == claimed  # idempotent
        assert store.read(unsent.id) == b"hello artifacts"
        with pytest.raises(ArtifactNotFound):
            store.claim("nope")

    def test_put_always_stores_a_new_record(self, tmp_path: Path) -> None:
        # The identity rule belongs to put_or_reuse (and the writer); put itself never dedups.
        store = self.make_store(tmp_path, FixedClock(T0))
        a, b = _put(store), _put(store)
        assert a.id != b.id and a.checksum == b.checksum
        assert store.read(a.id) == store.read(b.id) == b"hello artifacts"

    def test_timestamps_come_from_the_clock(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, ScriptedClock([T0 + _SECOND, T0 + 5 * _SECOND]))
        assert _put(store).created_at == T0 + _SECOND
        assert _put(store).created_at == T0 + 5 * _SECOND

    # -- refusals ------------------------------------------------------------------------------

    def test_put_refuses_content_over_the_ceiling(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        # bytes(n) is zero pages the OS has not materialized yet: cheap unless someone reads it.
        with pytest.raises(ArtifactTooLarge):
            _put(store, content=bytes(ARTIFACT_CEILING + 1))
        assert store.list_run("run-1") == []

    @pytest.mark.parametrize(
        ("overrides", "error"),
        [
            ({"content": "text, not bytes"}, TypeError),
            ({"origin": "UPLOAD"}, TypeError),
            ({"trust": "USER"}, TypeError),
            ({"run_id": ""}, ValueError),
            ({"name": ""}, ValueError),
            ({"media_type": "plain"}, ValueError),
            ({"expires_at": dt.datetime(2026, 7, 26)}, ValueError),  # naive
            ({"expires_at": T0}, ValueError),  # expired at birth
            ({"principal_id": ""}, ValueError),
            ({"conversation_id": ""}, ValueError),
            ({"claimed": 1}, TypeError),
        ],
    )
    def test_put_refuses_bad_arguments(
        self, tmp_path: Path, overrides: dict[str, Any], error: type[Exception]
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        with pytest.raises(error):
            _put(store, **overrides)
        assert store.list_run("run-1") == []

    def test_writes_refuse_what_is_not_a_new_artifact(self, tmp_path: Path) -> None:
        # The keywords as a dict (the port's old shape) are not a checked NewArtifact.
        store = self.make_store(tmp_path, FixedClock(T0))
        fields: Any = dict(run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a.txt",
                           media_type="text/plain", trust=Trust.USER)
        with pytest.raises(TypeError):
            store.put(fields, b"x")
        with pytest.raises(TypeError):
            store.put_or_reuse(fields, b"x", now=T0)
        with pytest.raises(TypeError):
            store.begin(fields, max_bytes=1)
        assert store.list_run("run-1") == []

    # -- list_run / find_live ------------------------------------------------------------------

    def test_list_run_orders_by_created_at_then_put_order(self, tmp_path: Path) -> None:
        later, earlier = T0 + 2 * _SECOND, T0 + _SECOND
        store = self.make_store(tmp_path, ScriptedClock([later, earlier, earlier, T0]))
        mine = [_put(store, name=f"n{i}") for i in range(3)]
        _put(store, run_id="run-2")
        # Creation time first; the two created at the same instant in the order they were put.
        assert store.list_run("run-1") == [mine[1], mine[2], mine[0]]
        assert store.list_run("no-such-run") == []

    def test_list_run_breaks_ties_in_put_order_not_by_id(self, tmp_path: Path) -> None:
        # A fixed clock (a test's, or two puts in one microsecond): every record has the same
        # created_at, and ids are random, so only the order they were stored can decide. 20
        # records in id order by chance: 1 in 20!, so a tie broken by id fails this.
        store = self.make_store(tmp_path, FixedClock(T0))
        mine: list[ArtifactRecord] = []
        for i in range(20):
            mine.append(_put(store, name=f"n{i:02}", content=b"%d" % i))
            if i % 5 == 0:
                _put(store, run_id="run-2", name=f"other{i}")  # another run's, interleaved
        assert {r.created_at for r in mine} == {T0}
        assert [r.id for r in store.list_run("run-1")] == [r.id for r in mine]
        assert store.list_run("run-1") == mine

    def test_find_live_matches_the_whole_identity(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store)
        assert store.find_live(**_identity(record), now=T0) == record
        for field, other in [
            ("run_id", "run-2"),
            ("conversation_id", "conv-2"),
            ("principal_id", "bob"),
            ("origin", ArtifactOrigin.EXPORT),
            ("name", "other.txt"),
            ("media_type", "text/markdown"),
            ("checksum", "sha256:" + "0" * 64),
        ]:
            assert store.find_live(**{**_identity(record), field: other}, now=T0) is None

    def test_find_live_ignores_expired_artifacts(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, expires_at=T0 + 10 * _SECOND)
        assert store.find_live(**_identity(record), now=T0 + 9 * _SECOND) == record
        # Expiring at `now` is already expired.
        assert store.find_live(**_identity(record), now=T0 + 10 * _SECOND) is None
        assert store.find_live(**_identity(record), now=T0 + 11 * _SECOND) is None
        assert store.read(record.id) == b"hello artifacts"  # expiry is not deletion

    def test_find_live_refuses_a_naive_now(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store)
        with pytest.raises(ValueError):
            store.find_live(**_identity(record), now=dt.datetime(2026, 7, 25))

    # -- put_or_reuse and the writer: the identity rule ----------------------------------------

    def test_put_or_reuse_returns_the_live_twin(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        first = _put(store, expires_at=T0 + 10 * _SECOND)
        again = store.put_or_reuse(NewArtifact(
                run_id="run-1", origin=first.origin, name=first.name, media_type=first.media_type,
                trust=first.trust), b"hello artifacts", now=T0 + 5 * _SECOND)
        assert again == first
        assert store.list_run("run-1") == [first]

    def test_put_or_reuse_stores_anew_once_the_twin_expired(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        first = _put(store, expires_at=T0 + 10 * _SECOND)
        fresh = store.put_or_reuse(NewArtifact(
                run_id="run-1", origin=first.origin, name=first.name, media_type=first.media_type,
                trust=first.trust), b"hello artifacts", now=T0 + 10 * _SECOND)
        assert fresh.id != first.id
        assert fresh.created_at == T0 + 10 * _SECOND  # the writer's instant, not the store's
        assert [r.id for r in store.list_run("run-1")] == [first.id, fresh.id]

    def test_put_or_reuse_twins_only_within_one_conversation_and_principal(
        self, tmp_path: Path
    ) -> None:
        # A run id two conversations (or principals) share must not hand one the other's
        # artifact: its resolver would refuse the ref to the caller it was just returned to.
        store = self.make_store(tmp_path, FixedClock(T0))

        def write(conversation_id: str | None, principal_id: str | None) -> ArtifactRecord:
            return store.put_or_reuse(NewArtifact(
                    run_id="run-1", origin=ArtifactOrigin.EXPORT, name="a.txt",
                    media_type="text/plain", trust=Trust.INTERNAL_TOOL,
                    conversation_id=conversation_id, principal_id=principal_id),
                b"hello", now=T0)

        first = write("conv-1", "alice")
        assert write("conv-1", "alice") == first
        others = [write("conv-2", "alice"), write("conv-1", "bob"), write(None, "alice"),
                  write("conv-1", None), write(None, None)]
        assert len({first.id, *(r.id for r in others)}) == 6
        for record, (conversation, principal) in zip(
                others, [("conv-2", "alice"), ("conv-1", "bob"), (None, "alice"),
                         ("conv-1", None), (None, None)], strict=True):
            assert (record.conversation_id, record.principal_id) == (conversation, principal)
            assert write(conversation, principal) == record  # each its own twin

    def test_put_or_reuse_only_ever_lowers_trust(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        first = _put(store, trust=Trust.INTERNAL_TOOL)

        def again(trust: Trust) -> ArtifactRecord:
            return store.put_or_reuse(NewArtifact(
                    run_id="run-1", origin=first.origin, name=first.name,
                    media_type=first.media_type, trust=trust), b"hello artifacts", now=T0)

        assert again(Trust.USER).trust is Trust.INTERNAL_TOOL
        lowered = again(Trust.EXTERNAL_UNTRUSTED)
        assert lowered.id == first.id and lowered.trust is Trust.EXTERNAL_UNTRUSTED
        assert store.get(first.id).trust is Trust.EXTERNAL_UNTRUSTED
        assert len(store.list_run("run-1")) == 1

    def test_writer_identity_rule(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(
            store, "run-1", FixedClock(T0), conversation_id="conv-1", principal_id="alice"
        )

        def write(**overrides: Any) -> Any:
            fields: dict[str, Any] = dict(
                origin=ArtifactOrigin.EXPORT, name="report.md", media_type="text/markdown",
                content="# Report ✓", trust=Trust.INTERNAL_TOOL,
            )
            fields.update(overrides)
            return writer.write(**fields)

        ref = write()
        assert write() == ref
        assert write(content="# Report ✓".encode()) == ref  # str is UTF-8 of the same bytes
        assert store.read(ref.id) == "# Report ✓".encode()
        assert store.get(ref.id).conversation_id == "conv-1"
        assert store.get(ref.id).principal_id == "alice"
        assert store.get(ref.id).claimed is True
        others = [
            write(name="other.md"),
            write(media_type="text/plain"),
            write(origin=ArtifactOrigin.MODEL_OUTPUT),
            write(content="# Report 2"),
        ]
        assert len({ref.id, *(r.id for r in others)}) == 5
        other_run = RunArtifactWriter(store, "run-2", FixedClock(T0)).write(
            origin=ArtifactOrigin.EXPORT, name="report.md", media_type="text/markdown",
            content="# Report ✓", trust=Trust.INTERNAL_TOOL,
        )
        assert other_run.id != ref.id and other_run.checksum == ref.checksum
        assert len(store.list_run("run-1")) == 5

    def test_concurrent_writers_of_one_artifact_leave_one_record(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))
        threads_n = 8
        barrier = threading.Barrier(threads_n)
        refs: list[Any] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                barrier.wait()
                refs.append(writer.write(
                    origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE, name="out.txt",
                    media_type="text/plain", content=b"same bytes" * 1000,
                    trust=Trust.INTERNAL_TOOL,
                ))
            except BaseException as exc:  # surfaced below; a thread cannot fail the test
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(set(refs)) == 1 and len(refs) == threads_n
        assert len(store.list_run("run-1")) == 1

    # -- streamed uploads: published only on commit --------------------------------------------

    def test_begin_returns_an_upload(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store)
        assert isinstance(upload, ArtifactUpload)
        assert upload.bytes_written == 0
        upload.abort()

    def test_commit_publishes_the_streamed_content(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0 - 99 * _SECOND))
        chunks = [b"\x89PNG\r\n", b"", b"\x00" * 300, "✓".encode()]
        content = b"".join(chunks)
        upload = _begin(store, conversation_id="conv-1", principal_id="alice",
                        expires_at=T0 + 60 * _SECOND)
        for i, chunk in enumerate(chunks):
            upload.write(chunk)
            assert upload.bytes_written == len(b"".join(chunks[: i + 1]))
        assert store.list_run("run-1") == []  # nothing visible before the commit
        record = upload.commit(T0)
        assert record.size == len(content)
        assert record.checksum == "sha256:" + hashlib.sha256(content).hexdigest()
        assert record.created_at == T0  # the commit's instant, not the store's clock
        assert (record.run_id, record.conversation_id, record.principal_id) == (
            "run-1", "conv-1", "alice",
        )
        assert (record.origin, record.name, record.media_type, record.trust) == (
            ArtifactOrigin.MODEL_OUTPUT, "image.png", "image/png", Trust.EXTERNAL_UNTRUSTED,
        )
        assert record.expires_at == T0 + 60 * _SECOND and record.claimed is True
        assert store.get(record.id) == record
        assert store.list_run("run-1") == [record]
        assert store.read(record.id) == content
        assert store.find_live(**_identity(record), now=T0) == record

    def test_an_empty_stream_commits_an_empty_artifact(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _streamed(store, [])
        assert record.size == 0 and store.read(record.id) == b""

    def test_a_streamed_upload_can_be_stored_unclaimed_and_claimed(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _streamed(store, [b"photo"], origin=ArtifactOrigin.UPLOAD, claimed=False,
                           principal_id="alice")
        assert store.get(record.id).claimed is False
        assert store.claim(record.id).claimed is True

    def test_abort_publishes_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store)
        upload.write(b"half an image")
        upload.abort()
        upload.abort()  # idempotent
        assert store.list_run("run-1") == []
        with pytest.raises(ArtifactError):
            upload.write(b"more")
        with pytest.raises(ArtifactError):
            upload.commit(T0)
        assert store.list_run("run-1") == []

    def test_an_abandoned_upload_publishes_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        _begin(store).write(b"never committed")
        assert store.list_run("run-1") == []

    def test_max_bytes_is_inclusive(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _streamed(store, [b"ab", b"cd"], max_bytes=4)
        assert store.read(record.id) == b"abcd"
        assert _streamed(store, [], max_bytes=0, name="empty.png").size == 0

    def test_a_write_past_max_bytes_aborts_the_upload(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store, max_bytes=10)
        upload.write(b"0123456789")
        with pytest.raises(ArtifactTooLarge) as info:
            upload.write(b"!")
        assert (info.value.size, info.value.ceiling) == (11, 10)
        assert upload.bytes_written == 10  # the refused chunk was not accepted
        # Aborted for good: nothing more is accepted, and nothing can be published.
        with pytest.raises(ArtifactTooLarge):
            upload.write(b"")
        with pytest.raises(ArtifactTooLarge):
            upload.commit(T0)
        upload.abort()
        assert store.list_run("run-1") == []

    def test_the_ceiling_bounds_a_larger_max_bytes(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store, max_bytes=2 * ARTIFACT_CEILING)
        # bytes(n) is zero pages the OS has not materialized; the bound refuses it unwritten.
        with pytest.raises(ArtifactTooLarge) as info:
            upload.write(bytes(ARTIFACT_CEILING + 1))
        assert info.value.ceiling == ARTIFACT_CEILING
        assert store.list_run("run-1") == []

    def test_commit_applies_the_identity_rule(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        first = _put(store, origin=ArtifactOrigin.MODEL_OUTPUT, name="image.png",
                     media_type="image/png", content=b"pixels", trust=Trust.INTERNAL_TOOL,
                     expires_at=T0 + 10 * _SECOND)
        again = _streamed(store, [b"pix", b"els"], now=T0 + 5 * _SECOND)
        # The live twin comes back, its trust lowered to the stream's, and nothing is stored.
        assert again == attrs.evolve(first, trust=Trust.EXTERNAL_UNTRUSTED)
        assert store.list_run("run-1") == [again]
        # A different identity, or the twin expired, stores anew.
        other = _streamed(store, [b"pixels"], now=T0 + 5 * _SECOND, name="other.png")
        fresh = _streamed(store, [b"pixels"], now=T0 + 10 * _SECOND)
        assert len({first.id, other.id, fresh.id}) == 3
        assert fresh.created_at == T0 + 10 * _SECOND
        assert [store.read(r.id) for r in (first, other, fresh)] == [b"pixels"] * 3

    def test_a_commit_that_fails_publishes_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store, expires_at=T0 + _SECOND)
        upload.write(b"late")
        with pytest.raises(ValueError):
            upload.commit(T0 + _SECOND)  # it would be born expired
        with pytest.raises(ArtifactError):
            upload.commit(T0)  # a failed commit aborted the upload
        assert store.list_run("run-1") == []

    def test_a_committed_upload_is_final(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store)
        upload.write(b"done")
        record = upload.commit(T0)
        upload.abort()  # a no-op now: a `finally: abort()` must not unpublish
        with pytest.raises(ArtifactError):
            upload.write(b"more")
        with pytest.raises(ArtifactError):
            upload.commit(T0)
        assert store.read(record.id) == b"done"
        assert store.list_run("run-1") == [record]

    def test_write_refuses_what_is_not_bytes(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store)
        with pytest.raises(TypeError):
            upload.write("text")  # type: ignore[arg-type]
        upload.write(b"ok")  # a refused chunk changes nothing
        assert store.read(upload.commit(T0).id) == b"ok"

    @pytest.mark.parametrize(
        ("overrides", "error"),
        [
            ({"origin": "UPLOAD"}, TypeError),
            ({"trust": "USER"}, TypeError),
            ({"claimed": 0}, TypeError),
            ({"max_bytes": 1.5}, TypeError),
            ({"max_bytes": True}, TypeError),
            ({"max_bytes": -1}, ValueError),
            ({"run_id": ""}, ValueError),
            ({"name": ""}, ValueError),
            ({"media_type": "png"}, ValueError),
            ({"principal_id": ""}, ValueError),
            ({"conversation_id": ""}, ValueError),
            ({"expires_at": dt.datetime(2026, 7, 26)}, ValueError),  # naive
        ],
    )
    def test_begin_refuses_bad_arguments(
        self, tmp_path: Path, overrides: dict[str, Any], error: type[Exception]
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        with pytest.raises(error):
            _begin(store, **overrides)
        assert store.list_run("run-1") == []

    def test_concurrent_streams_of_one_artifact_leave_one_record(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        threads_n = 8
        barrier = threading.Barrier(threads_n)
        records: list[ArtifactRecord] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                upload = _begin(store, max_bytes=1 << 20)
                for _ in range(16):
                    upload.write(b"same bytes" * 100)
                barrier.wait()
                records.append(upload.commit(T0))
            except BaseException as exc:  # surfaced below; a thread cannot fail the test
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len({r.id for r in records}) == 1 and len(records) == threads_n
        assert len(store.list_run("run-1")) == 1
        assert store.read(records[0].id) == b"same bytes" * 1600

    # -- the writer's stream -------------------------------------------------------------------

    def _writer_stream_fields(self, **overrides: Any) -> dict[str, Any]:
        fields: dict[str, Any] = dict(
            origin=ArtifactOrigin.MODEL_OUTPUT, name="clip.mp4", media_type="video/mp4",
            trust=Trust.EXTERNAL_UNTRUSTED, max_bytes=64,
        )
        fields.update(overrides)
        return fields

    def test_writer_stream_commits_a_ref(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0 - 99 * _SECOND))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0), conversation_id="conv-1",
                                principal_id="alice")
        with writer.stream(**self._writer_stream_fields()) as s:
            s.write(b"frame-1 ")
            s.write(b"frame-2")
            assert s.bytes_written == 15
            ref = s.commit()
        assert isinstance(ref, ArtifactRef)
        assert (ref.name, ref.media_type, ref.byte_count) == ("clip.mp4", "video/mp4", 15)
        record = store.get(ref.id)
        assert record.ref == ref
        assert (record.run_id, record.conversation_id, record.principal_id) == (
            "run-1", "conv-1", "alice",
        )
        assert record.created_at == T0  # the writer's clock
        assert store.read(ref.id) == b"frame-1 frame-2"
        # The identity rule joins whole writes and streams.
        whole = writer.write(
            origin=ArtifactOrigin.MODEL_OUTPUT, name="clip.mp4", media_type="video/mp4",
            content=b"frame-1 frame-2", trust=Trust.EXTERNAL_UNTRUSTED,
        )
        assert whole == ref
        assert len(store.list_run("run-1")) == 1

    def test_writer_stream_left_without_commit_stores_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))
        with writer.stream(**self._writer_stream_fields()) as s:
            s.write(b"half")
        assert store.list_run("run-1") == []
        with pytest.raises(ArtifactError):
            s.commit()

    def test_writer_stream_left_by_an_exception_stores_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))

        class ProviderFailed(Exception):
            pass

        with pytest.raises(ProviderFailed), writer.stream(**self._writer_stream_fields()) as s:
            s.write(b"partial")
            raise ProviderFailed
        assert store.list_run("run-1") == []

    def test_writer_stream_past_max_bytes_stores_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))
        with pytest.raises(ArtifactTooLarge), \
                writer.stream(**self._writer_stream_fields(max_bytes=8)) as s:
            s.write(b"12345678")
            s.write(b"9")
        assert store.list_run("run-1") == []

    def test_writer_stream_is_used_inside_a_with_block(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))
        s = writer.stream(**self._writer_stream_fields())
        with pytest.raises(ArtifactError):
            s.write(b"too early")
        with pytest.raises(ArtifactError):
            s.commit()
        s.abort()  # harmless
        with s:
            pass
        with pytest.raises(ArtifactError), s:
            pass  # once
        assert store.list_run("run-1") == []

    def test_writer_stream_committed_then_failed_keeps_the_artifact(self, tmp_path: Path) -> None:
        # Committed means published: a later failure in the block does not take it back.
        store = self.make_store(tmp_path, FixedClock(T0))
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))
        with pytest.raises(RuntimeError), writer.stream(**self._writer_stream_fields()) as s:
            s.write(b"kept")
            ref = s.commit()
            raise RuntimeError("after the commit")
        assert store.read(ref.id) == b"kept"

    # -- list_artifacts: the operator's paged listing ------------------------------------------

    def _listing_fixture(self, store: ArtifactStore) -> list[ArtifactRecord]:
        """Five artifacts over two runs and two conversations, created out of id order."""
        return [
            store.put_or_reuse(NewArtifact(
                    run_id=run, conversation_id=conv, origin=ArtifactOrigin.EXPORT, name=f"n{i}",
                    media_type="text/plain", trust=Trust.INTERNAL_TOOL,
                    expires_at=T0 + (offset + 1) * _SECOND),
                b"x%d" % i, now=T0 + offset * _SECOND)
            for i, (run, conv, offset) in enumerate([
                ("run-1", "conv-1", 3), ("run-2", "conv-1", 1), ("run-1", None, 2),
                ("run-2", "conv-2", 1), ("run-1", "conv-1", 0),
            ])
        ]

    @staticmethod
    def _ordered(records: list[ArtifactRecord]) -> list[ArtifactRecord]:
        return sorted(records, key=lambda r: (r.created_at, r.id))

    def test_list_artifacts_orders_everything_by_created_at_then_id(
        self, tmp_path: Path
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        made = self._listing_fixture(store)
        # Expired ones included: listing is the operator's view of what is stored.
        assert store.list_artifacts() == self._ordered(made)
        assert store.list_artifacts(limit=2) == self._ordered(made)[:2]

    def test_list_artifacts_filters_by_run_and_conversation(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        made = self._listing_fixture(store)

        def expect(run: str | None, conv: str | None) -> list[ArtifactRecord]:
            return self._ordered([r for r in made if (run is None or r.run_id == run)
                                  and (conv is None or r.conversation_id == conv)])

        for run, conv in [("run-1", None), (None, "conv-1"), ("run-1", "conv-1"),
                          ("run-2", "conv-2"), ("run-3", None), (None, "conv-9")]:
            got = store.list_artifacts(run_id=run, conversation_id=conv)
            assert got == expect(run, conv), (run, conv)

    def test_list_artifacts_pages_by_the_last_id(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        made = self._listing_fixture(store)
        pages: list[list[ArtifactRecord]] = []
        after: str | None = None
        while page := store.list_artifacts(limit=2, after=after):
            pages.append(page)
            after = page[-1].id
        assert [len(p) for p in pages] == [2, 2, 1]
        assert [r for p in pages for r in p] == self._ordered(made)
        run_1 = self._ordered([r for r in made if r.run_id == "run-1"])
        assert store.list_artifacts(run_id="run-1", after=run_1[0].id) == run_1[1:]
        # The cursor may be any artifact: paging continues from its place in the order.
        assert store.list_artifacts(run_id="run-2", after=run_1[0].id) == self._ordered(
            [r for r in made if r.run_id == "run-2" and
             (r.created_at, r.id) > (run_1[0].created_at, run_1[0].id)])

    def test_list_artifacts_shows_no_uncommitted_upload(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store)
        upload.write(b"half")
        assert store.list_artifacts() == []
        upload.abort()

    @pytest.mark.parametrize(
        ("kwargs", "error"),
        [
            ({"limit": 0}, ValueError),
            ({"limit": -1}, ValueError),
            ({"limit": True}, TypeError),
            ({"limit": 1.5}, TypeError),
            ({"run_id": ""}, ValueError),
            ({"conversation_id": ""}, ValueError),
            ({"after": "no-such-artifact"}, ArtifactNotFound),
        ],
    )
    def test_list_artifacts_refuses_bad_arguments(
        self, tmp_path: Path, kwargs: dict[str, Any], error: type[Exception]
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        _put(store)
        with pytest.raises(error):
            store.list_artifacts(**kwargs)

    # -- purge -----------------------------------------------------------------------------------

    def test_purge_removes_exactly_what_expired_at_now(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        gone_at_now = _put(store, name="a", content=b"aaaa", expires_at=T0 + 10 * _SECOND)
        gone_before = _put(store, name="b", content=b"bb", expires_at=T0 + 5 * _SECOND)
        live = _put(store, name="c", content=b"c", expires_at=T0 + 11 * _SECOND)
        forever = _put(store, name="d", content=b"d")
        report = store.purge(T0 + 10 * _SECOND)  # expiring at `now` is expired
        assert isinstance(report, PurgeReport)
        assert (report.artifacts, report.artifact_bytes) == (2, 6)
        assert (report.content_files, report.freed_bytes, report.staged_uploads) == (2, 6, 0)
        for record in (gone_at_now, gone_before):
            with pytest.raises(ArtifactNotFound):
                store.get(record.id)
            with pytest.raises(ArtifactNotFound):
                store.read(record.id)
        assert store.list_artifacts() == self._ordered([live, forever])
        assert store.read(live.id) == b"c" and store.read(forever.id) == b"d"

    def test_purge_keeps_content_a_remaining_artifact_shares(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        expired = _put(store, name="old", content=b"shared", expires_at=T0 + _SECOND)
        keeper = _put(store, run_id="run-2", name="new", content=b"shared")
        report = store.purge(T0 + _SECOND)
        assert (report.artifacts, report.artifact_bytes) == (1, 6)
        assert (report.content_files, report.freed_bytes) == (0, 0)
        with pytest.raises(ArtifactNotFound):
            store.get(expired.id)
        assert store.read(keeper.id) == b"shared"

    def test_a_second_purge_finds_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        _put(store, expires_at=T0 + _SECOND)
        assert store.purge(T0 + _SECOND).artifacts == 1
        again = store.purge(T0 + _SECOND)
        assert (again.artifacts, again.artifact_bytes, again.content_files,
                again.staged_uploads, again.freed_bytes) == (0, 0, 0, 0, 0)

    def test_content_written_again_after_a_purge_is_whole(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        _put(store, content=b"again", expires_at=T0 + _SECOND)
        store.purge(T0 + _SECOND)
        assert store.read(_put(store, content=b"again").id) == b"again"
        assert store.read(_streamed(store, [b"ag", b"ain"]).id) == b"again"

    def test_purge_leaves_an_open_upload_alone(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        upload = _begin(store)
        upload.write(b"in progress")
        # Far enough ahead that any staged upload would be stale: this one is still open.
        report = store.purge(T0 + dt.timedelta(days=400))
        assert report.staged_uploads == 0
        upload.write(b", finished")
        assert store.read(upload.commit(T0).id) == b"in progress, finished"

    def test_purge_reads_no_clock(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, ScriptedClock([T0]))
        _put(store, expires_at=T0 + _SECOND)  # the one reading, for created_at
        assert store.purge(T0 + _SECOND).artifacts == 1

    def test_purge_refuses_a_naive_now(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        record = _put(store, expires_at=T0 + _SECOND)
        with pytest.raises(ValueError):
            store.purge(dt.datetime(2026, 7, 26))
        assert store.get(record.id) == record

    # -- retention: the writer's default expiry ------------------------------------------------

    def test_retention_is_none_or_positive(self, tmp_path: Path) -> None:
        retention = self.make_store(tmp_path, FixedClock(T0)).retention
        assert retention is None or (
            isinstance(retention, dt.timedelta) and retention > dt.timedelta(0))

    def test_the_writer_applies_the_retention_when_no_expiry_is_given(
        self, tmp_path: Path
    ) -> None:
        store = self.make_store(tmp_path, FixedClock(T0))
        expected = None if store.retention is None else T0 + store.retention
        writer = RunArtifactWriter(store, "run-1", FixedClock(T0))
        fields: dict[str, Any] = dict(origin=ArtifactOrigin.EXPORT, media_type="text/plain",
                                      trust=Trust.INTERNAL_TOOL)
        default = writer.write(name="default.txt", content=b"d", **fields)
        assert store.get(default.id).expires_at == expected
        own = writer.write(name="own.txt", content=b"o", expires_at=T0 + _SECOND, **fields)
        assert store.get(own.id).expires_at == T0 + _SECOND  # the tool's own expiry wins
        with writer.stream(name="streamed.txt", max_bytes=8, **fields) as s:
            s.write(b"s")
            streamed = s.commit()
        assert store.get(streamed.id).expires_at == expected
        # A direct put is not the writer: no expiry given means none.
        assert _put(store).expires_at is None
