"""JSON Schema → hypothesis strategy, for the subset tool schemas use.

The property run generates a tool's arguments from its ``input_schema``. Tool schemas are
closed, small and local (registration step 5), so a small generator covers them:

- ``object``: ``properties``, ``required`` (optional properties are sometimes left out, so a
  ``default`` gets applied by the host), ``additionalProperties: false``;
- ``string``: ``minLength``, ``maxLength``, ``pattern``, ``enum``, ``const``, and the formats
  ``date``, ``date-time``, ``email``, ``ipv4``, ``ipv6``, ``uuid``;
- ``integer`` / ``number``: ``minimum``, ``maximum``, ``exclusiveMinimum``,
  ``exclusiveMaximum``, ``multipleOf``;
- ``boolean``, ``null``, a list of types;
- ``array``: ``items``, ``minItems``, ``maxItems``, ``uniqueItems``;
- ``enum``, ``const``, ``anyOf`` / ``oneOf`` / ``allOf`` (approximately; see below), and
  local ``$ref`` (``#/$defs/...``, ``#/definitions/...``, any local JSON pointer, recursion).

Every strategy is biased towards edge values — the bounds, one past them inwards, the empty
and the longest string, ``0``, ``-1``, NUL, astral characters — because that is where tools
break. A keyword outside the subset raises :class:`UnsupportedSchema` rather than being
ignored, so a property run never silently tests less than it claims.

``allOf`` and the sibling keywords of ``anyOf``/``oneOf`` are merged shallowly, which can
over-generate (``oneOf`` exclusivity, two ``multipleOf``): callers filter with the compiled
validator (the property run does), so an approximation costs examples, never a false failure.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
from hypothesis import strategies as st

__all__ = ["ANNOTATIONS", "SUPPORTED_KEYWORDS", "UnsupportedSchema", "from_schema"]

#: Keywords that never constrain a value: they are read (``default``) or ignored.
ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "title",
        "description", "examples", "default", "deprecated", "readOnly", "writeOnly",
        "contentMediaType", "contentEncoding",
    }
)

#: Keywords the generator models.
SUPPORTED_KEYWORDS = frozenset(
    {
        "type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf",
        "properties", "required", "additionalProperties",
        "minLength", "maxLength", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "items", "minItems", "maxItems", "uniqueItems",
    }
)

#: Longest string or list drawn at random when the schema sets no maximum.
UNBOUNDED_SIZE = 64
#: Longest string built as an exact-``maxLength`` edge value (a 1 MiB limit is still tried).
EDGE_LENGTH_CAP = 1 << 20
#: Longest list built as an exact-``maxItems`` edge value.
EDGE_ITEMS_CAP = 64

_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
_EDGE_TEXT = ("", " ", "\x00", "\n", "\t", "a", "0", "-1", "é", "\u202e", "😀", "\ufeff", "\\")
_FORMATS: dict[str, st.SearchStrategy[str]] = {
    "date": st.dates().map(_dt.date.isoformat),
    "date-time": st.datetimes(timezones=st.just(_dt.UTC)).map(
        lambda d: d.replace(microsecond=0).isoformat()
    ),
    "email": st.emails(),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "uuid": st.uuids().map(str),
}


class UnsupportedSchema(ValueError):  # noqa: N818  (named like the host's SchemaProblem)
    """A schema uses a keyword or form the generator does not model.

    :param pointer: JSON pointer to the schema that uses it (``""`` is the root).
    :param problem: what is not supported.
    """

    def __init__(self, pointer: str, problem: str) -> None:
        super().__init__(f"{pointer or '/'}: {problem}")
        self.pointer = pointer
        self.problem = problem


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


class _Builder:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        # One deferred strategy per $ref target: recursion terminates, and a $defs entry
        # used twice is built once.
        self.refs: dict[str, st.SearchStrategy[Any]] = {}

    # ------------------------------------------------------------------ dispatch

    def build(self, schema: Any, pointer: str) -> st.SearchStrategy[Any]:
        if schema is True:
            return _any_json()
        if schema is False:
            raise UnsupportedSchema(pointer, "the schema `false` accepts no value")
        if not isinstance(schema, Mapping):
            raise UnsupportedSchema(pointer, "a schema must be an object or a boolean")
        unknown = sorted(set(schema) - SUPPORTED_KEYWORDS - ANNOTATIONS)
        if unknown:
            raise UnsupportedSchema(pointer, f"keyword {unknown[0]!r} is not supported")
        if "$ref" in schema:
            if len(set(schema) - ANNOTATIONS) > 1:
                raise UnsupportedSchema(pointer, "$ref beside other keywords is not supported")
            return self.ref(schema["$ref"], pointer)
        if "allOf" in schema:
            return self.build(self._merge_all(schema, pointer), pointer)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k != key}
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    raise UnsupportedSchema(f"{pointer}/{key}", "must be a non-empty list")
                return st.one_of(
                    [
                        self.build(
                            _merge(rest, self._deref(b, f"{pointer}/{key}/{i}")),
                            f"{pointer}/{key}/{i}",
                        )
                        for i, b in enumerate(branches)
                    ]
                )
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise UnsupportedSchema(f"{pointer}/enum", "must be a non-empty list")
            return st.sampled_from(values)
        declared = schema.get("type")
        types = declared if isinstance(declared, list) else [declared] if declared else []
        if not types:
            types = _implied_types(schema)
        for t in types:
            if t not in _TYPES:
                raise UnsupportedSchema(f"{pointer}/type", f"unknown type {t!r}")
        if not types:
            return _any_json()
        return st.one_of([self._typed(t, schema, pointer) for t in types])

    def _typed(self, kind: str, schema: Mapping[str, Any], pointer: str) -> st.SearchStrategy[Any]:
        handler: Callable[[Mapping[str, Any], str], st.SearchStrategy[Any]] = {
            "object": self.object,
            "array": self.array,
            "string": _string,
            "integer": _integer,
            "number": _number,
            "boolean": lambda _s, _p: st.booleans(),
            "null": lambda _s, _p: st.none(),
        }[kind]
        return handler(schema, pointer)

    # ------------------------------------------------------------------ $ref and allOf

    def _target(self, ref: Any, pointer: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchema(f"{pointer}/$ref", "only a local $ref (#/...) is supported")
        node: Any = self.root
        for token in (t for t in ref[1:].split("/") if t):
            key = _unescape(token)
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise UnsupportedSchema(f"{pointer}/$ref", f"{ref!r} does not resolve")
        return node

    def ref(self, ref: Any, pointer: str) -> st.SearchStrategy[Any]:
        target = self._target(ref, pointer)
        if ref not in self.refs:
            # Registered before it is built, so a recursive $ref finds the deferred.
            built: list[st.SearchStrategy[Any]] = []
            self.refs[ref] = st.deferred(lambda: built[0])
            built.append(self.build(target, ref[1:]))
        return self.refs[ref]

    def _deref(self, schema: Any, pointer: str) -> Any:
        seen: set[str] = set()
        while isinstance(schema, Mapping) and "$ref" in schema and len(schema) == 1:
            ref = schema["$ref"]
            if ref in seen:
                raise UnsupportedSchema(pointer, f"{ref!r} refers to itself")
            seen.add(ref)
            schema = self._target(ref, pointer)
        return schema

    def _merge_all(self, schema: Mapping[str, Any], pointer: str) -> dict[str, Any]:
        branches = schema["allOf"]
        if not isinstance(branches, list):
            raise UnsupportedSchema(f"{pointer}/allOf", "must be a list")
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for i, branch in enumerate(branches):
            merged = _merge(merged, self._deref(branch, f"{pointer}/allOf/{i}"))
        return merged

    # ------------------------------------------------------------------ containers

    def object(self, schema: Mapping[str, Any], pointer: str) -> st.SearchStrategy[Any]:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fields = {
            name: self.build(sub, f"{pointer}/properties/{name}")
            for name, sub in properties.items()
        }
        # A required name the schema does not describe accepts any JSON value.
        for name in required - fields.keys():
            fields[name] = _any_json()
        mandatory = {k: v for k, v in fields.items() if k in required}
        optional = {k: v for k, v in fields.items() if k not in required}
        return st.fixed_dictionaries(mandatory, optional=optional)

    def array(self, schema: Mapping[str, Any], pointer: str) -> st.SearchStrategy[Any]:
        items = schema.get("items", True)
        if isinstance(items, list):
            raise UnsupportedSchema(f"{pointer}/items", "array-form items is not supported")
        element = self.build(items, f"{pointer}/items")
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        top = int(high) if high is not None else max(low, 0) + UNBOUNDED_SIZE // 8
        if top < low:
            raise UnsupportedSchema(pointer, "maxItems is below minItems")
        unique: dict[str, Any] = {"unique_by": _json_key} if schema.get("uniqueItems") else {}
        general = st.lists(element, min_size=low, max_size=top, **unique)
        edges = [st.lists(element, min_size=low, max_size=low, **unique)]
        if high is not None and top <= EDGE_ITEMS_CAP:
            edges.append(st.lists(element, min_size=top, max_size=top, **unique))
        return st.one_of(*edges, general)


# ---------------------------------------------------------------------- scalars


def _implied_types(schema: Mapping[str, Any]) -> list[str]:
    keys = set(schema)
    if keys & {"properties", "required", "additionalProperties"}:
        return ["object"]
    if keys & {"items", "minItems", "maxItems", "uniqueItems"}:
        return ["array"]
    if keys & {"minLength", "maxLength", "pattern", "format"}:
        return ["string"]
    if keys & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}:
        return ["number"]
    return []


def _string(schema: Mapping[str, Any], pointer: str) -> st.SearchStrategy[str]:
    low = int(schema.get("minLength", 0))
    high = schema.get("maxLength")
    top = int(high) if high is not None else None
    if top is not None and top < low:
        raise UnsupportedSchema(pointer, "maxLength is below minLength")

    def fits(s: str) -> bool:
        return len(s) >= low and (top is None or len(s) <= top)

    if "format" in schema:
        fmt = schema["format"]
        if fmt not in _FORMATS:
            raise UnsupportedSchema(f"{pointer}/format", f"format {fmt!r} is not supported")
        base = _FORMATS[fmt]
        if "pattern" in schema:
            matches = _matches(schema["pattern"])
            base = base.filter(matches)
        return base.filter(fits)
    if "pattern" in schema:
        try:
            # JSON Schema patterns are unanchored: a match anywhere in the string counts.
            drawn = st.from_regex(schema["pattern"], fullmatch=False)
        except re.error as exc:
            raise UnsupportedSchema(
                f"{pointer}/pattern", f"pattern does not compile: {exc}"
            ) from None
        # Python's `$` also matches before a final newline, ECMA 262's does not: keep what
        # the host's own validator accepts.
        matches = _matches(schema["pattern"])
        return drawn.filter(lambda s: fits(s) and matches(s))
    drawn_top = min(top, low + UNBOUNDED_SIZE) if top is not None else low + UNBOUNDED_SIZE
    general = st.text(min_size=low, max_size=drawn_top)
    edges: list[st.SearchStrategy[str]] = []
    fixed = [s for s in _EDGE_TEXT if fits(s)]
    if fixed:
        edges.append(st.sampled_from(fixed))
    if low > 0:
        edges.append(_exact_length(low))
    if top is not None and top <= EDGE_LENGTH_CAP:
        edges.append(_exact_length(top))
    return st.one_of(*edges, general)


def _matches(pattern: str) -> Callable[[str], bool]:
    validate = fastjsonschema.compile({"type": "string", "pattern": pattern})

    def matches(value: str) -> bool:
        try:
            validate(value)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    return matches


def _exact_length(n: int) -> st.SearchStrategy[str]:
    """A string of exactly ``n`` code points, cheap even for a 1 MiB limit."""
    if n == 0:
        return st.just("")
    return st.text(min_size=1, max_size=8).map(lambda s: (s * (n // len(s) + 1))[:n])


def _bounds(
    schema: Mapping[str, Any], pointer: str
) -> tuple[float | None, float | None, bool, bool]:
    low = schema.get("minimum")
    high = schema.get("maximum")
    exclusive_low = exclusive_high = False
    # Draft 6+ form: exclusiveMinimum is itself the bound. (Draft 4's boolean form is not
    # dialect-neutral, and registration accepts draft-07 and 2020-12 only.)
    if "exclusiveMinimum" in schema:
        value = schema["exclusiveMinimum"]
        if isinstance(value, bool):
            raise UnsupportedSchema(f"{pointer}/exclusiveMinimum", "boolean form is draft 4")
        if low is None or value >= low:
            low, exclusive_low = value, True
    if "exclusiveMaximum" in schema:
        value = schema["exclusiveMaximum"]
        if isinstance(value, bool):
            raise UnsupportedSchema(f"{pointer}/exclusiveMaximum", "boolean form is draft 4")
        if high is None or value <= high:
            high, exclusive_high = value, True
    return low, high, exclusive_low, exclusive_high


def _integer(schema: Mapping[str, Any], pointer: str) -> st.SearchStrategy[int]:
    low, high, exclusive_low, exclusive_high = _bounds(schema, pointer)
    lo = None if low is None else (math.floor(low) + 1 if exclusive_low else math.ceil(low))
    hi = None if high is None else (math.ceil(high) - 1 if exclusive_high else math.floor(high))
    if lo is not None and hi is not None and hi < lo:
        raise UnsupportedSchema(pointer, "no integer lies between the bounds")
    step = schema.get("multipleOf")
    if step is not None:
        if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
            raise UnsupportedSchema(f"{pointer}/multipleOf", "only a positive integer step")
        k_lo = None if lo is None else -((-lo) // step)
        k_hi = None if hi is None else hi // step
        if k_lo is not None and k_hi is not None and k_hi < k_lo:
            raise UnsupportedSchema(pointer, "no multiple lies between the bounds")
        return _integer_range(k_lo, k_hi).map(lambda k: k * step)
    return _integer_range(lo, hi)


def _integer_range(lo: int | None, hi: int | None) -> st.SearchStrategy[int]:
    def inside(v: int) -> bool:
        return (lo is None or v >= lo) and (hi is None or v <= hi)

    candidates = [0, 1, -1, 2**31 - 1, -(2**31), 2**53, -(2**53), 2**63 - 1, -(2**63)]
    for bound in (lo, hi):
        if bound is not None:
            candidates += [bound, bound + 1, bound - 1]
    edges = sorted({v for v in candidates if inside(v)})
    general = st.integers(min_value=lo, max_value=hi)
    return st.one_of(st.sampled_from(edges), general) if edges else general


def _number(schema: Mapping[str, Any], pointer: str) -> st.SearchStrategy[float | int]:
    low, high, exclusive_low, exclusive_high = _bounds(schema, pointer)
    if schema.get("multipleOf") is not None:
        step = schema["multipleOf"]
        if not isinstance(step, (int, float)) or isinstance(step, bool) or step <= 0:
            raise UnsupportedSchema(f"{pointer}/multipleOf", "must be a positive number")
        k_lo = None if low is None else math.ceil(low / step)
        k_hi = None if high is None else math.floor(high / step)
        multiples = _integer_range(k_lo, k_hi).map(lambda k: k * step)
        return multiples.filter(
            lambda v: (low is None or (v > low if exclusive_low else v >= low))
            and (high is None or (v < high if exclusive_high else v <= high))
        )

    def inside(v: float) -> bool:
        return (low is None or (v > low if exclusive_low else v >= low)) and (
            high is None or (v < high if exclusive_high else v <= high)
        )

    floats = st.floats(
        min_value=low,
        max_value=high,
        exclude_min=exclusive_low and low is not None,
        exclude_max=exclusive_high and high is not None,
        allow_nan=False,
        allow_infinity=False,
    )
    candidates: list[float | int] = [0, 0.0, -0.0, 1, -1, 0.1, 0.5, 1e-300, 1e300, -1e300]
    for bound in (low, high):
        if bound is not None:
            candidates += [bound, math.nextafter(bound, math.inf), math.nextafter(bound, -math.inf)]
    edges = [v for v in candidates if inside(v)]
    parts: list[st.SearchStrategy[Any]] = [floats]
    if edges:
        parts.insert(0, st.sampled_from(edges))
    # JSON does not tell 1 from 1.0, and tools receive both: draw integers in range too.
    lo = None if low is None else math.floor(low) + 1 if exclusive_low else math.ceil(low)
    hi = None if high is None else math.ceil(high) - 1 if exclusive_high else math.floor(high)
    if lo is None or hi is None or hi >= lo:
        parts.append(_integer_range(lo, hi))
    return st.one_of(parts)


# ---------------------------------------------------------------------- helpers


def _any_json() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=UNBOUNDED_SIZE)
    )
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4),
        max_leaves=8,
    )


def _json_key(value: Any) -> str:
    # uniqueItems compares JSON values; dicts and lists are unhashable, their JSON is not.
    # (1 and 1.0 are equal in JSON too: json.dumps keeps them apart, which only over-filters.)
    return json.dumps(value, sort_keys=True)


def _merge(base: Mapping[str, Any], extra: Any) -> dict[str, Any]:
    """Shallow conjunction of two schemas: properties merged, required unioned."""
    if not isinstance(extra, Mapping):
        raise UnsupportedSchema("", "a boolean schema inside a combinator is not supported")
    merged = dict(base)
    for key, value in extra.items():
        if key == "properties" and "properties" in merged:
            merged["properties"] = {**merged["properties"], **value}
        elif key == "required" and "required" in merged:
            merged["required"] = sorted({*merged["required"], *value})
        else:
            merged[key] = value
    return merged


def from_schema(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """A strategy for values of this JSON schema, biased towards edge values.

    :param schema: a schema in the subset this module documents; local ``$ref`` resolves
        against it as the root.
    :return: a hypothesis strategy. Values satisfy the schema except where ``allOf`` or the
        siblings of ``anyOf``/``oneOf`` are approximated; filter with the compiled validator.
    :raises UnsupportedSchema: for a keyword or form outside the subset.
    """
    return _Builder(schema).build(schema, "")
