"""The seven ordered refusals (docs/plugin-api.md), plus the reasons check (Step.MESSAGE_TABLE,
D2)."""

from __future__ import annotations

import time
from typing import Any

import attrs
import pytest
from conftest import CLOSED_IN, CLOSED_OUT, echo_build, make_plugin, make_spec, make_tool

from toolhost import (
    Idempotency,
    Reason,
    SchemaRule,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolSpec,
    Trust,
    UserWords,
    hookimpl,
)
from toolhost._composition import Host
from toolhost._model.host_reasons import MESSAGES
from toolhost._model.settings import Settings
from toolhost._registration.discovery import (
    Contribution,
    PluginError,
    PluginSource,
    collect_contributions,
    make_plugin_manager,
)
from toolhost._registration.refusals import (
    HARD_OUTPUT_CEILING,
    RegistrationRefused,
    Step,
    register,
    registration_problems,
)
from toolhost._registration.schema import schema_problems


def refusal(plugins: dict[str, object]) -> RegistrationRefused:
    with pytest.raises(RegistrationRefused) as info:
        Host.from_plugins(plugins)
    return info.value


def one(**spec_changes: Any) -> dict[str, object]:
    return {"fx-dist": make_plugin(tools=[make_tool(make_spec(**spec_changes))])}


def contributions(plugins: dict[str, object]) -> list[Contribution]:
    sources = [PluginSource(dist, dist, plugin) for dist, plugin in plugins.items()]
    return collect_contributions(make_plugin_manager(sources), Settings())


def test_a_valid_plugin_registers_without_building_anything() -> None:
    def build(services: object) -> object:
        raise AssertionError("registration must construct nothing")

    host = Host.from_plugins({"fx-dist": make_plugin(tools=[make_tool(build=build)])})
    assert [r.spec.identity for r in host.registry] == ["fx.echo@1.0.0"]


@pytest.mark.parametrize(
    "name",
    ["Fx.echo", "fx", "fx.", ".echo", "fx.echo.more", "fx-x.echo", "fx.Echo", "1x.echo", "fx.e cho",
     # The pattern's $ also matched before a final newline (the gateway's review).
     "fx.echo\n"],
)
def test_step_1_name_grammar(name: str) -> None:
    exc = refusal(one(name=name))
    assert exc.step is Step.NAME_GRAMMAR
    assert "step 1 (name grammar)" in str(exc)


def test_step_1_name_length_limit() -> None:
    name = "fx." + "a" * 93
    assert len(name) == 96
    Host.from_plugins(one(name=name))
    exc = refusal(one(name=name + "a"))
    assert exc.step is Step.NAME_GRAMMAR and "97 characters, over 96" in str(exc)


@pytest.mark.parametrize("version", ["1.0", "01.0.0", "1.0.0-rc1", "v1.0.0", "", "1.0.0\n"])
def test_step_1_version_grammar(version: str) -> None:
    assert refusal(one(version=version)).step is Step.NAME_GRAMMAR


@pytest.mark.parametrize("domain", ["mcp", "device"])
def test_step_2_reserved_domain_tool(domain: str) -> None:
    plugin = make_plugin(domains=[domain], tools=[make_tool(make_spec(name=f"{domain}.x"))])
    exc = refusal({"evil-dist": plugin})
    assert exc.step is Step.RESERVED_DOMAINS
    message = str(exc)
    assert "step 2 (reserved domains)" in message
    assert "evil-dist" in message and "To fix:" in message


def test_step_2_reserved_domain_declared_without_tools() -> None:
    exc = refusal({"evil-dist": make_plugin(domains=["mcp"])})
    assert exc.step is Step.RESERVED_DOMAINS and "domain mcp" in str(exc)


def test_step_3_tool_outside_declared_domains() -> None:
    exc = refusal({"fx-dist": make_plugin(domains=["other"], tools=[make_tool()])})
    assert exc.step is Step.DOMAIN_MEMBERSHIP
    assert "fx.echo@1.0.0" in str(exc) and "fx-dist" in str(exc)


def test_step_3_tool_in_another_plugins_domain() -> None:
    exc = refusal({"a-dist": make_plugin(domains=["fx"]),
                   "b-dist": make_plugin(domains=["gx"], tools=[make_tool()])})
    assert exc.step is Step.DOMAIN_MEMBERSHIP and "owned by a-dist" in str(exc)


def test_step_3_domain_owned_by_two_plugins() -> None:
    exc = refusal({"a-dist": make_plugin(domains=["fx"]), "b-dist": make_plugin(domains=["fx"])})
    assert exc.step is Step.DOMAIN_MEMBERSHIP
    assert "already owned by distribution a-dist" in str(exc) and "b-dist" in str(exc)


def test_step_4_duplicate_name_and_version() -> None:
    exc = refusal({"fx-dist": make_plugin(tools=[make_tool(), make_tool()])})
    assert exc.step is Step.UNIQUENESS and "fx.echo@1.0.0 is already registered" in str(exc)


def test_step_4_two_versions_are_two_registrations() -> None:
    host = Host.from_plugins(
        {"fx-dist": make_plugin(tools=[make_tool(), make_tool(make_spec(version="1.1.0"))])}
    )
    assert host.registry.versions("fx.echo") == ["1.0.0", "1.1.0"]


OPEN_NESTED = {
    "type": "object",
    "properties": {"inner": {"type": "object", "properties": {"a": {"type": "string"}}}},
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("which", "schema", "fragment"),
    [
        ("input_schema", {**CLOSED_IN, "additionalProperties": True}, "additionalProperties"),
        ("input_schema", OPEN_NESTED, "/properties/inner"),
        ("output_schema", {"type": "object", "properties": {}}, "additionalProperties"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {"$ref": "https://e.x/s.json"}}},
         "remote $ref"),
        ("input_schema", {"type": "string"}, "top level"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {"type": "bogus"}}}, "does not compile"),
        ("input_schema", {**CLOSED_IN, "$schema": "http://json-schema.org/draft-03/schema#"},
         "unsupported dialect"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {
            "type": "array", "items": {"type": "string"}, "prefixItems": []}}}, "prefixItems"),
        ("output_schema", {**CLOSED_OUT, "properties": {"e": {"type": "array", "items": {
            "type": "object", "properties": {}}}}}, "/items"),
        # Not JSON: fastjsonschema wrote the bound as the name ``nan``, and every call raised
        # NameError out of the pipeline, with no row (D401).
        ("input_schema", {**CLOSED_IN, "properties": {"x": {
            "type": "number", "maximum": float("nan")}}},
         "/properties/x/maximum: is not JSON: it holds NaN"),
        ("output_schema", {**CLOSED_OUT, "properties": {"x": {
            "type": "number", "minimum": float("-inf")}}},
         "/properties/x/minimum: is not JSON: it holds NaN"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {
            "type": "integer", "default": 10**5000}}},
         "/properties/x/default: is not JSON: it holds NaN"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {
            "type": "string", "enum": ["a", b"b"]}}},
         "/properties/x/enum/1: is not JSON: it holds NaN"),
        # Text with no UTF-8 form (a default read from os.environ): every command died with
        # UnicodeEncodeError from the validator cache's key, not this refusal.
        ("input_schema", {**CLOSED_IN, "properties": {"x": {
            "type": "string", "default": "/srv/caf\udce9"}}},
         "/properties/x/default: is not JSON: it holds NaN"),
        ("output_schema", {**CLOSED_OUT, "properties": {"x": {
            "type": "string", "description": "caf\udce9"}}},
         "/properties/x/description: is not JSON"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {
            "type": "string", "enum": ["a", "\ud800"]}}},
         "/properties/x/enum/1: is not JSON"),
        ("input_schema", {**CLOSED_IN, "properties": {"x": {"type": "object", "properties": {
            "k\udce9": {"type": "string"}}, "additionalProperties": False}}},
         "/properties/x/properties: is not JSON"),
    ],
)
def test_step_5_schema_validity(which: str, schema: dict[str, Any], fragment: str) -> None:
    exc = refusal(one(**{which: schema}))
    assert exc.step is Step.SCHEMA_VALIDITY
    assert which in str(exc) and fragment in str(exc)


def test_step_5_a_value_json_cannot_carry_is_pointed_at_with_its_own_remedy() -> None:
    # Before: pointed at "/", with the remedy for open objects and remote $refs.
    exc = refusal(one(input_schema={**CLOSED_IN, "properties": {"x": {
        "type": "array", "items": {"type": "number", "maximum": float("inf")}}}}))
    assert "input_schema: /properties/x/items/maximum: is not JSON" in str(exc)
    assert "To fix: write the value at the pointer shown as JSON can carry it" in str(exc)
    assert "additionalProperties" not in str(exc)


def test_step_5_local_ref_and_2020_12_dialect_are_accepted() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/short"}},
        "$defs": {"short": {"type": "string", "maxLength": 8}},
        "additionalProperties": False,
    }
    Host.from_plugins(one(input_schema=schema))


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": [],
            "additionalProperties": False, **extra}


STRING = {"type": "string", "maxLength": 8}
#: Open subschemas and keywords step 5 refuses (each admits values or members the schema never
#: names), with the pointer and the words of the refusal.
OPEN_SCHEMAS = {
    "empty property schema": (closed({"a": {}}), "/properties/a: accepts any value"),
    "description-only property": (closed({"a": {"description": "Anything."}}),
                                  "/properties/a: accepts any value"),
    "array without items": (closed({"a": {"type": "array", "maxItems": 4}}),
                            "/properties/a: an array schema must say what its items are"),
    "items {}": (closed({"a": {"type": "array", "items": {}}}),
                 "/properties/a/items: accepts any value"),
    "patternProperties": (closed({"a": {"type": "object", "properties": {},
                                        "patternProperties": {"^b": STRING},
                                        "additionalProperties": False}}),
                          "/properties/a/patternProperties: patternProperties admits any name"),
    "dependencies": (closed({"a": STRING, "b": STRING}, dependencies={"a": ["b"]}),
                     "/dependencies: dependencies adds rules only when"),
    "dependentSchemas": (closed({"a": STRING, "b": STRING},
                                dependentSchemas={"a": {"required": ["b"]}}),
                         "/dependentSchemas: dependentSchemas adds rules only when"),
    "tuple items": (closed({"a": {"type": "array", "items": [STRING, STRING]}}),
                    "/properties/a/items: tuple (array-form) items"),
}
#: What each of them should have said: the same intent, closed.
CLOSED_EQUIVALENTS = {
    "empty property schema": closed({"a": STRING}),
    "description-only property": closed({"a": {"description": "Anything.", **STRING}}),
    "array without items": closed({"a": {"type": "array", "maxItems": 4, "items": STRING}}),
    "items {}": closed({"a": {"type": "array", "items": {"enum": ["x", "y"]}}}),
    "patternProperties": closed({"a": closed({"b": STRING})}),
    "dependencies": closed({"a": STRING, "b": STRING}),
    "dependentSchemas": closed({"a": STRING, "b": STRING}),
    "tuple items": closed({"a": {"type": "array", "items": STRING, "maxItems": 2}}),
}


@pytest.mark.parametrize("which", ["input_schema", "output_schema"])
@pytest.mark.parametrize("case", sorted(OPEN_SCHEMAS))
def test_step_5_refuses_open_subschemas(case: str, which: str) -> None:
    schema, fragment = OPEN_SCHEMAS[case]
    exc = refusal(one(**{which: schema}))
    assert exc.step is Step.SCHEMA_VALIDITY
    assert f"fx.echo@1.0.0 from distribution fx-dist: {which}: {fragment}" in str(exc)


@pytest.mark.parametrize("which", ["input_schema", "output_schema"])
@pytest.mark.parametrize("case", sorted(CLOSED_EQUIVALENTS))
def test_step_5_accepts_the_closed_equivalents(case: str, which: str) -> None:
    assert registration_problems(contributions(one(**{which: CLOSED_EQUIVALENTS[case]}))) == []


def ref_chain(links: int, end: Any, names: int = 1) -> dict[str, Any]:
    """``names`` properties each naming the first of ``links`` $defs, each naming the next,
    the last being ``end``."""
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(links)}
    defs[f"d{links}"] = end
    return closed({f"p{j}": {"$ref": "#/$defs/d0"} for j in range(names)}, **{"$defs": defs})


def test_step_5_follows_a_ref_chain_longer_than_the_stack() -> None:
    # Followed by recursion, 3,000 links raised RecursionError out of registration.
    assert list(schema_problems(ref_chain(3000, STRING))) == []
    assert [p.pointer for p in schema_problems(ref_chain(3000, {}))][:2] == [
        "/properties/p0", "/$defs/d0"]


def test_step_5_follows_each_ref_once() -> None:
    # A 63 KB upstream schema, a 440-link chain named by 1,500 properties, took 17 s: the chain
    # was followed again from each name. A loose bound: it takes milliseconds now.
    began = time.monotonic()
    assert list(schema_problems(ref_chain(440, STRING, names=1500))) == []
    assert time.monotonic() - began < 5.0


def test_step_5_a_ref_cycle_constrains_when_a_target_on_it_has_a_union() -> None:
    union = {"$ref": "#/$defs/d2", "anyOf": [STRING, {"type": "integer"}]}
    schema = closed({"p": {"$ref": "#/$defs/d0"}}, **{"$defs": {
        "d0": {"$ref": "#/$defs/d1"}, "d1": union, "d2": {"$ref": "#/$defs/d0"}}})
    assert not any(p.pointer == "/properties/p" for p in schema_problems(schema))
    open_cycle = closed({"p": {"$ref": "#/$defs/d0"}}, **{"$defs": {
        "d0": {"$ref": "#/$defs/d1"}, "d1": {"$ref": "#/$defs/d0"}}})
    assert "/properties/p" in [p.pointer for p in schema_problems(open_cycle)]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"risk": "LOW"}, "risk is 'LOW', not a Risk member"),
        ({"side_effect": "NONE"}, "side_effect"),
        ({"idempotency": None}, "idempotency"),
        ({"output_trust": None}, "output_trust"),
        ({"maximum_output_bytes": HARD_OUTPUT_CEILING}, "ceiling"),
        ({"maximum_output_bytes": 0}, "maximum_output_bytes"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"required_scopes": ["a"]}, "required_scopes"),
        ({"allow_parallel": "yes"}, "allow_parallel"),
        ({"server_id": "srv"}, "server_id"),
        ({"description": " "}, "description"),
    ],
)
def test_step_6_field_completeness(change: dict[str, Any], fragment: str) -> None:
    exc = refusal(one(**change))
    assert exc.step is Step.FIELD_COMPLETENESS and fragment in str(exc)


SPEC_FIELDS = [f.name for f in attrs.fields(ToolSpec)]
#: Fields an earlier step reads (step 1 the name grammar, step 5 the schemas): left out, they
#: are still step 6's to name, never a bad-value refusal of the earlier step.
READ_EARLIER = {"name", "version", "input_schema", "output_schema"}


def without(field: str) -> ToolSpec:
    fields = attrs.asdict(make_spec(), recurse=False)
    del fields[field]
    return ToolSpec(**fields)


@pytest.mark.parametrize("field", SPEC_FIELDS)
def test_step_6_refuses_a_spec_built_without_a_field(field: str) -> None:
    spec = without(field)  # no TypeError: the constructor leaves the field MISSING
    exc = refusal({"fx-dist": make_plugin(tools=[make_tool(spec)])})
    assert exc.step is Step.FIELD_COMPLETENESS
    line = str(exc)
    assert "\n" not in line
    assert line.startswith(f"registration refused at step 6 (field completeness): "
                           f"{spec.identity} from distribution fx-dist: ToolSpec field {field} "
                           f"is missing. To fix: set {field}")


@pytest.mark.parametrize("field", sorted(READ_EARLIER))
def test_a_field_an_earlier_step_reads_is_refused_only_at_step_6(field: str) -> None:
    problems = registration_problems(contributions(
        {"fx-dist": make_plugin(tools=[make_tool(without(field))])}))
    assert [(p.step, p.problem) for p in problems] == [
        (Step.FIELD_COMPLETENESS, f"ToolSpec field {field} is missing")]


@pytest.mark.parametrize(
    "idempotency",
    [Idempotency.NON_IDEMPOTENT, Idempotency.IDEMPOTENT, Idempotency.CONDITIONALLY_IDEMPOTENT],
)
def test_step_6_refuses_allow_parallel_on_a_tool_that_is_not_read_only(
    idempotency: Idempotency,
) -> None:
    exc = refusal(one(idempotency=idempotency, allow_parallel=True))
    assert str(exc) == (
        "registration refused at step 6 (field completeness): fx.echo@1.0.0 from distribution "
        f"fx-dist: allow_parallel is True but idempotency is {idempotency.value}. To fix: set "
        "allow_parallel=False: only READ_ONLY tools may run in parallel"
    )
    Host.from_plugins(one(idempotency=idempotency, allow_parallel=False))
    Host.from_plugins(one(idempotency=Idempotency.READ_ONLY, allow_parallel=True))


def _body(arguments: Any, context: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("runner", "fragment"),
    [({}, "the Tool has neither call= nor build="),
     ({"call": _body, "build": echo_build}, "the Tool has both call= and build=")],
)
def test_step_6_refuses_a_tool_without_exactly_one_of_call_and_build(
    runner: dict[str, Any], fragment: str,
) -> None:
    tool = Tool(make_spec(), **runner)
    exc = refusal({"fx-dist": make_plugin(tools=[tool])})
    assert exc.step is Step.FIELD_COMPLETENESS
    assert f"fx.echo@1.0.0 from distribution fx-dist: {fragment}" in str(exc)
    assert "exactly one" in exc.remedy


@pytest.mark.parametrize(
    ("words", "fragment"),
    [(UserWords("Remember this.", arguments=()), "user_words names no argument"),
     (UserWords("Remember this.", arguments=("missing",)),
      "user_words names 'missing', which is not a string property of the input schema"),
     (UserWords("Remember {x}.", arguments=("x",)),
      "the user_words prompt is empty or has a placeholder"),
     ("feedback", "user_words is not a UserWords")],
)
def test_step_6_refuses_user_words_that_name_no_string_argument(words: Any,
                                                                fragment: str) -> None:
    tool = attrs.evolve(make_tool(), user_words=words)
    exc = refusal({"fx-dist": make_plugin(tools=[tool])})
    assert exc.step is Step.FIELD_COMPLETENESS
    assert f"fx.echo@1.0.0 from distribution fx-dist: {fragment}" in str(exc)


def test_user_words_on_a_string_argument_register() -> None:
    tool = attrs.evolve(make_tool(), user_words=UserWords("Say it.", arguments=("x",)))
    registered, _ = register(collect_contributions(
        make_plugin_manager([PluginSource("fx-dist", "fx", make_plugin(tools=[tool]))]),
        Settings()))
    assert registered[0].tool.user_words == UserWords("Say it.", ("x",))


def test_a_tool_given_only_call_runs_that_body() -> None:
    def body(arguments: Any, context: Any) -> Any:
        return echo_build(None)(arguments, context)

    host = Host.from_plugins({"fx-dist": make_plugin(tools=[make_tool(call=body)])})
    assert host.invoke_sync("fx.echo", {"x": "hi"}).content == "hi"


@pytest.mark.parametrize(
    "change",
    [
        {"target_kind": TargetKind.SANDBOX},
        {"target_kind": TargetKind.DEVICE},
        {"source": Source.MCP, "server_id": "srv"},
        {"source": Source.DEVICE},
    ],
)
def test_step_7_forced_trust(change: dict[str, Any]) -> None:
    exc = refusal(one(output_trust=Trust.INTERNAL_TOOL, **change))
    assert exc.step is Step.FORCED_TRUST and "EXTERNAL_UNTRUSTED" in str(exc)
    Host.from_plugins(one(output_trust=Trust.EXTERNAL_UNTRUSTED, **change))


def test_steps_run_in_order_over_every_registration() -> None:
    # The second tool fails step 2; the first fails step 5. Step 2 runs over both first.
    bad_schema = make_tool(make_spec(name="fx.a", input_schema={"type": "object"}))
    reserved = make_tool(make_spec(name="mcp.b"))
    exc = refusal({"fx-dist": make_plugin(domains=["fx", "mcp"], tools=[bad_schema, reserved])})
    assert exc.step is Step.RESERVED_DOMAINS


def test_registration_problems_lists_every_problem_in_step_order() -> None:
    # Registry order: the step-6 problem's tool first, the step-5 problem's tool second.
    parallel_writer = make_tool(make_spec(name="fx.a", idempotency=Idempotency.NON_IDEMPOTENT))
    open_schema = make_tool(make_spec(name="fx.b", input_schema=closed({"a": {}})))
    plugins = {"fx-dist": make_plugin(tools=[parallel_writer, open_schema])}
    problems = registration_problems(contributions(plugins))
    assert [(p.step, p.tool) for p in problems] == [
        (Step.SCHEMA_VALIDITY, "fx.b@1.0.0"), (Step.FIELD_COMPLETENESS, "fx.a@1.0.0")]
    assert all(p.distribution == "fx-dist" and p.remedy for p in problems)
    with pytest.raises(RegistrationRefused) as info:
        register(contributions(plugins))
    exc = info.value
    assert exc.problems == tuple(problems)
    assert str(exc) == str(problems[0])
    assert (exc.step, exc.tool, exc.distribution, exc.problem, exc.remedy) == (
        problems[0].step, problems[0].tool, problems[0].distribution, problems[0].problem,
        problems[0].remedy)
    clean = {"fx-dist": make_plugin(tools=[make_tool()])}
    assert registration_problems(contributions(clean)) == []


def test_refusal_names_step_tool_distribution_and_remedy() -> None:
    exc = refusal(one(side_effect="NONE"))
    assert str(exc) == (
        "registration refused at step 6 (field completeness): fx.echo@1.0.0 from distribution "
        "fx-dist: side_effect is 'NONE', not a SideEffect member. To fix: set side_effect to a "
        "SideEffect member, e.g. SideEffect.NONE"
    )
    assert (exc.tool, exc.distribution) == ("fx.echo@1.0.0", "fx-dist")
    assert SideEffect.NONE  # the remedy names a real member


# ---------------------------------------------------------------- the reasons check


def with_reasons(*reasons: Reason, name: str = "fx.echo") -> Tool:
    return make_tool(make_spec(name=name), reasons=reasons)


@pytest.mark.parametrize(
    "message",
    ["Bad {x}.", "Bad %s.", "Bad %(x)s.", "Bad ${x}.", "Bad $x.", "Bad %d items.", ""],
)
def test_reasons_check_refuses_interpolation(message: str) -> None:
    plugin = make_plugin(tools=[with_reasons(Reason("tool.invalid_arguments.bad", message))])
    exc = refusal({"fx-dist": plugin})
    assert exc.step is Step.MESSAGE_TABLE and "static" in str(exc)
    assert str(exc).startswith("registration refused at reasons check")


@pytest.mark.parametrize("code", sorted(MESSAGES))
def test_reasons_check_refuses_a_host_code_re_declared(code: str) -> None:
    exc = refusal({"fx-dist": make_plugin(tools=[with_reasons(Reason(code, "Mine."))])})
    assert exc.step is Step.MESSAGE_TABLE
    assert f"reason code {code} is the host's own" in str(exc) and "fx-dist" in str(exc)


@pytest.mark.parametrize("code", ["invalid_arguments.x", "tool.bogus_kind.x", "tool.not_found."])
def test_reasons_check_refuses_malformed_codes(code: str) -> None:
    exc = refusal({"fx-dist": make_plugin(tools=[with_reasons(Reason(code, "Fine."))])})
    assert exc.step is Step.MESSAGE_TABLE and "malformed" in str(exc)


def test_reasons_check_refuses_two_tools_declaring_one_code_with_different_messages() -> None:
    code = "tool.not_found.thing"
    exc = refusal({"a-dist": make_plugin(domains=["a"], tools=[
                       with_reasons(Reason(code, "One."), name="a.one")]),
                   "b-dist": make_plugin(domains=["b"], tools=[
                       with_reasons(Reason(code, "Two."), name="b.two")])})
    assert exc.step is Step.MESSAGE_TABLE
    assert "b.two@1.0.0 from distribution b-dist" in str(exc) and "(from a-dist)" in str(exc)
    # One code, one message: two tools declaring the same text is one entry of the table.
    host = Host.from_plugins({"fx-dist": make_plugin(tools=[
        with_reasons(Reason(code, "One."), name="fx.one"),
        with_reasons(Reason(code, "One."), name="fx.two")])})
    assert host.pipeline.messages[code] == "One."


def test_reasons_check_refuses_a_code_declared_twice_on_one_tool() -> None:
    code = "tool.not_found.thing"
    exc = refusal({"fx-dist": make_plugin(tools=[with_reasons(Reason(code, "One."),
                                                              Reason(code, "One."))])})
    assert exc.step is Step.MESSAGE_TABLE and "declared twice" in str(exc)


@pytest.mark.parametrize(
    "rule",
    [SchemaRule("/nope", "maxLength"),  # no such property
     SchemaRule("/x", "minLength"),  # the property has no such keyword
     SchemaRule("x", "maxLength")],  # not a JSON pointer
)
def test_reasons_check_refuses_a_schema_rule_the_input_schema_lacks(rule: SchemaRule) -> None:
    reason = Reason("tool.invalid_arguments.too_long", "Too long.", schema_rules=(rule,))
    exc = refusal({"fx-dist": make_plugin(tools=[with_reasons(reason)])})
    assert exc.step is Step.MESSAGE_TABLE
    assert f"maps schema rule {rule!r}, which the input schema does not have" in str(exc)


def test_a_schema_rule_the_input_schema_has_maps_that_failure_to_its_reason() -> None:
    assert CLOSED_IN["properties"]["x"]["maxLength"] == 8
    reason = Reason("tool.invalid_arguments.too_long", "Too long.",
                    schema_rules=(SchemaRule("/x", "maxLength"),))
    host = Host.from_plugins({"fx-dist": make_plugin(tools=[with_reasons(reason)])})
    outcome = host.invoke_sync("fx.echo", {"x": "123456789"})
    assert outcome.failure and outcome.failure.reason_code == "tool.invalid_arguments.too_long"
    assert outcome.content == "Too long."
    other = host.invoke_sync("fx.echo", {"x": 1})  # another rule: the host's schema failure
    assert other.failure and other.failure.reason_code == "tool.invalid_arguments.schema"


def test_a_plugin_still_implementing_toolhost_messages_is_told_what_replaced_it() -> None:
    plugin = make_plugin(tools=[make_tool()])

    @hookimpl
    def toolhost_messages() -> dict[str, str]:
        return {"tool.not_found.thing": "No such thing."}

    plugin.toolhost_messages = toolhost_messages  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as info:
        Host.from_plugins({"fx-dist": plugin})
    assert str(info.value) == (
        "plugin fx-dist: toolhost_messages was removed in plugin API 1.0; declare each reason "
        "once on its tool: Tool(..., reasons=(Reason(code, message), ...)) (leave it out with "
        "TOOLHOST_PLUGINS, or fix and reinstall it)"
    )


def test_register_is_pure_over_contributions() -> None:
    sources = [PluginSource("fx-dist", "fx", make_plugin(tools=[make_tool()]))]
    contributions = collect_contributions(make_plugin_manager(sources), Settings())
    first, table = register(contributions)
    second, table2 = register(contributions)
    assert [r.spec for r in first] == [r.spec for r in second] and table == table2
    assert first[0].validate_output({"echo": "a"}) == {"echo": "a"}
    assert CLOSED_OUT["additionalProperties"] is False


@pytest.mark.parametrize(
    "properties",
    [
        {"x": {"$ref": "#/$defs/s", "default": "a"}},
        {"x": {"$ref": "#/$defs/s"}},
    ],
)
def test_step_5_refuses_defaults_that_would_never_be_applied(properties: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": properties, "additionalProperties": False,
              "$defs": {"s": {"type": "string", "default": "b"}
                        if "default" not in properties["x"] else {"type": "string"}}}
    exc = refusal(one(input_schema=schema))
    assert exc.step is Step.SCHEMA_VALIDITY and "never applied" in str(exc)


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf"])
def test_step_5_refuses_a_default_inside_a_union_branch(keyword: str) -> None:
    # fastjsonschema fills a branch's default in even when that branch fails: the arguments
    # would change though another branch is the one that matched.
    branch = {"type": "object", "properties": {"name": {"type": "string"},
                                               "exact": {"type": "boolean", "default": False}},
              "required": ["name"], "additionalProperties": False}
    other = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
             "additionalProperties": False}
    schema = {"type": "object", "properties": {"target": {keyword: [branch, other]}},
              "required": ["target"], "additionalProperties": False}
    exc = refusal(one(input_schema=schema))
    assert exc.step is Step.SCHEMA_VALIDITY
    assert f"/properties/target/{keyword}/0/properties/exact" in str(exc)
    assert "a default inside anyOf or oneOf is filled in even when its branch fails" in str(exc)
