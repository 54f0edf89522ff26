"""An ``InvocationRecord`` as a row of ``tool_invocations``, for both record stores.

SQLite and PostgreSQL store the row column for column alike (ISO 8601 text for times,
canonical JSON text, enum values; ``toolhost._model.convert`` says what each column holds), so
one reading serves both, and the SQL both write about the open rows is the same text.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import typing
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import attrs

from toolhost._model.convert import column_values
from toolhost._model.invocations import InvocationRecord, InvocationState

__all__ = ["COLUMNS", "OPEN", "OPEN_STATES", "SELECT_PENDING", "STORED", "PendingCall",
           "history_terms", "principal_term", "read_record"]

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


def history_terms(placeholder: str, stored: Callable[[dict[str, Any]], dict[str, Any]],
                  **given: Any) -> tuple[list[str], list[Any]]:
    """``history``'s filters as SQL terms and their values as the backend stores them
    (``stored``: PostgreSQL keeps free text as bytes): each criterion given is an equality,
    except ``since`` (created at or after it)."""
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


def _reader(tp: Any) -> Callable[[Any], Any] | None:
    """How a non-NULL column value becomes the attribute, by the attribute's type: what
    ``toolhost._model.convert.from_row`` does, without cattrs' dispatch per value (a page of
    ``pending`` cost 11 µs a row that way; tests/test_invocations.py holds the two equal)."""
    args = typing.get_args(tp)
    if type(None) in args:
        (tp,) = (a for a in args if a is not type(None))
    if tp is dt.datetime:
        return dt.datetime.fromisoformat
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {member.value: member for member in tp}.__getitem__  # Enum(value) is slower
    if tp is bool:
        return bool
    if tp in (str, int, float):
        return None
    if tp is tuple or typing.get_origin(tp) is tuple:
        return lambda text: tuple(_json(text))
    return _json  # a mapping or Any: canonical JSON text


def _json(text: str) -> Any:
    # The text is canonical JSON a store wrote: no surrounding whitespace for json.loads to
    # look for, so its scanner is called directly.
    return _DECODER.raw_decode(text)[0]


_DECODER = json.JSONDecoder()


def _record_from_row() -> Callable[[Sequence[Any]], InvocationRecord]:
    """One function for the whole row, written out as attrs and cattrs write theirs: a loop
    over the columns per row costs as much again as the conversions."""
    readers = {f"read_{f.name}": _reader(f.type)
               for f in attrs.fields(attrs.resolve_types(InvocationRecord))}
    arguments = ", ".join(
        f"{name}={name}" if readers[f"read_{name}"] is None
        else f"{name}=None if {name} is None else read_{name}({name})"
        for name in COLUMNS)
    # Columns past the record's (``output_refs``) are the caller's to read.
    source = (f"def record({', '.join(COLUMNS)}, *_):\n"
              f"    return InvocationRecord({arguments})\n")
    namespace: dict[str, Any] = {"InvocationRecord": InvocationRecord, **readers}
    exec(compile(source, "<toolhost invocation row>", "exec"), namespace)
    record: Callable[..., InvocationRecord] = namespace["record"]
    return lambda row: record(*row)


#: The record a row of ``COLUMNS`` (then any further columns, ignored) holds, its text as
#: stored (a PostgreSQL store decodes its ``bytea`` free text first).
read_record = _record_from_row()
