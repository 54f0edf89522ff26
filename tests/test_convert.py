"""The one converter: records to their SQLite rows and back, on exact column text."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import attrs
import pytest
from conftest import make_spec
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost._model.artifacts import ArtifactOrigin, ArtifactRecord
from toolhost._model.convert import column_values, converter, from_row, spec_to_json, to_row
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.spec import Trust

UTC = dt.UTC
T0 = dt.datetime(2026, 7, 25, 13, 3, 11, 482913, tzinfo=UTC)
CHECKSUM = "sha256:" + "0123456789abcdef" * 4

# ------------------------------------------------------------------------------- strategies

# JSON as it comes back from json.loads: lists, never tuples; no NaN or infinity (not JSON, and
# no row holds them: D401).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=4)
offsets = st.sampled_from([UTC, dt.timezone(dt.timedelta(hours=2)),
                           dt.timezone(-dt.timedelta(hours=9, minutes=30))])
instants = st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(9998, 12, 30),
                        timezones=offsets)
utc_instants = st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9999, 1, 1),
                            timezones=st.just(UTC))
texts = st.text(min_size=1)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


invocations = st.builds(
    InvocationRecord,
    id=texts, run_id=texts, principal_id=st.text(),
    scopes=st.lists(st.text(), max_size=3).map(tuple),
    conversation_id=optional(texts), tool_name=texts, tool_version=optional(texts),
    arguments=json_values, argument_digest=optional(texts),
    state=st.sampled_from(InvocationState),
    policy=optional(st.dictionaries(st.text(), st.text(), max_size=3)),
    approver=optional(st.text()), denial_reason=optional(st.text()),
    result_structured=optional(json_objects), result_content=optional(st.text()),
    output_trust=optional(st.sampled_from([t.value for t in Trust])),
    failure_kind=optional(st.text()), reason_code=optional(st.text()),
    retryable=optional(st.booleans()), failure_detail=optional(json_objects),
    artifact_refs=st.lists(json_objects, max_size=3).map(tuple),
    created_at=instants, started_at=optional(instants), finished_at=optional(instants),
    decided_at=optional(instants),
)

artifacts = st.builds(
    ArtifactRecord,
    id=texts, run_id=texts, conversation_id=optional(st.text()),
    origin=st.sampled_from(ArtifactOrigin), name=texts, media_type=texts,
    size=st.integers(min_value=0, max_value=2**53),
    checksum=st.text("0123456789abcdef", min_size=64, max_size=64).map("sha256:".__add__),
    trust=st.sampled_from(Trust), created_at=instants, expires_at=optional(instants),
    principal_id=optional(st.text()), claimed=st.booleans(),
)

# ------------------------------------------------------------------------------- round trips


@settings(max_examples=200)
@given(invocations)
def test_an_invocation_record_round_trips_through_its_row(record: InvocationRecord) -> None:
    row = to_row(record)
    assert list(row) == [f.name for f in attrs.fields(InvocationRecord)]
    assert from_row(InvocationRecord, row) == record


@settings(max_examples=200)
@given(artifacts)
def test_an_artifact_record_round_trips_through_its_row(record: ArtifactRecord) -> None:
    row = to_row(record)
    assert list(row) == [f.name for f in attrs.fields(ArtifactRecord)]
    again = from_row(ArtifactRecord, row)
    assert again == record
    assert again.created_at.tzinfo is UTC


@settings(max_examples=200)
@given(st.one_of(invocations, artifacts))
def test_the_written_out_row_is_the_converters(record: InvocationRecord | ArtifactRecord) -> None:
    # to_row's generated function is a speed-up of cattrs' unstructure, never a second format.
    assert to_row(record) == converter.unstructure(record)


@settings(max_examples=100)
@given(st.one_of(invocations, artifacts))
def test_a_row_holds_only_what_sqlite_binds_and_column_values_agree(
    record: InvocationRecord | ArtifactRecord,
) -> None:
    row = to_row(record)
    assert all(v is None or type(v) in (str, int, float, bool) for v in row.values())
    # An UPDATE's columns are written exactly as the INSERT's.
    assert column_values(type(record), attrs.asdict(record, recurse=False)) == row


@given(utc_instants, utc_instants)
def test_utc_text_order_is_time_order(a: dt.datetime, b: dt.datetime) -> None:
    # What lets SQL compare created_at and expires_at as text.
    ta, tb = converter.unstructure(a), converter.unstructure(b)
    assert len(ta) == len(tb) == len("2026-07-25T13:03:11.482913+00:00")
    assert (ta < tb) == (a < b)


# ------------------------------------------------------------------------------- exact text


def test_an_invocation_row_on_exact_text() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    record = InvocationRecord(
        id="inv-1", run_id="run-1", principal_id="p", scopes=("b.write", "a.read"),
        tool_name="fx.echo", tool_version="1.0.0", arguments={"z": [1, 2.5], "é": None},
        argument_digest="sha256:00", state=InvocationState.SUCCEEDED,
        result_structured={"b": 1, "a": (1, 2)}, retryable=False,
        artifact_refs=({"id": "a-1", "byte_count": 3},),
        created_at=T0, started_at=T0.replace(microsecond=0), finished_at=T0.astimezone(plus_two),
    )
    assert to_row(record) == {
        "id": "inv-1", "run_id": "run-1", "principal_id": "p",
        "scopes": '["b.write","a.read"]', "conversation_id": None,
        "tool_name": "fx.echo", "tool_version": "1.0.0",
        "arguments": '{"z":[1,2.5],"é":null}', "argument_digest": "sha256:00",
        "state": "succeeded", "policy": None, "approver": None, "denial_reason": None,
        "result_structured": '{"a":[1,2],"b":1}', "result_content": None, "output_trust": None,
        "failure_kind": None, "reason_code": None, "retryable": False, "failure_detail": None,
        "artifact_refs": '[{"byte_count":3,"id":"a-1"}]',
        "created_at": "2026-07-25T13:03:11.482913+00:00",
        "started_at": "2026-07-25T13:03:11.000000+00:00",
        # Written as held: an invocation's instants come from the Clock, in UTC.
        "finished_at": "2026-07-25T15:03:11.482913+02:00",
        "decided_at": None,
        "owner": None,
        "run_deadline": None,
        "attachments": "[]",
        "user_turn": None,
        "operator_directory": None,
    }


def test_arguments_of_none_are_json_null_and_an_optional_json_column_is_null() -> None:
    record = InvocationRecord(
        id="i", run_id="r", principal_id="p", scopes=(), tool_name="t", tool_version=None,
        arguments=None, argument_digest=None, state=InvocationState.AWAITING_APPROVAL,
        created_at=T0,
    )
    row = to_row(record)
    assert (row["arguments"], row["scopes"], row["artifact_refs"]) == ("null", "[]", "[]")
    assert (row["policy"], row["result_structured"], row["failure_detail"]) == (None,) * 3
    assert from_row(InvocationRecord, row) == record


def test_an_artifact_row_on_exact_text() -> None:
    plus_five = dt.timezone(dt.timedelta(hours=5))
    record = ArtifactRecord(
        id="art-1", run_id="run-1", conversation_id=None, origin=ArtifactOrigin.UPLOAD,
        name="photo.jpg", media_type="image/jpeg", size=4, checksum=CHECKSUM,
        trust=Trust.USER, created_at=T0.astimezone(plus_five),
        expires_at=(T0 + dt.timedelta(seconds=1)).astimezone(plus_five),
        principal_id="alice", claimed=False,
    )
    assert to_row(record) == {
        "id": "art-1", "run_id": "run-1", "conversation_id": None, "origin": "UPLOAD",
        "name": "photo.jpg", "media_type": "image/jpeg", "size": 4, "checksum": CHECKSUM,
        "trust": "USER",
        # The record holds UTC (it converts on construction), so the text is UTC.
        "created_at": "2026-07-25T13:03:11.482913+00:00",
        "expires_at": "2026-07-25T13:03:12.482913+00:00",
        "principal_id": "alice", "claimed": False,
    }


def test_a_row_written_before_principals_and_claims_reads_back() -> None:
    # What a version-1 row holds after migration 2 (principal NULL, claimed 1), as sqlite3
    # returns it: the integer 1, not True.
    row = {"id": "old-1", "run_id": "run-1", "conversation_id": "conv-1", "origin": "UPLOAD",
           "name": "old.txt", "media_type": "text/plain", "size": 3, "checksum": CHECKSUM,
           "trust": "USER", "created_at": "2026-07-25T13:03:11.482913+00:00",
           "expires_at": None, "principal_id": None, "claimed": 1}
    record = from_row(ArtifactRecord, row)
    assert (record.claimed, record.principal_id, record.created_at) == (True, None, T0)
    assert record.origin is ArtifactOrigin.UPLOAD and record.trust is Trust.USER


def test_column_values_converts_only_the_columns_given() -> None:
    assert column_values(InvocationRecord, {
        "state": InvocationState.RUNNING, "started_at": T0, "retryable": None,
        "failure_detail": {"b": (1,), "a": "é"}, "scopes": ("x",),
    }) == {
        "state": "running", "started_at": "2026-07-25T13:03:11.482913+00:00",
        "retryable": None, "failure_detail": '{"a":"é","b":[1]}', "scopes": '["x"]',
    }
    with pytest.raises(KeyError):
        column_values(InvocationRecord, {"no_such_column": 1})


# ------------------------------------------------------------------------------- ToolSpec


def test_spec_to_json_is_plain_json_with_enum_values() -> None:
    spec = make_spec(required_scopes=("fx.read",))
    data = spec_to_json(spec)
    assert json.loads(json.dumps(data)) == data
    assert (data["name"], data["side_effect"], data["output_trust"]) == (
        "fx.echo", "NONE", "INTERNAL_TOOL")
    assert data["required_scopes"] == ["fx.read"]
    assert data["input_schema"] == dict(spec.input_schema)
