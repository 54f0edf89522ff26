"""The one cattrs converter: value objects to and from the plain data around them.

Two shapes go through it:

- ``ToolSpec`` to JSON-ready data (``spec_to_json``, for ``toolhost tools --json``): enums become
  their values, tuples lists; schemas pass through as the plain JSON they already are.
- ``InvocationRecord`` and ``ArtifactRecord`` to and from their SQLite rows (``to_row``,
  ``from_row``; ``column_values`` for the few columns an UPDATE sets), a column per attribute,
  named as the attribute is:

  * a datetime is ISO 8601 text with six fractional digits, offset included
    (``2026-07-25T13:03:11.000000+00:00``). It is written as the record holds it, which is UTC:
    ``ArtifactRecord`` converts on construction and invocation times come from the Clock. Fixed
    width in UTC is what makes text order time order, so SQL compares the column directly;
  * an enum is its value;
  * str, int, bool and None are themselves (sqlite3 stores a bool as the integer 0 or 1, and
    ``bool`` reads it back);
  * anything else (a mapping, a tuple, ``Any``) is canonical JSON text (``canonical_text``): a
    tuple is written as a JSON array and read back as a tuple; an optional one is NULL when None.

The stored text is part of the schema: changing a hook changes every database already written.
The SQLite adapters import this module; nothing on the path of ``toolhost check`` does.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from toolhost._model.artifacts import ArtifactRecord
from toolhost._model.digest import canonical_text
from toolhost._model.invocations import InvocationRecord
from toolhost._model.spec import ToolSpec

if TYPE_CHECKING:
    import cattrs

# ``converter`` too, made when first asked for (``__getattr__``).
__all__ = ["column_values", "from_row", "spec_to_json", "to_row"]

_Record = TypeVar("_Record", InvocationRecord, ArtifactRecord)


@functools.cache
def _converter() -> cattrs.Converter:
    """The converter, with its hooks, made at the first read: writing a row needs none of it
    (``to_row``, ``column_values``), and importing cattrs and generating the hooks was ~20 ms of
    every command that opens the stores (issue #27)."""
    import cattrs
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn

    converter = cattrs.Converter()
    converter.register_unstructure_hook(dt.datetime, _datetime_text)
    converter.register_structure_hook(dt.datetime, _datetime_from_text)
    for cls in (InvocationRecord, ArtifactRecord):
        overrides = _json_overrides(cls)
        converter.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, converter, **overrides))
        converter.register_structure_hook(
            cls, make_dict_structure_fn(cls, converter, **overrides))
    return converter


def __getattr__(name: str) -> Any:
    # ``converter``, made when first asked for (``_converter``).
    if name == "converter":
        return _converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------- ToolSpec as JSON


def spec_to_json(spec: ToolSpec) -> dict[str, Any]:
    data: dict[str, Any] = _converter().unstructure(spec)
    data["input_schema"] = dict(spec.input_schema)
    data["output_schema"] = dict(spec.output_schema)
    return data


# ---------------------------------------------------------------------------- datetimes


def _datetime_text(value: dt.datetime) -> str:
    return value.isoformat("T", "microseconds")


def _datetime_from_text(value: str, _: Any) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


# ---------------------------------------------------------------------------- JSON columns

_SCALARS = frozenset({str, int, float, bool, bytes, dt.datetime})


def _without_none(tp: Any) -> tuple[Any, bool]:
    """``X | None`` → (X, True); anything else → (itself, False)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            return (rest[0] if len(rest) == 1 else typing.Union[rest]), True  # noqa: UP007
    return tp, False


def _is_column_value(tp: Any) -> bool:
    """Whether a value of this type is stored as itself (or as the ISO text, the enum value)."""
    if typing.get_origin(tp) is not None or not isinstance(tp, type):
        return False  # Any, tuple[...], Mapping[...]
    return tp in _SCALARS or issubclass(tp, enum.Enum)


def _json_text(value: Any) -> str:
    return canonical_text(list(value) if isinstance(value, tuple) else value)


def _json_text_or_null(value: Any) -> str | None:
    return None if value is None else _json_text(value)


def _from_json_text(text: str | None, _: Any) -> Any:
    return None if text is None else json.loads(text)


def _tuple_from_json_text(text: str | None, _: Any) -> tuple[Any, ...] | None:
    return None if text is None else tuple(json.loads(text))


def _json_overrides(cls: type) -> dict[str, Any]:
    """The cattrs overrides for ``cls``'s attributes that are stored as JSON text."""
    from cattrs.gen import override

    overrides: dict[str, Any] = {}
    for field in attrs.fields(cls):
        tp, optional = _without_none(field.type)
        if _is_column_value(tp):
            continue
        is_tuple = typing.get_origin(tp) is tuple or tp is tuple
        overrides[field.name] = override(
            unstruct_hook=_json_text_or_null if optional else _json_text,
            struct_hook=_tuple_from_json_text if is_tuple else _from_json_text,
        )
    return overrides


# ---------------------------------------------------------------------------- records as rows

def _identity(value: Any) -> Any:
    return value


def _enum_value(value: enum.Enum) -> Any:
    return value.value


def _column_kind(tp: Any) -> str:
    """Which of the module docstring's rules stores an attribute of type ``tp`` (``X | None``
    already taken apart): the one place both ``_column_hook`` and ``_row_function`` ask."""
    if tp is dt.datetime:
        return "datetime"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "enum"
    if _is_column_value(tp):
        return "itself"
    return "tuple" if typing.get_origin(tp) is tuple or tp is tuple else "json"


def _column_hook(tp: Any, optional: bool) -> Callable[[Any], Any]:
    """The function giving a column's value from an attribute of type ``tp``."""
    kind = _column_kind(tp)
    if kind == "itself":
        return _identity
    if kind in ("tuple", "json"):
        return _json_text_or_null if optional else _json_text
    hook: Callable[[Any], Any] = _datetime_text if kind == "datetime" else _enum_value
    return (lambda value: None if value is None else hook(value)) if optional else hook


for _row_type in (InvocationRecord, ArtifactRecord):
    attrs.resolve_types(_row_type)

#: Per record class: attribute (= column) name → the function giving its column value.
_COLUMN_HOOKS: dict[type, dict[str, Callable[[Any], Any]]] = {
    cls: {field.name: _column_hook(*_without_none(field.type)) for field in attrs.fields(cls)}
    for cls in (InvocationRecord, ArtifactRecord)
}


def _row_function(cls: type) -> Callable[[Any], dict[str, Any]]:
    """``converter.unstructure`` for a record class, written out as one dict display: the
    generated cattrs function calls a hook per attribute (a wrapper per optional one), ~2x
    this on the hot path where every call writes a row. tests/test_convert.py holds the two
    equal."""
    items = []
    # The times first, each once: a record's times are often one datetime (a call's row
    # starts when it is created), and the first one's text is reused for the others that are
    # that same object. Positional arguments: isoformat's keyword parsing was ~0.5 µs a time.
    prelude: list[str] = []
    first: str | None = None
    for field in attrs.fields(cls):
        tp, optional = _without_none(field.type)
        get = f"r.{field.name}"
        kind = _column_kind(tp)
        if kind == "datetime":
            time, text = f"t_{field.name}", f"v_{field.name}"
            value = f"{time}.isoformat('T', 'microseconds')"
            if first is not None:
                value = f"(v_{first} if {time} is t_{first} else {value})"
            if optional:
                value = f"(None if {time} is None else {value})"
            prelude += [f"    {time} = {get}\n", f"    {text} = {value}\n"]
            if first is None and not optional:
                first = field.name
            value = text
        else:
            value = {
                "enum": f"{get}.value",
                "itself": get,
                "tuple": f"(canonical_text(list({get})) if {get} else '[]')",
                "json": f"canonical_text({get})",
            }[kind]
            if optional and value != get:
                value = f"(None if {get} is None else {value})"
        items.append(f"{field.name!r}: {value}")
    source = f"def row(r):\n{''.join(prelude)}    return {{{', '.join(items)}}}\n"
    namespace: dict[str, Any] = {"canonical_text": canonical_text}
    exec(compile(source, f"<toolhost {cls.__name__} row>", "exec"), namespace)
    function: Callable[[Any], dict[str, Any]] = namespace["row"]
    return function


_ROWS = {cls: _row_function(cls) for cls in (InvocationRecord, ArtifactRecord)}


def to_row(record: InvocationRecord | ArtifactRecord) -> dict[str, Any]:
    """Every column of ``record``'s row, by name, in attribute order."""
    return _ROWS[type(record)](record)


def from_row(cls: type[_Record], row: Mapping[str, Any]) -> _Record:
    """The record a row (column name → stored value) holds."""
    return _converter().structure(row, cls)


def column_values(cls: type[InvocationRecord | ArtifactRecord],
                  fields: Mapping[str, Any]) -> dict[str, Any]:
    """Some of a row's columns (attribute name → value), as ``to_row`` would write them.

    :raises KeyError: a name that is not an attribute of ``cls``.
    """
    hooks = _COLUMN_HOOKS[cls]
    return {name: hooks[name](value) for name, value in fields.items()}
