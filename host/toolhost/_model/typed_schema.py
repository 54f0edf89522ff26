"""JSON Schema from Python types, for tools declared as typed functions (``toolhost.tool``).

What maps, and to what (every object closed, ``additionalProperties: false``, at every level):

- ``str``, ``int``, ``float``, ``bool`` → ``string``, ``integer``, ``number``, ``boolean``;
- ``Literal["a", "b"]`` → ``enum`` (with ``type`` when the values share one), ``Literal[True]``
  (one value) → ``const``; an ``enum.Enum`` → ``enum`` of its values; a Literal's values (and a
  union's branches) sorted where typing's cache may have handed over another order
  (``schema_of``'s ``as_written``);
- ``T | None`` → ``T`` that also admits ``null``; ``A | B`` → ``anyOf`` (of scalars, Literals
  and attrs classes each told apart by a required field of its own or a Literal tag), with no
  ``default`` inside a branch (fastjsonschema would fill it in even when the branch fails);
- ``list[T]``, ``tuple[T, ...]``, ``Sequence[T]`` → an ``array`` of ``T``;
- an attrs class → an ``object`` of its fields by their aliases (a field with a default is not
  required, and the default is in the schema; an ``init=False`` field is no argument); as a
  result, every field at every level is required and no default is given;
- ``Annotated[T, ...]`` with the markers below: lengths, ranges, patterns, a description; a
  marker on ``T | None`` constrains the ``T``, and one that does not fit its type is refused.

A default must match its own schema (an attrs field's too), a class that contains itself is
refused, and so is ``ToolExecutionContext`` or ``Services`` as anything but a parameter's
exact annotation.

The markers are this module's own, small and frozen, so a plugin needs neither pydantic nor
annotated-types to say ``Annotated[str, MaxLen(64)]``. Anything else is a TypeError naming the
parameter: a tool's schema is what the model is told, so nothing is guessed.
"""

from __future__ import annotations

import enum
import json
import math
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "Doc",
    "MaxLen",
    "MinLen",
    "Pattern",
    "Range",
    "argument_default",
    "closed_object",
    "field_hints",
    "fits",
    "has_utf8",
    "hints_of",
    "json_default",
    "not_json_number",
    "object_schema",
    "schema_of",
    "strip_annotated",
    "union_members",
    "union_tag",
    "wire_name",
    "with_default",
]


def _length(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name}: a length is a whole number, 0 or more, not {value!r}")


def _utf8(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if isinstance(value, str) and not has_utf8(value):  # else registration refuses the schema
        raise ValueError(f"{attribute.name}: {value!r} {_NO_UTF8}")


@attrs.frozen
class MinLen:
    """At least this many characters (a string) or items (a list): ``minLength``/``minItems``."""

    value: int = attrs.field(validator=_length)


@attrs.frozen
class MaxLen:
    """At most this many characters (a string) or items (a list): ``maxLength``/``maxItems``."""

    value: int = attrs.field(validator=_length)


def _bound(_: object, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{attribute.name}: a bound is a number, not {value!r}")
    why = not_json_number(value)
    if why is not None:  # the schema could not carry it: registration would refuse the tool
        raise ValueError(f"{attribute.name}: a bound is a number JSON can hold, not {why}")


@attrs.frozen
class Range:
    """Bounds of a number: ``minimum``/``maximum`` inclusive, the ``exclusive_`` ones not."""

    minimum: float | None = attrs.field(default=None, validator=_bound)
    maximum: float | None = attrs.field(default=None, validator=_bound)
    exclusive_minimum: float | None = attrs.field(default=None, kw_only=True, validator=_bound)
    exclusive_maximum: float | None = attrs.field(default=None, kw_only=True, validator=_bound)

    def __attrs_post_init__(self) -> None:
        why = _no_number_between(self.minimum, self.maximum, self.exclusive_minimum,
                                 self.exclusive_maximum)
        if why is not None:
            raise ValueError(f"{self!r} admits no number: {why}")


def _no_number_between(minimum: float | None, maximum: float | None,
                       exclusive_minimum: float | None,
                       exclusive_maximum: float | None) -> str | None:
    """Why no number lies within these bounds, or None when one does."""
    # (bound, excludes it): at equal bounds the exclusive one is the tighter.
    low = max(((b, x) for b, x in ((minimum, False), (exclusive_minimum, True))
               if b is not None), default=None)
    high = min(((b, not x) for b, x in ((maximum, False), (exclusive_maximum, True))
                if b is not None), default=None)
    if low is None or high is None:
        return None
    if low[0] > high[0]:
        return "its lower bound is above its upper"
    if low[0] == high[0] and (low[1] or not high[1]):
        return "its bounds are equal and one of them is exclusive"
    return None


@attrs.frozen
class Pattern:
    """A regular expression the string must match somewhere (``pattern``; anchor it with
    ``^...$`` to match the whole). Compiled here, so a bad one fails at decoration."""

    regex: str = attrs.field(validator=_utf8)

    @regex.validator
    def _compiles(self, _: attrs.Attribute[str], value: str) -> None:
        re.compile(value)
        try:  # as the host's validator will: else registration refuses the tool, pointing at /
            re.compile(_validator_pattern(value))
        except re.error:
            raise ValueError(f"{value!r}: the host's validator reads every unescaped $ as the end "
                             "of the string, inside [...] too, where that is no regex; escape "
                             "it there (\\$)") from None


@attrs.frozen
class Doc:
    """The property's ``description``: what the model reads about this one argument."""

    text: str = attrs.field(validator=_utf8)


_SCALARS: Mapping[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}
_JSON_TYPES: tuple[type, ...] = (str, bool, int, float, type(None))


def hints_of(owner: Any) -> dict[str, Any]:
    """The resolved annotations of a function or class, ``Annotated`` kept."""
    name = getattr(owner, "__qualname__", repr(owner))
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except NameError as exc:
        if "<locals>" in name:  # its annotations name what only the enclosing call could see
            raise TypeError(
                f"{name}: an annotation does not resolve ({exc}): it is defined inside a "
                "function; define the tool and the classes its signature uses at module level"
            ) from exc
        raise TypeError(
            f"{name}: an annotation does not resolve ({exc}); "
            "import the names a tool's signature uses at run time, not under TYPE_CHECKING"
        ) from exc


def wire_name(field: attrs.Attribute[Any]) -> str:
    """A field's name in JSON: its alias (``_token`` is ``token``), as cattrs is told to use."""
    return field.alias or field.name


def field_hints(cls: type, where: str) -> dict[str, Any]:
    """Each field's annotation, ``attr.ib(type=...)`` included; a field with neither is a
    TypeError."""
    hints = hints_of(cls)
    found: dict[str, Any] = {}
    for field in attrs.fields(cls):
        hint = hints.get(field.name, field.type)
        if hint is None or isinstance(hint, str):
            raise TypeError(f"{where}: {cls.__qualname__}.{field.name} has no type a schema can "
                            "come from; annotate the field")
        found[field.name] = hint
    return found


def strip_annotated(hint: Any) -> Any:
    """``hint`` without its ``Annotated`` layers, at every depth (what cattrs structures to)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return strip_annotated(typing.get_args(hint)[0])
    if origin in (types.UnionType, typing.Union):
        stripped = tuple(strip_annotated(a) for a in typing.get_args(hint))
        return typing.Union[stripped]  # noqa: UP007 - built from a tuple
    if origin in (list, tuple, Sequence):
        args = tuple(strip_annotated(a) if a is not Ellipsis else a for a in typing.get_args(hint))
        return (tuple if origin is tuple else list)[args if origin is tuple else args[0]]
    return hint


def schema_of(hint: Any, where: str, *, output: bool = False, in_union: bool = False,
              seen: tuple[type, ...] = (), as_written: bool = True) -> dict[str, Any]:
    """The JSON Schema of one annotation; ``where`` names it in a TypeError. ``output``: a
    result's (every field required, no defaults); ``in_union``: inside an ``anyOf`` branch,
    where no ``default`` may be (fastjsonschema fills it in even when the branch fails).

    ``as_written``: whether ``hint`` is the object its author wrote. typing hands back a
    ``typing.Union`` (``| None`` on a Literal too), an ``Annotated`` or a ``typing.List`` from
    a cache keyed by equality, and ``Literal["a", "b"]`` equals ``Literal["b", "a"]``: below
    one of those, the orders in hand may be another module's, so a Literal's values and a
    union's branches are sorted, and the schema never depends on what was imported first."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        base, *markers = typing.get_args(hint)
        schema = schema_of(base, where, output=output, in_union=in_union, seen=seen,
                           as_written=False)
        for marker in markers:
            _apply(schema, marker, where)
        _admits_a_value(_target(schema), where)
        return schema
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin is typing.Literal:
        values = list(typing.get_args(hint))
        if len(values) == 1:  # one value is a constant, not a choice
            return {"const": _enum_schema(values, where)["enum"][0]}
        return _enum_schema(values, where, canonical=not as_written)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([member.value for member in hint], where)
    if origin in (types.UnionType, typing.Union):  # ``int | str`` is made anew, never cached
        return _union_schema(typing.get_args(hint), where, output=output, seen=seen,
                             as_written=as_written and origin is types.UnionType)
    if origin in (list, Sequence) or (
        origin is tuple and len(typing.get_args(hint)) == 2 and typing.get_args(hint)[1] is ...
    ):  # ``list[T]`` is made anew; ``typing.List[T]`` comes from the cache
        return {"type": "array", "items": schema_of(
            typing.get_args(hint)[0], f"{where}[]", output=output, in_union=in_union,
            seen=seen, as_written=as_written and isinstance(hint, types.GenericAlias))}
    if isinstance(hint, type) and attrs.has(hint):
        if hint in seen:
            raise TypeError(f"{where}: {hint.__qualname__} is recursive (it contains itself, "
                            "directly or through its fields); a tool's schema is finite, so "
                            "bound the nesting with classes of their own")
        return closed_object(hint, where, output=output, in_union=in_union, seen=seen)
    raise TypeError(
        f"{where}: {hint!r} has no schema here; use str, int, float, bool, Literal[...], an "
        "Enum, an attrs class, list[T] or tuple[T, ...] of them, T | None, or Annotated[T, ...]"
    )


def closed_object(cls: type, where: str, *, output: bool, in_union: bool = False,
                  seen: tuple[type, ...] = ()) -> dict[str, Any]:
    """An attrs class as a closed object, its fields by their aliases. Arguments: a field with a
    default is not required (its default in the schema, outside a union), an ``init=False``
    field is not there at all. A result (``output``): every field, always present, required."""
    _not_given(cls, where, output=output)
    if "<locals>" in cls.__qualname__:
        raise TypeError(f"{where}: {cls.__qualname__} is defined inside a function; define the "
                        "classes a tool's signature uses at module level")
    hints = field_hints(cls, where)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        if not field.init and not output:  # never an argument: the class computes it
            continue
        name = wire_name(field)
        schema = schema_of(hints[field.name], f"{where}.{name}", output=output,
                           in_union=in_union, seen=(*seen, cls))
        if field.default is attrs.NOTHING or output:
            required.append(name)
        else:
            default = argument_default(field)
            if default is not attrs.NOTHING:
                # Checked in a union's branch too, where the body gets it all the same; only
                # written outside one (``schema_of``: no default inside a branch).
                with_default(dict(schema) if in_union else schema, default, f"{where}.{name}")
        properties[name] = schema
    return object_schema(properties, required)


def argument_default(field: attrs.Attribute[Any]) -> Any:
    """The value an argument leaves out gets: a ``Factory``'s made anew, ``attrs.NOTHING`` for
    none or for one made from the instance (``takes_self``: no value a schema could hold)."""
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return attrs.NOTHING if default.takes_self else default.factory()
    return default


def _not_given(cls: type, where: str, *, output: bool) -> None:
    """The context and the services are given to a parameter annotated exactly as them; one
    anywhere else (``| None``, ``Annotated``, a field) would otherwise be read as arguments."""
    # Not imported to compare: a class that is one of them has loaded its module already.
    context = sys.modules.get("toolhost._model.context")
    if context is None or cls not in (context.ToolExecutionContext, context.Services):
        return
    name = cls.__qualname__
    if output:
        raise TypeError(f"{where}: {name} is given by the host to a parameter, not a result")
    raise TypeError(f"{where}: {name} is given by the host, not an argument: annotate the "
                    f"parameter exactly {name} (no | None, no Annotated, not inside another "
                    "type)")


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The one shape of an object: its properties, which are required, and nothing else."""
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def with_default(schema: dict[str, Any], value: Any, where: str) -> None:
    """Put ``value`` in ``schema`` as its ``default``: JSON data the schema itself admits, or a
    TypeError (step 4 fills a default in unchecked, so a wrong one would reach the body)."""
    default = json_default(value, where)
    if not fits(default, schema):
        raise TypeError(f"{where}: the default {default!r} does not match its own schema; "
                        "change the default or the annotation (T | None admits None)")
    schema["default"] = default


def json_default(value: Any, where: str) -> Any:
    """A default as JSON: a tuple as a list; anything but plain JSON data is a TypeError."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, tuple | list):
        return [json_default(v, where) for v in value]
    if not isinstance(value, _JSON_TYPES):
        raise TypeError(f"{where}: the default {value!r} is not JSON data (str, int, float, "
                        "bool, None, or a list of them)")
    if isinstance(value, str) and not has_utf8(value):
        raise TypeError(f"{where}: the default {value!r} {_NO_UTF8}")
    why = not_json_number(value) if isinstance(value, int | float) else None
    if why is not None:
        raise TypeError(f"{where}: the default is {why}, which JSON has no form for")
    return value


#: Why text with a lone surrogate is refused: what ``os.environ`` and ``os.listdir`` give for a
#: byte that is not UTF-8 has no UTF-8 form, so no JSON text holds it (D393).
_NO_UTF8 = ("has no UTF-8 form (a lone surrogate, as os.environ gives for a byte that is not "
            "UTF-8), so JSON cannot carry it")


def has_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_json_number(value: float) -> str | None:
    """What a number JSON text cannot hold is (NaN, an infinity, an integer of more digits than
    Python writes out), for a message that does not print it; None for any other number."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    try:
        str(value)
    except ValueError:  # past sys.get_int_max_str_digits(): no text, so no JSON either
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return None


def fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether JSON ``value`` matches ``schema``, for the keywords this module writes."""
    if "anyOf" in schema and not any(fits(value, branch) for branch in schema["anyOf"]):
        return False
    if "const" in schema and not _same(value, schema["const"]):
        return False
    if "enum" in schema and not any(_same(value, v) for v in schema["enum"]):
        return False
    declared = schema.get("type")
    if declared is not None and not any(
            _is(value, kind) for kind in (declared if isinstance(declared, list) else [declared])):
        return False
    if isinstance(value, str):
        return (schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
                and ("pattern" not in schema
                     or re.search(_validator_pattern(schema["pattern"]), value) is not None))
    if isinstance(value, list):
        return (schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value))
                and all(fits(item, schema.get("items", {})) for item in value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (value >= schema.get("minimum", value) and value <= schema.get("maximum", value)
                and ("exclusiveMinimum" not in schema or value > schema["exclusiveMinimum"])
                and ("exclusiveMaximum" not in schema or value < schema["exclusiveMaximum"]))
    return True


#: An unescaped ``$``, which fastjsonschema (the host's validator) rewrites to ``\Z``: for it
#: ``$`` is the end of the string, not also before a final newline as for Python's ``re``.
_DOLLAR = re.compile(r"(?<!\\)\$")


def _validator_pattern(regex: str) -> str:
    """``regex`` as the host's validator compiles a schema's ``pattern``."""
    return _DOLLAR.sub(r"\\Z", regex)


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "null": type(None),
                              "array": list, "object": dict}[kind])


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _admits_null(schema: Mapping[str, Any]) -> bool:
    declared = schema.get("type")
    return declared == "null" or (isinstance(declared, list) and "null" in declared) or any(
        b.get("type") == "null" for b in schema.get("anyOf", ()))


def _enum_schema(values: list[Any], where: str, *, canonical: bool = False) -> dict[str, Any]:
    """``canonical``: the values sorted by their JSON type, then by value (``schema_of``)."""
    kinds = {_SCALARS.get(type(v)) for v in values}
    if None in kinds or not values:
        raise TypeError(f"{where}: an enum's values must be str, int, float or bool")
    for value in values:
        if isinstance(value, str) and not has_utf8(value):
            raise TypeError(f"{where}: the value {value!r} {_NO_UTF8}")
    if canonical:
        values = sorted(values, key=lambda v: (_SCALARS[type(v)], v))
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _union_schema(members: tuple[Any, ...], where: str, *, output: bool,
                  seen: tuple[type, ...], as_written: bool) -> dict[str, Any]:
    present = [m for m in members if m is not type(None)]
    if len(present) > 1:
        union_members(tuple(present), where)
    if len(present) == len(members):
        branches = [schema_of(m, where, output=output, in_union=True, seen=seen,
                              as_written=as_written) for m in present]
        if not as_written:  # the members' order may be another module's (``schema_of``)
            branches.sort(key=lambda branch: json.dumps(branch, sort_keys=True))
        return {"anyOf": branches}
    inner = schema_of(present[0], where, output=output, in_union=True, seen=seen,
                      as_written=as_written) if len(present) == 1 else _union_schema(
        tuple(present), where, output=output, seen=seen, as_written=as_written)
    declared = inner.get("type")
    if declared in _SCALARS.values() and "enum" not in inner:  # a scalar: one schema, two types
        return {**inner, "type": [declared, "null"]}
    return {"anyOf": [inner, {"type": "null"}]}


def union_members(members: tuple[Any, ...], where: str) -> tuple[type, ...]:
    """The attrs classes of a union of two or more values, checked structurable: the rest
    may only be scalars or Literals, and each class must be told apart from the others
    (``union_tag``). A TypeError otherwise: cattrs would fail at every call."""
    classes: list[type] = []
    for member in (strip_annotated(m) for m in members):
        if isinstance(member, type) and attrs.has(member):
            classes.append(member)
        elif member not in _SCALARS and typing.get_origin(member) is not typing.Literal:
            raise TypeError(f"{where}: {member!r} cannot be one of several values in a union; "
                            "a union mixes str, int, float, bool, Literal[...] and attrs "
                            "classes, or is T | None")
    if len(classes) > 1:
        union_tag(tuple(classes), where)
    return tuple(classes)


def union_tag(classes: tuple[type, ...],
              where: str) -> tuple[str | None, dict[type, str | None]]:
    """How a JSON object is told to be which of ``classes``: a Literal field every class has,
    required, with values of its own (the tag's wire name), else each class's first required
    field no other class has, one class at most having none (the object that has no other's
    field is that one). A TypeError naming the classes when neither holds."""
    fields = {c: {wire_name(f): f for f in attrs.fields(c) if f.init} for c in classes}
    tag = _literal_tag(classes, fields)
    if tag is not None:
        return tag, {}
    unique: dict[type, str | None] = {}
    for cls in classes:
        others = set().union(*(fields[o].keys() for o in classes if o is not cls))
        own = [n for n, f in fields[cls].items() if f.default is attrs.NOTHING and n not in others]
        unique[cls] = own[0] if own else None
    if sum(field is None for field in unique.values()) > 1:
        names = ", ".join(c.__qualname__ for c in classes)
        vague = ", ".join(c.__qualname__ for c, field in unique.items() if field is None)
        raise TypeError(
            f"{where}: the union of {names} cannot tell {vague} apart: give each class a "
            "required field no other has (one class may do without), or each a required "
            "Literal field of the same name with its own values")
    return None, unique


def _literal_tag(classes: tuple[type, ...],
                 fields: Mapping[type, Mapping[str, attrs.Attribute[Any]]]) -> str | None:
    common = set.intersection(*(set(fields[c]) for c in classes))
    for name in sorted(common):
        values: list[Any] = []
        for cls in classes:
            field = fields[cls][name]
            hint = strip_annotated(field_hints(cls, cls.__qualname__)[field.name])
            if typing.get_origin(hint) is not typing.Literal or field.default is not attrs.NOTHING:
                break
            values.extend(typing.get_args(hint))
        else:
            if len(values) == len(set(values)):
                return name
    return None


def _target(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a marker constrains: an optional's value, not the ``anyOf`` around it."""
    branches = schema.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        inner: dict[str, Any] = branches[0] if branches[1] == {"type": "null"} else branches[1]
        return _target(inner)
    return schema


def _kinds(schema: Mapping[str, Any]) -> set[str]:
    if "enum" in schema or "const" in schema or "anyOf" in schema:
        return set()  # a choice of values: a length or a bound has nothing to add
    declared = schema.get("type")
    return set(declared if isinstance(declared, list) else [declared]) - {"null"}


def _admits_a_value(schema: Mapping[str, Any], where: str) -> None:
    """A TypeError when markers that are each sound admit nothing together (each alone is
    checked when made): a schema no argument can match makes a tool no call reaches."""
    for kind in ("Length", "Items"):
        low, high = schema.get(f"min{kind}"), schema.get(f"max{kind}")
        if low is not None and high is not None and low > high:
            raise TypeError(f"{where}: MinLen({low}) and MaxLen({high}) admit no value: the "
                            "minimum is above the maximum")
    if _kinds(schema) == {"integer"}:
        lows = [math.ceil(schema["minimum"])] if "minimum" in schema else []
        lows += [math.floor(schema["exclusiveMinimum"]) + 1] if "exclusiveMinimum" in schema else []
        highs = [math.floor(schema["maximum"])] if "maximum" in schema else []
        highs += [math.ceil(schema["exclusiveMaximum"]) - 1] if "exclusiveMaximum" in schema else []
        if lows and highs and max(lows) > min(highs):
            raise TypeError(f"{where}: its Range admits no integer; widen it, or annotate float")
    elif _kinds(schema) == {"number"}:
        # Each Range was checked when made, but two of them each set a bound of their own
        # (``Range(minimum=5)`` with ``Range(maximum=1)``): only together do they admit nothing.
        why = _no_number_between(schema.get("minimum"), schema.get("maximum"),
                                 schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum"))
        if why is not None:
            raise TypeError(f"{where}: its Range markers admit no number: {why}; widen them")


def _apply(schema: dict[str, Any], marker: Any, where: str) -> None:
    if isinstance(marker, Doc):
        schema["description"] = marker.text
        return
    target = _target(schema)
    kinds = _kinds(target)
    if isinstance(marker, MinLen | MaxLen):
        suffix = "Length" if kinds == {"string"} else "Items" if kinds == {"array"} else None
        if suffix is not None:
            target[("min" if isinstance(marker, MinLen) else "max") + suffix] = marker.value
            return
        wanted = "a str or a list"
    elif isinstance(marker, Range):
        if kinds and kinds <= {"integer", "number"}:
            for keyword, bound in (("minimum", marker.minimum), ("maximum", marker.maximum),
                                   ("exclusiveMinimum", marker.exclusive_minimum),
                                   ("exclusiveMaximum", marker.exclusive_maximum)):
                if bound is not None:
                    target[keyword] = bound
            return
        wanted = "an int or a float"
    elif isinstance(marker, Pattern):
        if kinds == {"string"}:
            target["pattern"] = marker.regex
            return
        wanted = "a str"
    else:
        raise TypeError(f"{where}: {marker!r} is not a constraint toolhost knows; use MinLen, "
                        "MaxLen, Range, Pattern or Doc")
    raise TypeError(f"{where}: {type(marker).__name__} applies to {wanted} (or one of them "
                    "| None), not to this parameter's type")
