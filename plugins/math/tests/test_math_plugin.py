"""The plugin's contract with the host: hooks, spec, schemas, messages (hard gate 9)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Risk,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    Trust,
)
from toolhost._host import Host
from toolhost.testing import find_ambient_reads, host_for
from toolhost_math import plugin, tool
from toolhost_math.errors import Reason
from toolhost_math.messages import MESSAGES, REASON_CODES

PACKAGE = Path(__file__).resolve().parents[1]

#: The spec's message table, byte for byte.
SPEC_MESSAGES = {
    "tool.invalid_arguments.syntax": "The expression could not be parsed.",
    "tool.invalid_arguments.unknown_name": (
        "Unknown function or constant. Functions: abs, ceil, exp, floor, ln, log10, max, min, "
        "round, sqrt. Constants: pi, e."
    ),
    "tool.invalid_arguments.arity": "Wrong number of arguments for that function.",
    "tool.invalid_arguments.domain": "An argument is outside the function's domain.",
    "tool.invalid_arguments.division_by_zero": "Division by zero.",
    "tool.invalid_arguments.result_out_of_range": (
        "The result is too large or too small to represent."
    ),
    "tool.invalid_arguments.expression_too_long": "The expression is longer than 1024 characters.",
    "tool.invalid_arguments.expression_too_deep": (
        "The expression is nested more than 32 levels deep."
    ),
}


# ------------------------------------------------------------------ hooks


def test_domains() -> None:
    assert plugin.toolhost_domains() == [Domain("math", plugin.DOMAIN.description)]


def test_tools() -> None:
    (registered,) = plugin.toolhost_tools(Settings())
    assert isinstance(registered, Tool)
    assert registered.spec is tool.SPEC
    assert registered.build is tool.build
    assert registered.reason_codes == tuple(SPEC_MESSAGES)


def test_tools_are_unconditional() -> None:
    flags = Settings(env={"AGENT_PEOPLE_ENABLED": "1", "TOOLHOST_PLUGINS": "toolhost-math"})
    assert plugin.toolhost_tools(flags) == plugin.toolhost_tools(Settings())


def test_messages_hook_returns_a_fresh_copy_of_the_table() -> None:
    messages = plugin.toolhost_messages()
    assert messages == SPEC_MESSAGES
    messages.clear()
    assert plugin.toolhost_messages() == SPEC_MESSAGES


def test_hooks_are_consistent() -> None:
    (registered,) = plugin.toolhost_tools(Settings())
    domains = {d.name for d in plugin.toolhost_domains()}
    assert registered.spec.domain in domains
    assert set(registered.reason_codes) == set(plugin.toolhost_messages())


def test_every_hook_is_a_hookimpl() -> None:
    for name in ("toolhost_domains", "toolhost_tools", "toolhost_messages"):
        assert hasattr(getattr(plugin, name), "toolhost_impl"), name


def test_entry_point_and_package() -> None:
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
    assert project["project"]["name"] == "toolhost-math"
    assert project["project"]["entry-points"]["toolhost.plugins"] == {
        "math": "toolhost_math.plugin"
    }
    assert "toolhost" in project["project"]["dependencies"]
    assert (PACKAGE / "src" / "toolhost_math" / "py.typed").exists()


# ------------------------------------------------------------------ messages (hard gate 9)


def test_every_reason_code_has_its_spec_message() -> None:
    assert MESSAGES == SPEC_MESSAGES
    assert tuple(MESSAGES) == REASON_CODES
    assert [code.rsplit(".", 1)[1] for code in REASON_CODES] == [r.value for r in Reason]


@pytest.mark.parametrize("code", REASON_CODES)
def test_messages_are_static(code: str) -> None:
    message = MESSAGES[code]
    assert "{" not in message
    assert "}" not in message
    assert "%" not in message
    assert "$" not in message
    assert "\n" not in message
    assert message == message.strip()
    assert message.endswith(".")


# ------------------------------------------------------------------ the spec


def test_classification_table() -> None:
    spec = tool.SPEC
    assert spec.name == "math.calculate"
    assert spec.version == "1.0.0"
    assert spec.domain == "math"
    assert (spec.side_effect, spec.risk, spec.idempotency) == (
        SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY
    )
    assert spec.output_trust is Trust.INTERNAL_TOOL
    assert spec.required_scopes == ()
    assert spec.timeout_s == 2
    assert spec.maximum_output_bytes == 4096
    assert spec.allow_parallel is True
    assert (spec.kind, spec.source, spec.target_kind) == (
        Kind.CAPABILITY, Source.BUILTIN, TargetKind.IN_PROCESS
    )
    assert spec.server_id is None
    assert spec.deprecated is False


def test_input_schema_is_the_spec_s() -> None:
    assert tool.SPEC.input_schema == {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "description": "A mathematical expression, e.g. 17 * 23",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    }


def test_output_schema_is_the_spec_s() -> None:
    assert tool.SPEC.output_schema == {
        "type": "object",
        "properties": {
            "result": {"type": "string"},
            "result_exact": {"type": "boolean"},
            "expression": {"type": "string"},
        },
        "required": ["result", "result_exact", "expression"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "phrase",
    [
        "decimal.Decimal at 50 significant digits",
        "ROUND_HALF_EVEN",
        "round(2.5) is 2",
        "// and % floor like Python",
        "^ and ** are the same exponentiation operator, right-associative",
        "Functions: abs, ceil, exp, floor, ln, log10, max, min, round(x), round(x, n), sqrt.",
        "Constants: pi, e.",
    ],
)
def test_description_says_what_the_model_needs(phrase: str) -> None:
    assert phrase in tool.SPEC.description


def test_no_ambient_reads_in_the_plugin() -> None:
    assert find_ambient_reads([PACKAGE / "src"]) == []


def test_no_eval_no_ast_no_third_party_parser() -> None:
    # The tool's own modules import only the standard library's decimal, re and friends.
    allowed_imports = {"__future__", "collections", "dataclasses", "decimal", "enum", "re",
                       "typing", "attrs", "toolhost", "toolhost_math"}
    for path in (PACKAGE / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"eval", "exec", "compile", "__import__"}, path
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed_imports, path
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] in allowed_imports, path


# ------------------------------------------------------------------ through the host


@pytest.fixture(scope="module")
def host() -> Host:
    return host_for({"toolhost-math": plugin})


def test_registration_passes_and_the_demo_is_391(host: Host) -> None:
    outcome = host.invoke_sync("math.calculate", {"expression": "17 * 23"})
    assert outcome.ok
    assert outcome.content == "391"
    assert outcome.structured == {"result": "391", "result_exact": True, "expression": "17 * 23"}
    assert outcome.output_trust is Trust.INTERNAL_TOOL


@pytest.mark.parametrize(
    ("expression", "code"),
    [("1 +", "syntax"), ("sin(1)", "unknown_name"), ("1/0", "division_by_zero")],
)
def test_failures_reach_the_model_as_the_static_message(
    host: Host, expression: str, code: str
) -> None:
    outcome = host.invoke_sync("math.calculate", {"expression": expression})
    assert not outcome.ok
    assert outcome.failure is not None
    assert outcome.failure.reason_code == f"tool.invalid_arguments.{code}"
    assert outcome.content == SPEC_MESSAGES[outcome.failure.reason_code]
    assert outcome.failure.retryable is False
    assert expression not in outcome.content


def test_the_schema_refuses_before_the_tool(host: Host) -> None:
    outcome = host.invoke_sync("math.calculate", {"expression": "1" * 1025})
    assert not outcome.ok  # maxLength at pipeline step 4; the tokenizer would refuse it too
    assert host.invoke_sync("math.calculate", {"expression": ""}).ok is False
