"""An ``InvocationRecord`` as a row of ``tool_invocations``, for both record stores.

SQLite and PostgreSQL store the row column for column alike (ISO 8601 text for times,
canonical JSON text, enum values; ``toolhost._model.convert`` says what each column holds), so
one reading serves both, and the SQL both write about the open rows is the same text. A row
changed behind the store's back so that it holds no record reads as ``InvocationRecordDamaged``
(``entry``), never as an error that would stop the other rows from being listed or recovered.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from toolhost._adapters.stored_output import completed
from toolhost._model.convert import column_values
from toolhost._model.invocations import (
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    valid_operator_directory,
)

__all__ = ["COLUMNS", "OPEN", "OPEN_STATES", "SELECT_PENDING", "STORED", "PendingCall",
           "damaged", "entry", "filter_terms", "principal_term", "record", "records"]

#: The record's attributes, in its order: the columns it is read from and written to.
COLUMNS = tuple(f.name for f in attrs.fields(InvocationRecord))
#: The record's columns, then where its output is (``stored_output``).
STORED = (*COLUMNS, "output_refs")
#: The rows not yet final: the partial index's condition, word for word. A query on an open
#: state repeats it: SQLite uses a partial index only for a query whose WHERE has the index's
#: terms, and ``state = ?`` does not imply them. (An ``IN`` of the open states would be a
#: lookup of its own, and lose the index's order.)
OPEN = "state NOT IN ('denied', 'failed', 'succeeded')"
OPEN_STATES = frozenset({InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED,
                         InvocationState.RUNNING})
#: ``pending``'s columns, as stored (``PendingCall``).
SELECT_PENDING = ("SELECT id, run_id, tool_name, tool_version, argument_digest, created_at, "
                  "arguments, policy FROM tool_invocations")


class PendingCall(NamedTuple):
    """The port's ``PendingCall``: the row's columns as stored (ISO text, canonical JSON)."""

    id: str
    run_id: str
    tool_name: str
    tool_version: str | None
    argument_digest: str | None
    created: str
    arguments_json: str
    policy_json: str | None


def filter_terms(placeholder: str, stored: Callable[[dict[str, Any]], dict[str, Any]],
                 **given: Any) -> tuple[list[str], list[Any]]:
    """``list``'s and ``history``'s filters as SQL terms and their values as the backend
    stores them (``stored``: PostgreSQL keeps free text as bytes): each criterion given (not
    None) is an equality, except ``since`` (created at or after it)."""
    since = given.pop("since", None)
    criteria = stored(column_values(
        InvocationRecord, {k: v for k, v in given.items() if v is not None}))
    terms = [f"{column} = {placeholder}" for column in criteria]
    values = list(criteria.values())
    if given.get("state") in OPEN_STATES:
        terms.insert(0, OPEN)  # the partial index's condition: without it the index is unused
    if since is not None:
        terms.append(f"created_at >= {placeholder}")
        values.extend(column_values(InvocationRecord, {"created_at": since}).values())
    return terms, values


def principal_term(principal_id: str | None, placeholder: str) -> list[str]:
    """``pending``'s filter on a principal, if one is given."""
    return [] if principal_id is None else [f"principal_id = {placeholder}"]


def _reading(name: str, tp: Any) -> tuple[str, dict[str, Any]]:
    """How a non-NULL value of the column ``name`` becomes the attribute, by the attribute's
    type: an expression of the variable ``name``, and the names it uses. What
    ``toolhost._model.convert.from_row`` does, without cattrs' dispatch per value (a page of
    ``pending`` cost 11 µs a row that way; tests/test_invocations.py holds the two equal),
    and refusing (``_REFUSED``) a value no store writes for that type: the row is damaged.
    The checks are inline where a call per value would cost more than the check."""
    if name in _SHAPED:  # a column whose JSON must be more than its type says
        return f"shaped_{name}(json({name}))", {f"shaped_{name}": _SHAPED[name], "json": _json}
    args = typing.get_args(tp)
    if type(None) in args:
        (tp,) = (a for a in args if a is not type(None))
    if tp is dt.datetime:
        # A store writes UTC with its offset. A time without one (written outside toolhost,
        # as some tests of the stores write rows) is taken as UTC: naive and aware times do
        # not compare, so it would fail whatever compares it later.
        return (f"(v if (v := fromisoformat({name})).tzinfo is not None "
                "else v.replace(tzinfo=UTC))",
                {"fromisoformat": dt.datetime.fromisoformat, "UTC": dt.UTC})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        # Enum(value) is slower; an unknown value is a KeyError.
        return f"{name}_members[{name}]", {f"{name}_members": {m.value: m for m in tp}}
    if tp is bool:
        return f"bool({name})", {}
    if tp is str:  # a BLOB in SQLite; bytes a PostgreSQL free-text column did not decode
        return f"{name} if {name}.__class__ is str else refuse({name})", {"refuse": _refuse}
    if tp in (int, float):
        return name, {}
    if tp is tuple or typing.get_origin(tp) is tuple:
        if typing.get_args(tp)[:1] == (str,):
            return f"strings({name})", {"strings": _strings}
        return f"() if {name} == '[]' else mappings({name})", {"mappings": _mappings}
    if typing.get_origin(tp) is Mapping:
        return (f"(v if (v := json({name})).__class__ is dict else refuse({name}))",
                {"json": _json, "refuse": _refuse})
    return f"json({name})", {"json": _json}  # Any: canonical JSON text


#: The columns whose value a store writes in one shape only, and the function refusing any
#: other (a TypeError): a directory that is not absolute would run an approved call elsewhere.
_SHAPED: dict[str, Callable[[Any], Any]] = {"operator_directory": valid_operator_directory}


def _json(text: str) -> Any:
    # The text is canonical JSON a store wrote: no surrounding whitespace for json.loads to
    # look for, so its scanner is called directly; anything after the value is damage.
    value, end = _DECODER.raw_decode(text)
    if end != len(text):
        raise ValueError("text after the JSON value")
    return value


_DECODER = json.JSONDecoder()


def _mappings(text: str) -> tuple[dict[str, Any], ...]:
    value = _json(text)
    if type(value) is not list or any(type(item) is not dict for item in value):
        raise TypeError("not a JSON array of objects")
    return tuple(value)


def _strings(text: str) -> tuple[str, ...]:
    value = _json(text)
    if type(value) is not list:
        raise TypeError("not a JSON array")
    "".join(value)  # a TypeError for an item that is not a str: the check, in C
    return tuple(value)


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} {value!r:.40} is not this attribute's")


#: What reading a damaged value raises: an unknown enum value (KeyError), text that is not an
#: instant or not JSON (ValueError, JSONDecodeError), JSON of the wrong shape or a value of
#: the wrong type (TypeError), JSON nested past the parser's limit (RecursionError).
_REFUSED = (KeyError, ValueError, TypeError, RecursionError)

_FIELDS = attrs.fields(attrs.resolve_types(InvocationRecord))
#: The attributes a row may hold NULL for: the optional ones, and ``Any`` (the arguments).
_NULLABLE = frozenset(f.name for f in _FIELDS
                      if f.type is Any or type(None) in typing.get_args(f.type))


def _compiled(source: str, names: dict[str, Any], function: str) -> Callable[..., Any]:
    namespace = {"InvocationRecord": InvocationRecord, **names}
    exec(compile(source, "<toolhost invocation row>", "exec"), namespace)
    made: Callable[..., Any] = namespace[function]
    return made


def _functions() -> tuple[Callable[[Sequence[Any]], InvocationRecord],
                          dict[str, Callable[[Any], Any]]]:
    """One function for the whole row, written out as attrs and cattrs write theirs (a loop
    over the columns per row costs as much again as the conversions); and, for finding what
    is damaged in a row that function refused, one per column, of the same expressions."""
    readings = {f.name: _reading(f.name, f.type) for f in _FIELDS}
    names = {k: v for _, used in readings.values() for k, v in used.items()}
    # NULL is the attribute's None where it may be None; anywhere else, the expression's to
    # refuse (no store writes it: NOT NULL).
    values = {name: (f"None if {name} is None else " if name in _NULLABLE else "")
              + f"({expression})" for name, (expression, _) in readings.items()}
    # Columns past the record's (``output_refs``) are the caller's to read.
    arguments = ", ".join(f"{name}={values[name]}" for name in COLUMNS)
    row = _compiled(f"def record({', '.join(COLUMNS)}, *_):\n"
                    f"    return InvocationRecord({arguments})\n", names, "record")
    columns = {name: _compiled(f"def read({name}):\n    return {expression}\n", names, "read")
               for name, (expression, _) in readings.items()}
    return (lambda values: row(*values)), columns


#: The record a row of ``COLUMNS`` (then any further columns, ignored) holds, its text as
#: stored (a PostgreSQL store decodes its ``bytea`` free text first), raising one of
#: ``_REFUSED`` for a damaged row (``entry`` says what is damaged); and each column's reading.
_read, _COLUMN_READS = _functions()


def entry(row: Sequence[Any], blob: Callable[[str], bytes]) -> (
        InvocationRecord | InvocationRecordDamaged):
    """The record a row of ``STORED`` holds, its output completed from ``blob`` (the body of a
    ``tool_outputs`` row by digest, ``stored_output.completed``); or, for a row changed behind
    the store's back so that it holds none, what is damaged in it.

    :raises OutputMissing: the row names an output the database does not hold.
    """
    try:
        found = _read(row)
    except _REFUSED:
        return damaged(row)
    try:
        return completed(found, row[-1], blob)
    except _REFUSED:
        return damaged(row, "output_refs")


def record(row: Sequence[Any], blob: Callable[[str], bytes]) -> InvocationRecord:
    """``entry``'s record; raises ``InvocationRecordDamaged`` when the row holds none."""
    found = entry(row, blob)
    if isinstance(found, InvocationRecordDamaged):
        raise found
    return found


def records(entries: Iterable[InvocationRecord | InvocationRecordDamaged]
            ) -> list[InvocationRecord]:
    """The records among ``entries``: the damaged rows skipped."""
    return [e for e in entries if not isinstance(e, InvocationRecordDamaged)]


def damaged(row: Sequence[Any], field: str | None = None) -> InvocationRecordDamaged:
    """What is damaged in a row of ``COLUMNS``: ``field`` when the caller found it, else the
    first attribute, in the record's order, whose column alone the record refuses."""
    columns = dict(zip(COLUMNS, row, strict=False))
    invocation_id = columns["id"] if isinstance(columns["id"], str) else repr(columns["id"])
    tool, version = columns["tool_name"], columns["tool_version"]
    return InvocationRecordDamaged(
        invocation_id, field or _damaged_field(columns),
        tool if isinstance(tool, str) else None, version if isinstance(version, str) else None)


def _damaged_field(columns: Mapping[str, Any]) -> str:
    """The first attribute, in the record's order, whose column alone the record refuses:
    read as the row is read."""
    for name in COLUMNS:
        value = columns[name]
        if value is None and name in _NULLABLE:
            continue
        try:
            _COLUMN_READS[name](value)
        except _REFUSED:
            return name
    return "record"  # only the values together are refused
