"""Tools from typed functions (``toolhost.tool``) and bodies by reference (plugin API 1.5).

The decorator derives a closed input schema from the signature, the description from the
docstring and the output from the return annotation; the safety fields are required keywords.
What it makes is an ordinary ``Tool``: registration and the conformance suite see nothing else.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import textwrap
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import attr
import attrs
import pytest

from toolhost import (
    Doc,
    Domain,
    Idempotency,
    Kind,
    MaxLen,
    MinLen,
    Pattern,
    Range,
    Reason,
    Risk,
    SchemaRule,
    Services,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
    hookimpl,
    tool,
)
from toolhost.testing import (
    Harness,
    contributions_of,
    load_plugins,
    registration_problems,
)
from toolhost_conformance import ConformanceSuite

#: The safety fields of a read-only tool: every test tool states them, as a plugin must.
SAFE: dict[str, Any] = {
    "side_effect": SideEffect.NONE, "risk": Risk.LOW, "idempotency": Idempotency.READ_ONLY,
    "output_trust": Trust.INTERNAL_TOOL, "required_scopes": (), "timeout_s": 2,
    "maximum_output_bytes": 4096, "reasons": (),
}

TOO_MANY = "tool.invalid_arguments.too_many"
MESSAGES = {TOO_MANY: "Too many items. Give at most three."}


class Unit(enum.Enum):
    METRE = "m"
    FOOT = "ft"


@attrs.frozen
class Window:
    start: Annotated[int, Range(0)]
    length: Annotated[int, Range(1, 100)] = 10


@attrs.frozen
class Query:
    text: Annotated[str, MinLen(1), MaxLen(64), Doc("What to look for")]
    window: Window
    tags: tuple[Annotated[str, Pattern(r"^[a-z]+$")], ...] = ()


@attrs.frozen
class Found:
    query: str
    count: int
    note: str | None

    def __str__(self) -> str:
        return f"{self.count} for {self.query}"


@attrs.frozen
class Plain:
    value: float


def _spec_of(function: Any, **overrides: Any) -> ToolSpec:
    made: Tool = tool("typed.probe", "1.0.0", **{**SAFE, **overrides})(function)
    return made.spec


def _objects(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every object schema in a schema, at any depth."""
    if isinstance(schema, Mapping):
        if schema.get("type") == "object":
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _objects(value)


# ---------------------------------------------------------------------------- schemas


def scalars(s: str, i: int, f: float, b: bool) -> str:
    """Scalars."""
    return s


def test_scalars_map_to_their_json_types_and_are_required() -> None:
    assert _spec_of(scalars).input_schema == {
        "type": "object",
        "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
                       "f": {"type": "number"}, "b": {"type": "boolean"}},
        "required": ["s", "i", "f", "b"],
        "additionalProperties": False,
    }


def choices(mode: Literal["fast", "exact"], unit: Unit, level: Literal[1, 2, 3],
            always: Literal[True]) -> str:
    """Choices."""
    return mode


def test_literal_and_enum_are_enums_and_one_value_is_a_const() -> None:
    assert _spec_of(choices).input_schema["properties"] == {
        "mode": {"type": "string", "enum": ["fast", "exact"]},
        "unit": {"type": "string", "enum": ["m", "ft"]},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "always": {"const": True},
    }


def constrained(
    name: Annotated[str, MinLen(1), MaxLen(8), Pattern(r"^[a-z]+$"), Doc("A short name")],
    ratio: Annotated[float, Range(0, 1)],
    step: Annotated[int, Range(exclusive_minimum=0, exclusive_maximum=10)],
    ids: Annotated[list[Annotated[str, MaxLen(32)]], MinLen(1), MaxLen(8)],
) -> str:
    """Constraints."""
    return name


def test_annotated_constraints_become_schema_keywords() -> None:
    assert _spec_of(constrained).input_schema["properties"] == {
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$",
                 "description": "A short name"},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "step": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        "ids": {"type": "array", "items": {"type": "string", "maxLength": 32},
                "minItems": 1, "maxItems": 8},
    }


def optional(note: str | None, window: Window | None = None, limit: int = 5,
             words: tuple[str, ...] = ("a", "b")) -> str:
    """Optional."""
    return ""


def test_optional_values_admit_null_and_defaults_are_in_the_schema_not_required() -> None:
    schema = _spec_of(optional).input_schema
    assert schema["required"] == ["note"]
    properties = schema["properties"]
    assert properties["note"] == {"type": ["string", "null"]}
    assert properties["window"]["anyOf"][1] == {"type": "null"}
    assert properties["window"]["default"] is None
    assert properties["limit"] == {"type": "integer", "default": 5}
    assert properties["words"] == {"type": "array", "items": {"type": "string"},
                                   "default": ["a", "b"]}


def nested(query: Query) -> Found:
    """Nested."""
    return Found(query.text, 0, None)


def test_attrs_classes_are_closed_objects_at_every_level() -> None:
    spec = _spec_of(nested)
    query = spec.input_schema["properties"]["query"]
    assert query["required"] == ["text", "window"]
    assert query["properties"]["tags"] == {
        "type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "default": []}
    assert query["properties"]["window"] == {
        "type": "object",
        "properties": {"start": {"type": "integer", "minimum": 0},
                       "length": {"type": "integer", "minimum": 1, "maximum": 100,
                                  "default": 10}},
        "required": ["start"],
        "additionalProperties": False,
    }
    # A result's fields are always present: every one is required, none has a default.
    assert spec.output_schema == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "count": {"type": "integer"},
                       "note": {"type": ["string", "null"]}},
        "required": ["query", "count", "note"],
        "additionalProperties": False,
    }
    objects = [*_objects(spec.input_schema), *_objects(spec.output_schema)]
    assert len(objects) == 4
    assert all(o["additionalProperties"] is False for o in objects)


def documented() -> str:
    """First line of the description,
    joined with its continuation.

    A second paragraph.
    """
    return ""


def test_the_description_is_the_docstring_with_its_paragraphs_joined() -> None:
    assert _spec_of(documented).description == (
        "First line of the description, joined with its continuation.\n\nA second paragraph.")
    assert _spec_of(documented, description="Given.").description == "Given."


def test_the_first_party_defaults_and_allow_parallel_following_idempotency() -> None:
    spec = _spec_of(scalars)
    assert (spec.kind, spec.source, spec.target_kind, spec.server_id, spec.deprecated) == (
        Kind.CAPABILITY, Source.BUILTIN, TargetKind.IN_PROCESS, None, False)
    assert spec.allow_parallel is True
    writer = _spec_of(scalars, side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.MEDIUM,
                      idempotency=Idempotency.IDEMPOTENT)
    assert writer.allow_parallel is False
    assert _spec_of(scalars, allow_parallel=False).allow_parallel is False


def test_a_hand_written_builtin_spec_is_the_one_the_decorator_makes() -> None:
    # ToolSpec.builtin holds the in-process defaults once, for the decorator and for the specs
    # written by hand (email, math, media, people, workspace, artifact 2.0.0).
    made = _spec_of(scalars)
    written = ToolSpec.builtin(
        "typed.probe", "1.0.0", description=made.description,
        input_schema=made.input_schema, output_schema=made.output_schema,
        side_effect=SideEffect.NONE, risk=Risk.LOW, idempotency=Idempotency.READ_ONLY,
        output_trust=Trust.INTERNAL_TOOL, required_scopes=(), timeout_s=2,
        maximum_output_bytes=4096)
    assert written == made
    writer = attrs.evolve(written, idempotency=Idempotency.NON_IDEMPOTENT)
    assert not ToolSpec.builtin(**_builtin_fields(writer)).allow_parallel
    assert ToolSpec.builtin(**_builtin_fields(writer), deprecated=True).deprecated is True


def _builtin_fields(spec: ToolSpec) -> dict[str, Any]:
    fixed = {"kind", "source", "target_kind", "server_id", "allow_parallel", "deprecated"}
    return {k: v for k, v in attrs.asdict(spec, recurse=False).items() if k not in fixed}


def test_a_builtin_spec_defaults_no_safety_field() -> None:
    fields = _builtin_fields(_spec_of(scalars))
    for field in ("side_effect", "risk", "idempotency", "output_trust", "required_scopes",
                  "timeout_s", "maximum_output_bytes"):
        given = {k: v for k, v in fields.items() if k != field}
        with pytest.raises(TypeError, match=f"required keyword-only argument: '{field}'"):
            ToolSpec.builtin(**given)


def test_the_decorator_still_takes_another_source() -> None:
    spec = _spec_of(scalars, source=Source.MCP, server_id="alpha")
    assert (spec.source, spec.server_id, spec.kind) == (Source.MCP, "alpha", Kind.CAPABILITY)


def test_a_text_result_is_an_object_with_its_text() -> None:
    assert _spec_of(scalars).output_schema == {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
        "additionalProperties": False}


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("field", sorted(SAFE))
def test_every_safety_field_is_a_required_keyword(field: str) -> None:
    given = {k: v for k, v in SAFE.items() if k != field}
    with pytest.raises(TypeError, match=f"missing 1 required keyword-only argument: '{field}'"):
        tool("typed.probe", "1.0.0", **given)


def test_a_tool_with_no_safety_fields_names_them_all() -> None:
    with pytest.raises(TypeError) as raised:
        tool("typed.probe", "1.0.0")  # type: ignore[call-arg]
    assert all(f"'{field}'" in str(raised.value) for field in SAFE)


def test_a_scope_given_as_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="scopes are a tuple of names"):
        tool("typed.probe", "1.0.0", **{**SAFE, "required_scopes": "demo.write"})


def untyped(x) -> str:  # type: ignore[no-untyped-def]
    """Untyped."""
    return ""


def a_set(x: set[str]) -> str:
    """A set has no order, so no schema here."""
    return ""


def no_doc(x: str) -> str:
    return x


def returns_output(x: str) -> ToolOutput:
    """Returns a ToolOutput."""
    return ToolOutput(structured={}, content=x)


def varargs(*x: str) -> str:
    """Varargs."""
    return ""


def bad_default(x: Plain = Plain(1.0)) -> str:  # the refusal under test
    """A default that is not JSON."""
    return ""


@pytest.mark.parametrize(("function", "words"), [
    (untyped, "parameter 'x' has no annotation"),
    (a_set, "a_set(x): set[str] has no schema here"),
    (no_doc, "a tool needs a description"),
    (returns_output, "pass output_schema="),
    (varargs, "parameter 'x' must be an ordinary named one"),
    (bad_default, "is not JSON data"),
])
def test_what_has_no_schema_is_a_type_error_naming_it(function: Any, words: str) -> None:
    with pytest.raises(TypeError, match=re.escape(words)):
        _spec_of(function)


def test_output_schema_is_only_for_a_body_that_returns_tool_output() -> None:
    with pytest.raises(TypeError, match="output_schema= is for a body that returns ToolOutput"):
        _spec_of(scalars, output_schema={"type": "object"})
    schema = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    assert _spec_of(returns_output, output_schema=schema).output_schema == schema


def test_an_unknown_marker_is_a_type_error() -> None:
    def marked(x: Annotated[str, "a bare string"]) -> str:
        """Marked."""
        return x

    with pytest.raises(TypeError, match="is not a constraint toolhost knows"):
        _spec_of(marked)


def test_a_bad_pattern_fails_at_decoration() -> None:
    with pytest.raises(re.error):
        Pattern("(")


# ---------------------------------------------------------------------------- calls

#: What the bodies below saw, for the assertions.
SEEN: dict[str, Any] = {}


@tool("typed.search", "1.0.0", **{**SAFE, "reasons": Reason.from_table(MESSAGES, TOO_MANY)})
def search(query: Query, context: ToolExecutionContext, limit: int = 3) -> Found:
    """Search for a query: the structured arguments reach the body as attrs instances."""
    SEEN.update(query=query, context=context, limit=limit)
    if len(query.tags) > 3:
        raise ToolFailure(TOO_MANY)
    return Found(query.text, len(query.tags), None)


@tool("typed.halve", "1.0.0", **SAFE)
async def halve(value: float) -> Plain:
    """Halve a number, asynchronously: the content is the result's JSON."""
    return Plain(value / 2)


@tool("typed.clock", "1.0.0", **SAFE)
def clock(services: Services) -> str:
    """The host's clock, read through the services the tool was built with."""
    return services.clock.now().isoformat()


@tool("typed.raw", "1.0.0", **SAFE, output_schema={
    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
    "additionalProperties": False})
def raw(n: int) -> ToolOutput:
    """Return a ToolOutput as it is."""
    return ToolOutput(structured={"n": n}, content=f"n={n}")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("typed", "Typed tools under test.")]


@hookimpl
def toolhost_tools() -> list[Tool]:
    return [search, halve, clock, raw]


#: This module is the plugin: its two hooks above are all it registers.
PLUGINS = {"toolhost-typed": sys.modules[__name__]}


@pytest.fixture
def harness() -> Iterator[Harness]:
    with Harness.over(PLUGINS) as made:
        yield made


def test_a_decorated_tool_is_an_ordinary_tool() -> None:
    assert isinstance(search, Tool) and isinstance(search.spec, ToolSpec)
    assert search.reason_codes == (TOO_MANY,)
    assert (search.build, clock.call) == (None, None)  # Services: built, like a build= factory
    problems = registration_problems(contributions_of(load_plugins(plugins=PLUGINS)))
    assert problems == []


def test_the_arguments_arrive_structured_with_the_context(harness: Harness) -> None:
    outcome = harness.invoke("typed.search", query={"text": "ada", "window": {"start": 2},
                                                    "tags": ["x", "y"]})
    assert outcome.ok, outcome.content
    assert SEEN["query"] == Query("ada", Window(2, 10), ("x", "y"))
    assert isinstance(SEEN["context"], ToolExecutionContext)
    assert SEEN["limit"] == 3  # the schema's default, applied at step 4
    assert (outcome.structured, outcome.content) == (
        {"query": "ada", "count": 2, "note": None}, "2 for ada")


def test_a_declared_reason_fails_with_its_message(harness: Harness) -> None:
    outcome = harness.invoke("typed.search", query={"text": "a", "window": {"start": 0},
                                                    "tags": ["a", "b", "c", "d"]})
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.content) == (TOO_MANY, MESSAGES[TOO_MANY])


def test_the_schema_refuses_before_the_body(harness: Harness) -> None:
    SEEN.clear()
    outcome = harness.invoke("typed.search", query={"text": "a", "window": {"start": 0},
                                                    "extra": 1})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert SEEN == {}


def test_an_async_body_and_a_result_without_its_own_text(harness: Harness) -> None:
    outcome = harness.invoke("typed.halve", value=3)
    assert (outcome.structured, outcome.content) == ({"value": 1.5}, json.dumps({"value": 1.5}))


def test_a_services_parameter_gets_the_hosts_services(harness: Harness) -> None:
    outcome = harness.invoke("typed.clock")
    assert outcome.content == harness.host.clock.now().isoformat()


def test_a_tool_output_passes_as_it_is(harness: Harness) -> None:
    outcome = harness.invoke("typed.raw", n=4)
    assert (outcome.structured, outcome.content) == ({"n": 4}, "n=4")


class TestConformance(ConformanceSuite):
    """The suite every plugin runs, on the decorated tools above."""

    plugins = PLUGINS


# ---------------------------------------------------------------------------- references

BODY = '''
from toolhost import ToolOutput

def echo(arguments, context):
    return ToolOutput(structured={"text": arguments["text"]}, content=arguments["text"])

def build(services):
    return echo
'''

ECHO_SPEC = attrs.evolve(
    _spec_of(scalars), name="lazy.echo", description="Echo.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                  "required": ["text"], "additionalProperties": False})


@pytest.fixture
def body_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable module nothing has imported yet."""
    name = f"lazy_body_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(BODY))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _lazy_plugin(made: Tool) -> dict[str, object]:
    return {"toolhost-lazy": types.SimpleNamespace(
        toolhost_domains=hookimpl(lambda: [Domain("lazy", "Lazy bodies.")]),
        toolhost_tools=hookimpl(lambda: [made]))}


@pytest.mark.parametrize("how", ["call", "build"])
def test_a_reference_is_imported_at_the_first_call(body_module: str, how: str) -> None:
    reference = f"{body_module}:{'echo' if how == 'call' else 'build'}"
    made = Tool(ECHO_SPEC, call=reference) if how == "call" else Tool(ECHO_SPEC, build=reference)
    assert getattr(made, how) == reference  # a reference compares equal to its text
    with Harness.over(_lazy_plugin(made)) as harness:
        assert body_module not in sys.modules  # registered, and nothing of the body loaded
        outcome = harness.invoke("lazy.echo", text="hi")
        assert (outcome.ok, outcome.content) == (True, "hi")
        assert body_module in sys.modules
        # The host runs the function itself, not a proxy: an async body stays async.
        assert harness.tool("lazy.echo") is sys.modules[body_module].echo


def test_a_malformed_reference_is_refused_when_the_tool_is_made() -> None:
    with pytest.raises(ValueError, match=re.escape("'toolhost_math.tool' is not a reference")):
        Tool(ECHO_SPEC, call="toolhost_math.tool")


def test_a_reference_to_no_module_is_refused_when_the_tool_is_made() -> None:
    with pytest.raises(ImportError, match="'no_such_module_here:echo' does not resolve"):
        Tool(ECHO_SPEC, call="no_such_module_here:echo")


def test_a_reference_to_no_attribute_fails_at_the_first_build_naming_it(
    body_module: str,
) -> None:
    made = Tool(ECHO_SPEC, call=f"{body_module}:missing")
    with (Harness.over(_lazy_plugin(made)) as harness,
          pytest.raises(ImportError, match=f"'{body_module}:missing' does not resolve")):
        harness.tool("lazy.echo")


# ---------------------------------------------------------------------------- reasons


def test_reasons_from_a_table_keep_the_codes_order_and_their_rules() -> None:
    table = {"tool.invalid_arguments.a": "A.", "tool.not_found.b": "B."}
    rule = SchemaRule("/a", "maxLength")
    reasons = Reason.from_table(table, "tool.not_found.b", "tool.invalid_arguments.a",
                                schema_rules={"tool.invalid_arguments.a": [rule]})
    assert reasons == (Reason("tool.not_found.b", "B."),
                       Reason("tool.invalid_arguments.a", "A.", schema_rules=(rule,)))


def test_a_code_without_a_message_or_a_rule_for_no_code_is_refused() -> None:
    with pytest.raises(ValueError, match="no message in the table"):
        Reason.from_table({}, "tool.not_found.b")
    with pytest.raises(ValueError, match="schema_rules name codes the table does not have"):
        Reason.from_table({"tool.not_found.b": "B."}, "tool.not_found.b",
                          schema_rules={"tool.not_found.c": []})
    # One map of rules may serve every tool: a code this tool does not take is skipped.
    rule = SchemaRule("/b", "pattern")
    table = {"tool.not_found.b": "B.", "tool.not_found.c": "C."}
    assert Reason.from_table(table, "tool.not_found.c",
                             schema_rules={"tool.not_found.b": [rule]}) == (
        Reason("tool.not_found.c", "C."),)


# ------------------------------------------------------- review findings (issue #28, rev1)
# Classes at module level: a tool's annotations resolve from its module's globals.


@attrs.frozen
class ByName:
    name: str
    exact: bool = False


@attrs.frozen
class ById:
    id: int


@attrs.frozen
class Twin:
    x: int
    y: int = 0


@attrs.frozen
class TwinToo:
    x: int
    z: int = 0


@attrs.frozen
class ByNameInTeam:
    name: str
    team: int


@attrs.frozen
class Circle:
    kind: Literal["circle"]
    size: float


@attrs.frozen
class Square:
    kind: Literal["square"]
    size: float


@attrs.frozen
class Secret:
    _token: str
    count: int = attrs.field(default=0, alias="how_many")


@attrs.frozen
class Counted:
    words: list[str]
    count: int = attrs.field(init=False)

    @count.default
    def _count(self) -> int:
        return len(self.words)


@attrs.frozen
class Positive:
    n: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.frozen
class Node:
    value: int
    children: list[Node]


@attrs.frozen
class Leaf:
    a: int
    b: str = "x"


@attrs.frozen
class Branch:
    leaf: Leaf
    leaves: list[Leaf]


@attrs.frozen
class Ratio:
    ratio: float


@attr.s(frozen=True)
class OldStyle:
    x = attr.ib(type=int)


def _one_tool_harness(*tools: Tool) -> Harness:
    plugin = types.SimpleNamespace(
        toolhost_domains=hookimpl(lambda: [Domain("typed", "Typed tools under test.")]),
        toolhost_tools=hookimpl(lambda: list(tools)))
    return Harness.over({"toolhost-typed-review": plugin})


def _made(function: Any, name: str = "typed.probe", **overrides: Any) -> Tool:
    made: Tool = tool(name, "1.0.0", **{**SAFE, **overrides})(function)
    return made


def test_unions_of_scalars_and_of_attrs_classes_are_structured() -> None:
    def either(x: int | str, y: int | float, target: ByName | ById) -> str:
        """Either."""
        return repr((x, y, target))

    with _one_tool_harness(_made(either)) as harness:
        outcome = harness.invoke("typed.probe", x="s", y=1.5, target={"id": 7})
        assert outcome.content == repr(("s", 1.5, ById(7))), outcome.content
        outcome = harness.invoke("typed.probe", x=3, y=2, target={"name": "ada", "exact": True})
        assert outcome.content == repr((3, 2, ByName("ada", exact=True))), outcome.content


def test_a_union_told_apart_by_a_literal_tag_is_structured_by_it() -> None:
    def shape(s: Circle | Square, n: Literal[1, 2] | str = "x", m: Literal[1, 2] = 1) -> str:
        """Shape."""
        return repr((s, n, m))

    with _one_tool_harness(_made(shape)) as harness:
        outcome = harness.invoke("typed.probe", s={"kind": "square", "size": 2}, n=2.0, m=2.0)
        assert outcome.content == repr((Square("square", 2.0), 2, 2)), outcome.content


def test_an_attrs_union_cattrs_cannot_tell_apart_is_a_type_error() -> None:
    def ambiguous(v: Twin | TwinToo) -> str:
        """Ambiguous."""
        return ""

    with pytest.raises(TypeError, match=r"ambiguous\(v\).*Twin.*TwinToo.*tell"):
        _made(ambiguous)


def test_one_class_of_a_union_may_be_the_one_without_a_field_of_its_own() -> None:
    def lookup(target: ByName | ByNameInTeam) -> str:
        """Look up."""
        return repr(target)

    with _one_tool_harness(_made(lookup)) as harness:
        outcome = harness.invoke("typed.probe", target={"name": "ada", "team": 3})
        assert outcome.content == repr(ByNameInTeam("ada", 3)), outcome.content
        outcome = harness.invoke("typed.probe", target={"name": "ada"})
        assert outcome.content == repr(ByName("ada")), outcome.content


def test_no_default_inside_a_union_branch() -> None:
    def lookup(target: ByName | ById, maybe: ByName | None = None) -> str:
        """Look up."""
        return repr(target)

    schema = _made(lookup).spec.input_schema
    assert "default" not in json.dumps(schema["properties"]["target"])
    assert "default" not in json.dumps(schema["properties"]["maybe"]["anyOf"])
    assert schema["properties"]["maybe"]["default"] is None
    with _one_tool_harness(_made(lookup)) as harness:
        outcome = harness.invoke("typed.probe", target={"name": "ada", "id": 3})
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.invalid_arguments.schema"


def test_private_and_aliased_fields_use_the_alias_both_ways() -> None:
    def take(v: Secret) -> Secret:
        """Take."""
        return v

    made = _made(take)
    assert made.spec.input_schema["properties"]["v"]["properties"].keys() == {"token", "how_many"}
    assert made.spec.output_schema["required"] == ["token", "how_many"]
    with _one_tool_harness(made) as harness:
        outcome = harness.invoke("typed.probe", v={"token": "t", "how_many": 2})
        assert outcome.structured == {"token": "t", "how_many": 2}, outcome.content


def test_an_init_false_field_is_output_but_never_input() -> None:
    def count(c: Counted) -> Counted:
        """Count."""
        return Counted([*c.words, "z"])

    made = _made(count)
    assert made.spec.input_schema["properties"]["c"]["properties"].keys() == {"words"}
    assert made.spec.output_schema["required"] == ["words", "count"]
    with _one_tool_harness(made) as harness:
        outcome = harness.invoke("typed.probe", c={"words": ["a"]})
        assert outcome.structured == {"words": ["a", "z"], "count": 2}, outcome.content


def test_an_integral_float_reaches_an_int_parameter_as_an_int() -> None:
    def repeat(text: str, times: int, window: Window, maybe: int | None = None) -> str:
        """Repeat."""
        return repr((text * times, type(window.start).__name__, type(maybe).__name__))

    def half(x: float) -> str:
        """Half."""
        return str(x / 2)

    with _one_tool_harness(_made(repeat), _made(half, "typed.half")) as harness:
        outcome = harness.invoke("typed.probe", text="ab", times=2.0,
                                 window={"start": 1.0}, maybe=3.0)
        assert outcome.content == repr(("abab", "int", "int")), outcome.content
        outcome = harness.invoke("typed.half", x=10**400)
        assert outcome.failure is not None
        assert outcome.failure.reason_code.startswith("tool.invalid_arguments."), outcome.failure


@pytest.mark.parametrize(("hint", "words"), [
    (Annotated[int, MaxLen(3)], "MaxLen"),
    (Annotated[str, Range(1, 5)], "Range"),
    (Annotated[bool, Range(1, 5)], "Range"),
    (Annotated[int, Pattern("^1$")], "Pattern"),
    (Annotated[Literal["aa", "bbbb"], MaxLen(2)], "MaxLen"),
    (Annotated[int | str, Range(1, 5)], "Range"),
])
def test_a_marker_on_a_type_it_does_not_fit_is_a_type_error(hint: Any, words: str) -> None:
    def bad(x: int) -> str:
        """Bad."""
        return ""

    bad.__annotations__ = {"x": hint, "return": str}
    with pytest.raises(TypeError, match=rf"bad\(x\).*{words}"):
        _made(bad)


def test_a_marker_on_an_optional_applies_to_its_value() -> None:
    def fine(xs: Annotated[list[str] | None, MaxLen(2)] = None,
             n: Annotated[int | None, Range(1, 5)] = None) -> str:
        """Fine."""
        return ""

    properties = _made(fine).spec.input_schema["properties"]
    assert properties["xs"] == {"anyOf": [{"type": "array", "items": {"type": "string"},
                                           "maxItems": 2}, {"type": "null"}], "default": None}
    assert properties["n"] == {"type": ["integer", "null"], "minimum": 1, "maximum": 5,
                               "default": None}


@pytest.mark.parametrize("make", [lambda: MaxLen(-1), lambda: MaxLen(2.5), lambda: MinLen(True),
                                  lambda: Range(5, 1), lambda: Range("1")])
def test_a_marker_with_a_bad_value_is_refused_when_made(make: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        make()


def test_a_default_that_its_own_schema_refuses_is_a_type_error() -> None:
    def none_for_float(x: float = 0.0) -> str:
        """Bad."""
        return ""

    none_for_float.__defaults__ = (None,)  # ``x: float = None``, as a plugin may write it

    def out_of_range(n: Annotated[int, Range(1, 5)] = 10) -> str:
        """Bad."""
        return ""

    for function in (none_for_float, out_of_range):
        with pytest.raises(TypeError, match=rf"{function.__name__}\((x|n)\).*default"):
            _made(function)


def test_a_recursive_attrs_class_is_a_type_error_naming_it() -> None:
    def tree(root: Node) -> str:
        """Tree."""
        return ""

    with pytest.raises(TypeError, match=r"Node.*recursive"):
        _made(tree)


def test_a_value_an_attrs_validator_refuses_is_invalid_arguments() -> None:
    def take(p: Positive) -> str:
        """Take."""
        return ""

    with _one_tool_harness(_made(take)) as harness:
        outcome = harness.invoke("typed.probe", p={"n": -1})
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.invalid_arguments.value_refused"
        assert "-1" not in outcome.content and "Positive" not in outcome.content
        assert "must be > 0" in json.dumps(dict(outcome.failure.detail))


@pytest.mark.parametrize("scopes", [{"a.read", "b.read"}, iter(["a.read"]),
                                    frozenset({"a.read"})])
def test_scopes_given_as_a_set_or_an_iterator_are_refused(scopes: Any) -> None:
    with pytest.raises(TypeError, match="scopes"):
        tool("typed.probe", "1.0.0", **{**SAFE, "required_scopes": scopes})
    with pytest.raises(TypeError, match="scopes"):
        tool("typed.probe", "1.0.0", **{**SAFE, "checked_scopes": scopes})


def test_a_tool_made_by_hand_refuses_checked_scopes_as_a_set() -> None:
    with pytest.raises(TypeError, match="set"):
        Tool(_made(scalars).spec, call=scalars, checked_scopes={"a.read", "b.read"})


def test_a_reference_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValueError, match="not a reference"):
        Tool(_made(scalars).spec, call="json:dumps\n")


def test_from_table_refuses_no_codes_a_list_and_one_shot_rules() -> None:
    with pytest.raises(ValueError, match="codes"):
        Reason.from_table(MESSAGES)
    with pytest.raises(TypeError, match="codes"):
        Reason.from_table(MESSAGES, [TOO_MANY])  # type: ignore[arg-type]
    rules = {TOO_MANY: (r for r in [SchemaRule("/text", "maxLength")])}
    with pytest.raises(TypeError, match="schema_rules"):
        Reason.from_table(MESSAGES, TOO_MANY, schema_rules=rules)


def test_reasons_given_as_a_generator_serve_every_use_of_the_decorator() -> None:
    decorate = tool("typed.probe", "1.0.0", **{
        **SAFE, "reasons": (r for r in Reason.from_table(MESSAGES, TOO_MANY))})
    assert decorate(scalars).reason_codes == decorate(scalars).reason_codes == (TOO_MANY,)


def test_a_nested_result_requires_every_field_at_every_level() -> None:
    def grow() -> Branch:
        """Grow."""
        return Branch(Leaf(1), [])

    schema = _made(grow).spec.output_schema
    for level in _objects(schema):
        assert level["required"] == list(level["properties"])
        assert all("default" not in p for p in level["properties"].values())


def test_a_result_with_nan_is_an_output_failure_not_invalid_json() -> None:
    def nan() -> Ratio:
        """NaN."""
        return Ratio(float("nan"))

    with _one_tool_harness(_made(nan)) as harness:
        outcome = harness.invoke("typed.probe")
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.output_invalid.schema"


def test_old_style_attrs_and_classes_made_in_a_function() -> None:
    def old(v: OldStyle) -> str:
        """Old."""
        return repr(v)

    assert _made(old).spec.input_schema["properties"]["v"]["properties"] == {
        "x": {"type": "integer"}}

    @attrs.frozen
    class Local:
        a: int

    def local(v: Local) -> str:
        """Local."""
        return ""

    local.__annotations__ = {"v": "Local", "return": "str"}
    with pytest.raises(TypeError, match="module level"):
        _made(local)


def test_the_decorated_function_stays_reachable() -> None:
    assert search.function is not None
    assert search.function.__name__ == "search"
    assert halve.function is not None
