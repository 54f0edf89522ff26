"""The invoke path: resolve → validate → execute → validate output → clamp trust → render."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import pytest
from conftest import CLOSED_OUT, make_plugin, make_spec, make_tool

from toolhost import OutcomeStatus, Reason, ToolFailure, ToolFailureKind, ToolOutput, Trust
from toolhost._composition import Host
from toolhost._model.host_reasons import MESSAGES
from toolhost.testing import host_for

CODE = "tool.not_found.thing"


REASON = Reason(CODE, "No such thing.")


def host_with(build: Any, *, reasons: tuple[Reason, ...] = (), **spec: Any) -> Host:
    plugin = make_plugin(tools=[make_tool(make_spec(**spec), build=build, reasons=reasons)])
    return host_for({"fx-dist": plugin})


def returning(value: Any) -> Any:
    def build(services: Any) -> Any:
        def tool(arguments: Mapping[str, Any], context: Any) -> Any:
            if isinstance(value, BaseException):
                raise value
            return value

        return tool

    return build


def echo_host() -> Host:
    return host_for({"fx-dist": make_plugin(tools=[make_tool()])})


def test_success_carries_content_structured_and_trust() -> None:
    outcome = echo_host().invoke_sync("fx.echo", {"x": "hi"})
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert (outcome.content, outcome.structured) == ("hi", {"echo": "hi"})
    assert (outcome.version, outcome.output_trust) == ("1.0.0", Trust.INTERNAL_TOOL)


def test_schema_defaults_are_applied_without_touching_the_callers_arguments() -> None:
    arguments: dict[str, Any] = {}
    assert echo_host().invoke_sync("fx.echo", arguments).content == "d"
    assert arguments == {}


@pytest.mark.parametrize(
    "arguments", [[], "x", None, 3, {"x": 1}, {"x": "123456789"}, {"x": "a", "extra": 1}]
)
def test_bad_arguments_are_one_static_validation_failure(arguments: Any) -> None:
    outcome = echo_host().invoke_sync("fx.echo", arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert outcome.failure.kind is ToolFailureKind.INVALID_ARGUMENTS
    assert outcome.content == outcome.failure.message == MESSAGES["tool.invalid_arguments.schema"]
    assert outcome.failure.retryable is False


def test_unknown_tool_and_version() -> None:
    host = echo_host()
    unknown = host.invoke_sync("fx.nope", {})
    assert unknown.failure and unknown.failure.reason_code == "tool.invalid_arguments.unknown_tool"
    version = host.invoke_sync("fx.echo", {}, version="2.0.0")
    assert version.failure and version.failure.reason_code == (
        "tool.invalid_arguments.unknown_version"
    )
    assert version.failure.detail == {"tool": "fx.echo", "version": "2.0.0"}


def test_a_declared_failure_renders_its_static_message_and_keeps_detail_for_operators() -> None:
    failure = ToolFailure(CODE, detail={"secret_input": "rm -rf"}, retryable=True)
    outcome = host_with(returning(failure), reasons=(REASON,)).invoke_sync("fx.echo", {})
    assert outcome.failure is not None
    assert outcome.content == outcome.failure.message == "No such thing."
    assert outcome.failure.kind is ToolFailureKind.NOT_FOUND and outcome.failure.retryable
    assert outcome.failure.detail == {"secret_input": "rm -rf"}
    assert "rm -rf" not in str(outcome.to_json())


def test_a_declared_failure_whose_detail_holds_nan_is_stored_with_it_as_text() -> None:
    # JSON has no NaN (D401): written as it was, the row's write failed and the tool's own
    # failure read as the record store's outage, with no row.
    failure = ToolFailure(CODE, detail={"x": float("nan"), "y": [float("-inf")]})
    host = host_with(returning(failure), reasons=(REASON,))
    outcome = host.invoke_sync("fx.echo", {})
    assert outcome.failure is not None and outcome.failure.reason_code == CODE
    (row,) = host.pipeline.invocations.list()
    assert (row.reason_code, row.failure_detail) == (CODE, {"x": "nan", "y": ["-inf"]})


def test_an_undeclared_reason_code_is_internal() -> None:
    # The code has a message (a sibling tool declares it), but not on the tool that raised it.
    sibling = make_tool(make_spec(name="fx.other"), reasons=(REASON,))
    plugin = make_plugin(tools=[make_tool(build=returning(ToolFailure(CODE))), sibling])
    outcome = host_for({"fx-dist": plugin}).invoke_sync("fx.echo", {})
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.undeclared_reason_code"
    assert outcome.failure.detail["reason_code"] == CODE
    assert outcome.content == "The tool failed unexpectedly."


def test_an_unexpected_exception_is_internal_and_never_reaches_the_model() -> None:
    outcome = host_with(returning(KeyError("/etc/shadow"))).invoke_sync("fx.echo", {})
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.unexpected"
    assert outcome.content == "The tool failed unexpectedly."
    assert "shadow" not in outcome.content and "shadow" in outcome.failure.detail["error"]


def test_a_build_that_raises_is_internal() -> None:
    def build(services: Any) -> Any:
        raise RuntimeError("no credentials")

    outcome = host_with(build).invoke_sync("fx.echo", {})
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.unexpected"


@pytest.mark.parametrize(
    "value",
    [
        ToolOutput(structured={"echo": 1}, content="1"),
        ToolOutput(structured={"echo": "a", "more": 1}, content="a"),
        ToolOutput(structured={"echo": "a"}, content=None),  # type: ignore[arg-type]
        {"echo": "a"},
        None,
    ],
)
def test_output_that_violates_its_schema_is_output_invalid(value: Any) -> None:
    outcome = host_with(returning(value)).invoke_sync("fx.echo", {})
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.OUTPUT_INVALID
    assert CLOSED_OUT["required"] == ["echo"]


@pytest.mark.parametrize(
    ("declared", "returned", "effective"),
    [
        (Trust.INTERNAL_TOOL, None, Trust.INTERNAL_TOOL),
        (Trust.INTERNAL_TOOL, Trust.EXTERNAL_UNTRUSTED, Trust.EXTERNAL_UNTRUSTED),
        (Trust.INTERNAL_TOOL, Trust.USER, Trust.INTERNAL_TOOL),  # a tool may only lower
        (Trust.MEMORY, Trust.INTERNAL_TOOL, Trust.MEMORY),
    ],
)
def test_trust_is_clamped_to_the_lower(declared: Trust, returned: Trust | None,
                                       effective: Trust) -> None:
    value = ToolOutput(structured={"echo": "a"}, content="a", output_trust=returned)
    outcome = host_with(returning(value), output_trust=declared).invoke_sync("fx.echo", {})
    assert outcome.output_trust is effective


def test_async_tools_are_awaited() -> None:
    def build(services: Any) -> Any:
        async def tool(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
            await asyncio.sleep(0)
            return ToolOutput(structured={"echo": "async"}, content="async")

        return tool

    assert host_with(build).invoke_sync("fx.echo", {}).content == "async"


def test_a_tool_is_built_once_and_on_first_use() -> None:
    built: list[int] = []

    def build(services: Any) -> Any:
        built.append(1)
        return returning(ToolOutput(structured={"echo": "a"}, content="a"))(services)

    host = host_with(build)
    assert built == []
    host.invoke_sync("fx.echo", {})
    host.invoke_sync("fx.echo", {})
    assert built == [1]


def test_the_failure_json_form_has_every_field_and_no_detail() -> None:
    outcome = echo_host().invoke_sync("fx.echo", {"x": 3})
    data = outcome.to_json()
    assert re.fullmatch(r"[0-9a-f]{32}", data.pop("invocation_id"))
    assert data == {
        "tool": "fx.echo",
        "version": "1.0.0",
        "status": "failed",
        "content": "The arguments do not match the tool's input schema.",
        "structured": None,
        "output_trust": None,
        "kind": "INVALID_ARGUMENTS",
        "reason_code": "tool.invalid_arguments.schema",
        "message": "The arguments do not match the tool's input schema.",
        "retryable": False,
    }


# ---------------------------------------------------------------------- step 4: prepare


def test_prepare_is_step_4_exactly_as_invoke_runs_it() -> None:
    from toolhost import SchemaRule, ToolValidationError
    from toolhost._model.digest import argument_digest

    reason = Reason("tool.invalid_arguments.too_long", "Too long.",
                    schema_rules=(SchemaRule("/x", "maxLength"),))
    host = host_for({"fx-dist": make_plugin(tools=[make_tool(reasons=(reason,))])})
    registered = host.registry.resolve("fx.echo")
    arguments: dict[str, Any] = {}
    prepared = host.pipeline.prepare(registered, arguments)
    assert (prepared.tool, prepared.version, prepared.arguments) == ("fx.echo", "1.0.0",
                                                                    {"x": "d"})
    assert prepared.digest == argument_digest("fx.echo", "1.0.0", {"x": "d"})
    assert arguments == {}  # defaults land on a copy
    with pytest.raises(ToolFailure) as mapped:  # the tool's own reason for its schema rule
        host.pipeline.prepare(registered, {"x": "123456789"})
    assert mapped.value.reason_code == "tool.invalid_arguments.too_long"
    for bad in ([], {"x": 1}, {"x": "\ud800"}):  # not an object; the schema; not UTF-8
        with pytest.raises(ToolValidationError):
            host.pipeline.prepare(registered, bad)


def test_the_argument_digest_is_computed_in_one_place() -> None:
    from pathlib import Path

    import toolhost

    package = Path(toolhost.__file__).parent
    call = re.compile(r"(?<!def )argument_digest\(")  # a call, not a property of that name
    callers = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py")
        if call.search(path.read_text()) and path.name != "digest.py"
    )
    assert callers == ["_pipeline/steps.py"]
    mcp = "".join(path.read_text() for path in (package / "_mcp").glob("*.py"))
    assert "validate_input" not in mcp and "_pipeline.steps" not in mcp
