"""The conversation-scoped resolver: its rules and their order (D63).

Each rule is shown failing alone, against an artifact that every other rule admits; then that a
refusal is decided before any content is opened (a damaged content file does not change the
reason), and that an admitted artifact's bytes are the store's verified ones.
Real SQLite files and real content files in tmp_path throughout; no mocks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model.artifacts import (
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    ArtifactOrigin,
    ArtifactRecord,
    ArtifactUnavailable,
    NewArtifact,
)
from toolhost._model.spec import Trust
from toolhost._pipeline.artifacts import ArtifactResolver, RunArtifactWriter
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock, ScriptedClock

SECOND = dt.timedelta(seconds=1)
CONTENT = b"\x89PNG\r\n\x1a\n pixels"
EXPIRES = T0 + 60 * SECOND
#: The caller every test starts from: alice, in run-1 of conversation conv-1.
CALLER: dict[str, Any] = dict(principal_id="alice", run_id="run-1", conversation_id="conv-1")


class CountingStore(SQLiteArtifactStore):
    """The real store, counting content reads: a refusal must not have opened any."""

    reads = 0

    def read(self, artifact_id: str) -> bytes:
        self.reads += 1
        return super().read(artifact_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    from toolhost._adapters.sqlite_db import DATABASE_NAME, connect

    s = CountingStore(tmp_path / "artifacts", connect(tmp_path / DATABASE_NAME),
                      FixedClock(T0), owns_connection=True)
    yield s
    s.close()


def resolver(store: SQLiteArtifactStore, at: dt.datetime = T0 + SECOND) -> ArtifactResolver:
    return ArtifactResolver(store, FixedClock(at))


def put(store: SQLiteArtifactStore, *, content: bytes = CONTENT,
        **overrides: Any) -> ArtifactRecord:
    """An artifact every rule admits for CALLER, unless overridden."""
    fields: dict[str, Any] = dict(
        run_id="run-1",
        conversation_id="conv-1",
        principal_id="alice",
        origin=ArtifactOrigin.EXPORT,
        name="image.png",
        media_type="image/png",
        trust=Trust.EXTERNAL_UNTRUSTED,
        expires_at=EXPIRES,
        claimed=True,
    )
    fields.update(overrides)
    return store.put(NewArtifact(**fields), content)


def blob_path(store: SQLiteArtifactStore, record: ArtifactRecord) -> Path:
    hexdigest = record.checksum.removeprefix("sha256:")
    return store.root / "sha256" / hexdigest[:2] / hexdigest[2:]


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(ArtifactUnavailable) as info:
        call()
    return info.value.reason


# --------------------------------------------------------------------------------------------
# What is admitted
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin", [ArtifactOrigin.EXPORT, ArtifactOrigin.MODEL_OUTPUT, ArtifactOrigin.UPLOAD]
)
def test_an_eligible_artifact_resolves_and_reads(
    store: CountingStore, origin: ArtifactOrigin
) -> None:
    record = put(store, origin=origin)
    r = resolver(store)
    assert r.resolve(record.id, **CALLER) == record
    assert r.read(record.id, **CALLER, max_bytes=len(CONTENT)) == CONTENT  # inclusive bound
    assert store.reads == 1


def test_a_conversation_admits_its_artifacts_from_earlier_runs(store: CountingStore) -> None:
    earlier = put(store, run_id="run-0")
    assert resolver(store).read(earlier.id, **CALLER, max_bytes=1024) == CONTENT


def test_outside_a_conversation_the_run_decides(store: CountingStore) -> None:
    mine = put(store, conversation_id=None)
    caller = {**CALLER, "conversation_id": None}
    assert resolver(store).read(mine.id, **caller, max_bytes=1024) == CONTENT


def test_an_artifact_that_never_expires_stays_eligible(store: CountingStore) -> None:
    record = put(store, expires_at=None)
    far = T0 + dt.timedelta(days=3650)
    assert resolver(store, at=far).resolve(record.id, **CALLER) == record


def test_a_claimed_upload_becomes_eligible(store: CountingStore) -> None:
    unsent = put(store, origin=ArtifactOrigin.UPLOAD, claimed=False)
    r = resolver(store)
    assert refusal(lambda: r.resolve(unsent.id, **CALLER)) == "unclaimed_upload"
    store.claim(unsent.id)
    assert r.read(unsent.id, **CALLER, max_bytes=1024) == CONTENT


def test_what_a_run_bound_writer_writes_is_resolvable(store: CountingStore) -> None:
    writer = RunArtifactWriter(store, "run-1", FixedClock(T0), conversation_id="conv-1",
                            principal_id="alice")
    exported = writer.write(origin=ArtifactOrigin.EXPORT, name="report.md",
                            media_type="text/markdown", content="# Report",
                            trust=Trust.INTERNAL_TOOL)
    with writer.stream(origin=ArtifactOrigin.MODEL_OUTPUT, name="image.png",
                       media_type="image/png", trust=Trust.EXTERNAL_UNTRUSTED,
                       max_bytes=1024) as s:
        s.write(CONTENT)
        generated = s.commit()
    captured = writer.write(origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE, name="output.json",
                            media_type="application/json", content="{}",
                            trust=Trust.INTERNAL_TOOL)
    r = resolver(store)
    # The next turn of the conversation, another run.
    later = {**CALLER, "run_id": "run-2"}
    assert r.read(exported.id, **later, max_bytes=1024) == b"# Report"
    assert r.read(generated.id, **later, max_bytes=1024) == CONTENT
    assert refusal(lambda: r.read(captured.id, **later, max_bytes=1024)) == "ineligible_origin"


# --------------------------------------------------------------------------------------------
# Every rule, failing alone
# --------------------------------------------------------------------------------------------

RULES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    # (id, artifact overrides, caller overrides, reason)
    ("foreign principal", {"principal_id": "bob"}, {}, "foreign_principal"),
    ("no principal", {"principal_id": None}, {}, "foreign_principal"),
    ("other conversation", {"conversation_id": "conv-2"}, {}, "other_conversation"),
    ("no conversation", {"conversation_id": None}, {}, "other_conversation"),
    ("other run", {"run_id": "run-2"}, {"conversation_id": None}, "other_run"),
    ("other run, same conversation", {"run_id": "run-2", "conversation_id": "conv-1"},
     {"conversation_id": None}, "other_run"),
    ("expires now", {"expires_at": T0 + SECOND}, {}, "expired"),
    ("expired", {"expires_at": T0 + SECOND / 2}, {}, "expired"),
    ("captured tool output", {"origin": ArtifactOrigin.TOOL_OUTPUT_CAPTURE}, {},
     "ineligible_origin"),
    ("unsent upload", {"origin": ArtifactOrigin.UPLOAD, "claimed": False}, {},
     "unclaimed_upload"),
]


@pytest.mark.parametrize(("artifact", "caller", "reason"), [r[1:] for r in RULES],
                         ids=[r[0] for r in RULES])
def test_each_rule_refuses_alone(
    store: CountingStore, artifact: dict[str, Any], caller: dict[str, Any], reason: str
) -> None:
    record = put(store, **artifact)
    r = resolver(store)
    who = {**CALLER, **caller}
    assert refusal(lambda: r.resolve(record.id, **who)) == reason
    assert refusal(lambda: r.read(record.id, **who, max_bytes=1024)) == reason
    assert store.reads == 0


def test_an_unknown_id_is_not_found(store: CountingStore) -> None:
    put(store)
    r = resolver(store)
    bad_ids: list[Any] = ["nope", "", 42, None]
    for bad in bad_ids:
        with pytest.raises(ArtifactUnavailable) as refused:
            r.resolve(bad, **CALLER)
        assert refused.value.reason == "not_found"
    with pytest.raises(ArtifactUnavailable) as info:
        r.read("nope", **CALLER, max_bytes=1024)
    # One type for every refusal: "not found" is not distinguishable by its class.
    assert not isinstance(info.value, ArtifactNotFound)
    assert isinstance(info.value, ArtifactError)


def test_too_large_is_decided_from_the_record(store: CountingStore) -> None:
    record = put(store)
    r = resolver(store)
    assert r.resolve(record.id, **CALLER) == record  # eligible in every other respect
    reason = refusal(lambda: r.read(record.id, **CALLER, max_bytes=len(CONTENT) - 1))
    assert reason == "too_large"
    assert store.reads == 0


def test_an_empty_artifact_fits_a_zero_bound(store: CountingStore) -> None:
    record = put(store, content=b"")
    assert resolver(store).read(record.id, **CALLER, max_bytes=0) == b""


def test_rules_are_checked_in_order(store: CountingStore) -> None:
    # Failing everything at once reports the first rule: whose it is comes before all else.
    record = put(store, principal_id="bob", conversation_id="conv-2", expires_at=T0 + SECOND,
                 origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE)
    assert refusal(lambda: resolver(store).read(record.id, **CALLER, max_bytes=0)) == (
        "foreign_principal"
    )


def test_expiry_is_judged_by_the_resolvers_clock_read_once(store: CountingStore) -> None:
    record = put(store)
    # One instant per call: a second clock read would exhaust the script and fail.
    r = ArtifactResolver(store, ScriptedClock([EXPIRES - SECOND, EXPIRES]))
    assert r.resolve(record.id, **CALLER) == record
    assert refusal(lambda: r.resolve(record.id, **CALLER)) == "expired"


def test_the_reasons_are_a_closed_set() -> None:
    reasons = ArtifactUnavailable.REASONS
    assert reasons == {
        "not_found", "foreign_principal", "other_conversation", "other_run", "expired",
        "ineligible_origin", "unclaimed_upload", "too_large", "corrupted", "damaged_record",
    }
    with pytest.raises(ValueError):
        ArtifactUnavailable("a1", "because")
    err = ArtifactUnavailable("a1", "expired")
    assert (err.artifact_id, err.reason) == ("a1", "expired")


# --------------------------------------------------------------------------------------------
# No content is opened before every rule passed; what is read is verified
# --------------------------------------------------------------------------------------------


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _delete(path: Path) -> None:
    path.unlink()


def _unreadable(path: Path) -> None:
    # A directory where the file was: opening it fails for every user, root included.
    path.unlink()
    path.mkdir()


DAMAGE = [_flip_a_byte, _delete, _unreadable]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize(("artifact", "caller", "reason"), [r[1:] for r in RULES],
                         ids=[r[0] for r in RULES])
def test_a_refusal_is_the_rule_not_the_damaged_content(
    store: CountingStore, damage: Any, artifact: dict[str, Any], caller: dict[str, Any],
    reason: str,
) -> None:
    record = put(store, **artifact)
    damage(blob_path(store, record))
    r = resolver(store)
    assert refusal(lambda: r.read(record.id, **{**CALLER, **caller}, max_bytes=1024)) == reason
    assert store.reads == 0


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_too_large_is_refused_before_the_damaged_content(
    store: CountingStore, damage: Any
) -> None:
    record = put(store)
    damage(blob_path(store, record))
    reason = refusal(lambda: resolver(store).read(record.id, **CALLER, max_bytes=1))
    assert reason == "too_large"
    assert store.reads == 0


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_an_admitted_artifact_with_damaged_content_is_unavailable_as_corrupted(
    store: CountingStore, damage: Any
) -> None:
    # A tool reading a reference declares one code for an unavailable artifact; damaged bytes
    # were an undeclared ArtifactCorrupted (tool.internal.unexpected). The reason tells the
    # operator, and the store itself still raises ArtifactCorrupted.
    record = put(store)
    damage(blob_path(store, record))
    result: bytes | None = None
    with pytest.raises(ArtifactUnavailable) as refused:
        result = resolver(store).read(record.id, **CALLER, max_bytes=1024)
    assert refused.value.reason == "corrupted"
    assert result is None  # damaged bytes are never handed out
    with pytest.raises(ArtifactCorrupted):
        store.read(record.id)


# --------------------------------------------------------------------------------------------
# Caller and bound validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "caller",
    [
        {"principal_id": None},
        {"principal_id": ""},
        {"run_id": ""},
        {"run_id": None},
        {"conversation_id": ""},
    ],
)
def test_a_caller_without_identity_is_a_programming_error(
    store: CountingStore, caller: dict[str, Any]
) -> None:
    # A missing principal must never match an artifact written without one.
    record = put(store, principal_id=None)
    with pytest.raises(ValueError):
        resolver(store).resolve(record.id, **{**CALLER, **caller})


@pytest.mark.parametrize(("max_bytes", "error"), [(-1, ValueError), (1.5, TypeError),
                                                  (True, TypeError), ("10", TypeError)])
def test_read_refuses_a_bad_bound(
    store: CountingStore, max_bytes: Any, error: type[Exception]
) -> None:
    record = put(store)
    with pytest.raises(error):
        resolver(store).read(record.id, **CALLER, max_bytes=max_bytes)
    assert store.reads == 0


def test_open_artifact_store_works_with_the_resolver(tmp_path: Path) -> None:
    s = open_artifact_store(tmp_path, FixedClock(T0))
    record = put(s)
    assert ArtifactResolver(s, FixedClock(T0)).read(record.id, **CALLER, max_bytes=100) == CONTENT
    s.close()


# --------------------------------------------------------------------------------------------
# The store's own failures are refusals too (the media review): a tool maps one code
# --------------------------------------------------------------------------------------------


def test_a_damaged_record_is_unavailable_not_an_error(store: CountingStore,
                                                      tmp_path: Path) -> None:
    import sqlite3

    from toolhost._adapters.sqlite_db import DATABASE_NAME

    record = put(store)
    conn = sqlite3.connect(tmp_path / DATABASE_NAME)
    try:
        with conn:
            conn.execute("UPDATE artifacts SET origin = 'junk' WHERE id = ?", (record.id,))
    finally:
        conn.close()
    assert refusal(lambda: resolver(store).read(record.id, max_bytes=1024, **CALLER)) == \
        "damaged_record"
    assert store.reads == 0


class PurgedOnRead(CountingStore):
    """The real store, whose artifact is purged (its row deleted, as another host's purge
    does) after the resolver checked it and before its content is read."""

    def read(self, artifact_id: str) -> bytes:
        self._conn.execute("DELETE FROM artifacts WHERE id = ?", (artifact_id,))
        return super().read(artifact_id)


def test_an_artifact_purged_between_check_and_read_is_not_found(tmp_path: Path) -> None:
    from toolhost._adapters.sqlite_db import DATABASE_NAME, connect

    s = PurgedOnRead(tmp_path / "artifacts", connect(tmp_path / DATABASE_NAME),
                     FixedClock(T0), owns_connection=True)
    try:
        record = put(s)
        assert refusal(lambda: resolver(s).read(record.id, max_bytes=1024, **CALLER)) == \
            "not_found"
    finally:
        s.close()


def test_an_artifact_purged_between_its_record_and_its_content_is_not_found(
    store: CountingStore,
) -> None:
    """The narrower window: the store's read found the record, then a purge (another host's
    too) took record and content before the content was opened. The missing content is the
    purge's doing, not damage: the caller is told the file is not there, and no operator is
    alarmed about corruption."""
    record = put(store)
    real = store.content.chunks

    def purged_first(found: ArtifactRecord, chunk_size: int) -> Any:
        assert store.purge(EXPIRES + SECOND).artifacts == 1  # it expired; a purge took it
        return real(found, chunk_size)

    store.content.chunks = purged_first  # type: ignore[method-assign]
    assert refusal(lambda: resolver(store).read(record.id, max_bytes=1024, **CALLER)) == \
        "not_found"


def test_damaged_content_whose_record_is_still_there_stays_corrupted(
    store: CountingStore,
) -> None:
    record = put(store)
    path = store.content.path(record.checksum)  # type: ignore[attr-defined]
    path.unlink()
    assert refusal(lambda: resolver(store).read(record.id, max_bytes=1024, **CALLER)) == \
        "corrupted"
