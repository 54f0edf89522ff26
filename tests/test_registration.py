"""The seven ordered refusals (DESIGN §3), plus the message table check."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import CLOSED_IN, CLOSED_OUT, make_plugin, make_spec, make_tool

from toolhost import SideEffect, Source, TargetKind, Trust
from toolhost._host import Host
from toolhost._plugins import PluginSource, collect_contributions, make_plugin_manager
from toolhost._registration import HARD_OUTPUT_CEILING, RegistrationRefused, Step, register
from toolhost._settings import Settings


def refusal(plugins: dict[str, object]) -> RegistrationRefused:
    with pytest.raises(RegistrationRefused) as info:
        Host.from_plugins(plugins)
    return info.value


def one(**spec_changes: Any) -> dict[str, object]:
    return {"fx-dist": make_plugin(tools=[make_tool(make_spec(**spec_changes))])}


def test_a_valid_plugin_registers_without_building_anything() -> None:
    def build(services: object) -> object:
        raise AssertionError("registration must construct nothing")

    host = Host.from_plugins({"fx-dist": make_plugin(tools=[make_tool(build=build)])})
    assert [r.spec.identity for r in host.registry] == ["fx.echo@1.0.0"]


@pytest.mark.parametrize(
    "name",
    ["Fx.echo", "fx", "fx.", ".echo", "fx.echo.more", "fx-x.echo", "fx.Echo", "1x.echo", "fx.e cho"],
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


@pytest.mark.parametrize("version", ["1.0", "01.0.0", "1.0.0-rc1", "v1.0.0", ""])
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
        ("input_schema", {**CLOSED_IN, "properties": {"x": {"prefixItems": []}}}, "prefixItems"),
        ("output_schema", {**CLOSED_OUT, "properties": {"e": {"type": "array", "items": {
            "type": "object", "properties": {}}}}}, "/items"),
    ],
)
def test_step_5_schema_validity(which: str, schema: dict[str, Any], fragment: str) -> None:
    exc = refusal(one(**{which: schema}))
    assert exc.step is Step.SCHEMA_VALIDITY
    assert which in str(exc) and fragment in str(exc)


def test_step_5_local_ref_and_2020_12_dialect_are_accepted() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/short"}},
        "$defs": {"short": {"type": "string", "maxLength": 8}},
        "additionalProperties": False,
    }
    Host.from_plugins(one(input_schema=schema))


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


def test_refusal_names_step_tool_distribution_and_remedy() -> None:
    exc = refusal(one(side_effect="NONE"))
    assert str(exc) == (
        "registration refused at step 6 (field completeness): fx.echo@1.0.0 from distribution "
        "fx-dist: side_effect is 'NONE', not a SideEffect member. To fix: set side_effect to a "
        "SideEffect member, e.g. SideEffect.NONE"
    )
    assert (exc.tool, exc.distribution) == ("fx.echo@1.0.0", "fx-dist")
    assert SideEffect.NONE  # the remedy names a real member


@pytest.mark.parametrize(
    "message",
    ["Bad {x}.", "Bad %s.", "Bad %(x)s.", "Bad ${x}.", "Bad $x.", "Bad %d items.", ""],
)
def test_message_table_refuses_interpolation(message: str) -> None:
    code = "tool.invalid_arguments.bad"
    plugin = make_plugin(tools=[make_tool(reason_codes=(code,))], messages={code: message})
    exc = refusal({"fx-dist": plugin})
    assert exc.step is Step.MESSAGE_TABLE and "static" in str(exc)


def test_message_table_needs_a_message_for_every_declared_code() -> None:
    plugin = make_plugin(tools=[make_tool(reason_codes=("tool.not_found.thing",))])
    exc = refusal({"fx-dist": plugin})
    assert exc.step is Step.MESSAGE_TABLE and "tool.not_found.thing" in str(exc)


@pytest.mark.parametrize("code", ["invalid_arguments.x", "tool.bogus_kind.x", "tool.not_found."])
def test_message_table_refuses_malformed_codes(code: str) -> None:
    exc = refusal({"fx-dist": make_plugin(messages={code: "Fine."})})
    assert exc.step is Step.MESSAGE_TABLE and "malformed" in str(exc)


def test_message_table_refuses_a_code_owned_twice_with_different_text() -> None:
    code = "tool.not_found.thing"
    exc = refusal({"a-dist": make_plugin(domains=["a"], messages={code: "One."}),
                   "b-dist": make_plugin(domains=["b"], messages={code: "Two."})})
    assert exc.step is Step.MESSAGE_TABLE and "a-dist" in str(exc)


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
