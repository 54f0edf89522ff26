"""An ``ArtifactRecord`` as a row of the ``artifacts`` table, for every metadata backend.

The columns are the record's attributes, in its order; ``toolhost._model.convert`` holds what
each column stores (ISO text in UTC, enum values), so SQLite and PostgreSQL keep the same
values and list in the same order. A row changed behind the store's back so that it holds no
record reads as ``ArtifactRecordDamaged`` (the port's ``DamagedArtifact``), never as an error
that would stop the other rows from being listed.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from toolhost._model.artifacts import ArtifactCorrupted, ArtifactOrigin, ArtifactRecord
from toolhost._model.convert import from_row, to_row
from toolhost._model.spec import Trust
from toolhost._ports.artifacts import DamagedArtifact

__all__ = ["COLUMNS", "NAMES", "ArtifactRecordDamaged", "damaged", "entry", "record",
           "records", "row_id"]

#: The ``artifacts`` columns a record is read from and written to, in the record's order.
NAMES = tuple(f.name for f in attrs.fields(ArtifactRecord))
COLUMNS = ", ".join(NAMES)


class ArtifactRecordDamaged(ArtifactCorrupted):
    """A row that cannot be read as an ``ArtifactRecord`` (``DamagedArtifact``): what ``get``
    raises for its id and what ``list_rows`` lists in its place (made, not raised, there)."""

    def __init__(self, artifact_id: str, field: str) -> None:
        super().__init__(artifact_id, f"its record is damaged ({field})")
        self.field = field

    @property
    def id(self) -> str:
        """See ``DamagedArtifact.id``."""
        return self.artifact_id


#: A row of a record every value of which is sound: ``_damaged_field`` puts one column of a
#: damaged row into it at a time.
_SOUND_ROW = to_row(ArtifactRecord(
    id="sound", run_id="sound", conversation_id=None, origin=ArtifactOrigin.EXPORT,
    name="sound", media_type="text/plain", size=0, checksum="sha256:" + "0" * 64,
    trust=Trust.USER, created_at=_dt.datetime(2000, 1, 1, tzinfo=_dt.UTC),
))
#: What reading a row as a record raises when a value is refused: cattrs' group (its
#: ``BaseValidationError``, an ExceptionGroup: named so, cattrs is imported only by a read),
#: with a validator's or a converter's error inside, or the error itself.
_REFUSED = (ExceptionGroup, ValueError, TypeError)


def damaged(columns: Mapping[str, Any], field: str | None = None) -> ArtifactRecordDamaged:
    """What is damaged in a row (name → stored value): ``field`` when the caller found it,
    else the first attribute whose column alone the record refuses."""
    return ArtifactRecordDamaged(row_id(columns), field or _damaged_field(columns))


def entry(columns: Mapping[str, Any]) -> ArtifactRecord | ArtifactRecordDamaged:
    """The record a row's columns (name → stored value) hold, or, for a row changed behind
    the store's back so that they hold none, what is damaged in it."""
    try:
        return from_row(ArtifactRecord, columns)
    except _REFUSED:
        return damaged(columns)


def record(row: Sequence[Any]) -> ArtifactRecord:
    """The record a row of ``COLUMNS`` holds; raises ``ArtifactRecordDamaged`` when it holds
    none."""
    found = entry(dict(zip(NAMES, row, strict=True)))
    if isinstance(found, ArtifactRecordDamaged):
        raise found
    return found


def records(entries: Iterable[ArtifactRecord | DamagedArtifact]) -> list[ArtifactRecord]:
    """The records among ``entries``: the damaged rows skipped."""
    return [e for e in entries if isinstance(e, ArtifactRecord)]


def row_id(columns: Mapping[str, Any]) -> str:
    """A row's id as a message may name it, whatever the column holds."""
    value = columns.get("id")
    return value if isinstance(value, str) else repr(value)


def _damaged_field(columns: Mapping[str, Any]) -> str:
    """The first attribute, in the record's order, whose column alone the record refuses:
    read the way every row is read, with the other values sound."""
    for name in NAMES:
        try:
            from_row(ArtifactRecord, {**_SOUND_ROW, name: columns[name]})
        except _REFUSED:
            return name
    return "record"  # only the values together are refused
