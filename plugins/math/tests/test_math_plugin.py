"""The plugin's contract with the host: hooks, spec, schemas, messages (hard gate 9)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Reason,
    Risk,
    SchemaRule,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolValidationError,
    Trust,
)
from toolhost.testing import Harness, find_ambient_reads
from toolhost_math import plugin, tool
from toolhost_math.errors import Reason as Code
from toolhost_math.messages import MESSAGES, REASON_CODES, REASONS

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
    # The body is built at the first call (loading the plugin imports only the spec).
    assert registered.call == "toolhost_math.tool:calculate_tool"
    assert registered.build is None
    assert registered.reasons == REASONS
    assert registered.reason_codes == tuple(SPEC_MESSAGES)
    assert registered.default_enabled is True


def test_loading_the_plugin_imports_the_spec_not_the_evaluator() -> None:
    """What ``toolhost check`` pays per plugin: the spec and the reasons, never the body."""
    code = ("import sys, toolhost_math.plugin as p; p.toolhost_tools(None); "
            "print(sorted(m for m in sys.modules if m.startswith('toolhost_math') "
            "or m == 'decimal'))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == repr(["toolhost_math", "toolhost_math.errors", "toolhost_math.messages",
                           "toolhost_math.plugin", "toolhost_math.specs"])


def test_each_reason_is_declared_once_with_its_spec_message() -> None:
    (registered,) = plugin.toolhost_tools(Settings())
    assert all(isinstance(r, Reason) for r in registered.reasons)
    assert len({r.code for r in registered.reasons}) == len(registered.reasons)
    assert {r.code: r.message for r in registered.reasons} == SPEC_MESSAGES


def test_only_expression_too_long_maps_a_schema_rule() -> None:
    # The bounds table's first row: maxLength at step 4 is expression_too_long, not the
    # host's generic schema failure. No other rule of the schema is mapped.
    rules = {r.code: r.schema_rules for r in REASONS if r.schema_rules}
    assert rules == {
        "tool.invalid_arguments.expression_too_long": (SchemaRule("/expression", "maxLength"),)
    }
    assert tool.SPEC.input_schema["properties"]["expression"]["maxLength"] == 1024


def test_no_host_code_is_declared() -> None:
    assert ToolValidationError.REASON_CODE not in REASON_CODES
    assert all(code.startswith("tool.invalid_arguments.") for code in REASON_CODES)


def test_tools_are_unconditional() -> None:
    flags = Settings(env={"AGENT_PEOPLE_ENABLED": "1", "TOOLHOST_PLUGINS": "toolhost-math"})
    assert plugin.toolhost_tools(flags) == plugin.toolhost_tools(Settings())


def test_hooks_are_consistent() -> None:
    (registered,) = plugin.toolhost_tools(Settings())
    domains = {d.name for d in plugin.toolhost_domains()}
    assert registered.spec.domain in domains


def test_the_two_hooks_are_hookimpls_and_there_is_no_messages_hook() -> None:
    for name in ("toolhost_domains", "toolhost_tools"):
        assert hasattr(getattr(plugin, name), "toolhost_impl"), name
    assert not hasattr(plugin, "toolhost_messages")
    hooks = sorted(name for name, value in vars(plugin).items()
                   if hasattr(value, "toolhost_impl"))
    assert hooks == ["toolhost_domains", "toolhost_tools"]
    assert sorted(plugin.__all__) == ["DOMAIN", "toolhost_domains", "toolhost_tools"]


def test_entry_point_and_package() -> None:
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
    assert project["project"]["name"] == "toolhost-math"
    assert project["project"]["entry-points"]["toolhost.plugins"] == {
        "math": "toolhost_math.plugin"
    }
    assert "toolhost-core>=0.5" in project["project"]["dependencies"]
    assert (PACKAGE / "src" / "toolhost_math" / "py.typed").exists()


# ------------------------------------------------------------------ messages (hard gate 9)


def test_every_reason_code_has_its_spec_message() -> None:
    assert MESSAGES == SPEC_MESSAGES
    assert tuple(MESSAGES) == REASON_CODES
    assert [code.rsplit(".", 1)[1] for code in REASON_CODES] == [c.value for c in Code]


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


def test_registration_passes_and_the_demo_is_391(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("math.calculate", expression="17 * 23")
    assert outcome.ok
    assert outcome.content == "391"
    assert outcome.structured == {"result": "391", "result_exact": True, "expression": "17 * 23"}
    assert outcome.output_trust is Trust.INTERNAL_TOOL


def test_the_row_records_the_call(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("math.calculate", expression="17 * 23")
    assert outcome.invocation_id is not None
    row = toolhost_host.record(outcome.invocation_id)
    assert (row.tool_name, row.tool_version) == ("math.calculate", "1.0.0")
    assert row.arguments == {"expression": "17 * 23"}
    assert row.result_structured == outcome.structured


def test_the_body_is_what_the_host_runs(toolhost_host: Harness) -> None:
    assert toolhost_host.tool("math.calculate") is tool.calculate_tool
    output = toolhost_host.run_body("math.calculate", {"expression": "2^10"})
    assert (output.content, output.structured["result"]) == ("1024", "1024")


@pytest.mark.parametrize(
    ("expression", "code"),
    [("1 +", "syntax"), ("sin(1)", "unknown_name"), ("abs(1, 2)", "arity"),
     ("sqrt(-1)", "domain"), ("1/0", "division_by_zero"), ("9**9**9", "result_out_of_range"),
     ("1" + "+1" * 256, "expression_too_long"), ("(" * 33 + "1" + ")" * 33,
                                                 "expression_too_deep")],
)
def test_failures_reach_the_model_as_the_static_message(
    toolhost_host: Harness, expression: str, code: str
) -> None:
    outcome = toolhost_host.invoke("math.calculate", expression=expression)
    assert not outcome.ok
    assert outcome.failure is not None
    assert outcome.failure.reason_code == f"tool.invalid_arguments.{code}"
    assert outcome.content == SPEC_MESSAGES[outcome.failure.reason_code]
    assert outcome.failure.retryable is False
    assert expression not in outcome.content


@pytest.mark.parametrize(
    ("expression", "detail"),
    [("1 / 0", {"offset": 2, "operation": "/"}),
     ("2 + 3 // (1 - 1)", {"offset": 6, "operation": "//"}),
     ("0 ** -1", {"offset": 2, "operation": "^"})],
)
def test_division_by_zero_is_the_same_failure_whichever_path_refuses_it(
    toolhost_host: Harness, expression: str, detail: dict[str, object]
) -> None:
    # The hot path refuses these itself since issue #27; the failure must stay the exact
    # path's: reason, message, retryability and the detail with its key order.
    outcome = toolhost_host.invoke("math.calculate", expression=expression)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.content, outcome.failure.retryable) == (
        "tool.invalid_arguments.division_by_zero", "Division by zero.", False)
    assert list(outcome.failure.detail.items()) == list(detail.items())


def test_the_schema_refuses_before_the_tool(toolhost_host: Harness) -> None:
    # maxLength is the tool's own reason (test_math_bounds); every other rule is the host's.
    too_long = toolhost_host.invoke("math.calculate", expression="1" * 1025)
    assert too_long.failure is not None
    assert too_long.failure.reason_code == "tool.invalid_arguments.expression_too_long"
    empty = toolhost_host.invoke("math.calculate", expression="")
    assert empty.failure is not None
    assert empty.failure.reason_code == ToolValidationError.REASON_CODE
