"""The execution pipeline: every call runs through these steps, each a named function.

Numbered as DESIGN §4 so the spec's references hold (4 = validation, 10 = output validation,
11 = trust clamp). This module holds the steps the host runs today; policy, approvals,
deadlines, output limits and the durable record slot in between them by number.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

from toolhost import core_messages
from toolhost.outcome import (
    FailureInfo,
    Outcome,
    OutcomeStatus,
    ToolFailure,
    ToolOutput,
    ToolValidationError,
    failure_kind_of,
)
from toolhost.registration import Registered
from toolhost.registry import Registry, UnknownTool, UnknownVersion
from toolhost.services import ToolCallable, ToolExecutionContext
from toolhost.spec import Trust

__all__ = [
    "Pipeline",
    "clamp_trust",
    "execute",
    "render_failure",
    "resolve",
    "validate_arguments",
    "validate_output",
]


class _Refused(Exception):
    """Internal: a step ended the invocation with this failure."""

    def __init__(self, failure: ToolFailure) -> None:
        self.failure = failure


# ------------------------------------------------------------------ step 1: resolve


def resolve(registry: Registry, name: str, version: str | None) -> Registered:
    try:
        return registry.resolve(name, version)
    except UnknownTool:
        raise _Refused(ToolFailure(core_messages.UNKNOWN_TOOL, detail={"tool": name})) from None
    except UnknownVersion:
        raise _Refused(
            ToolFailure(core_messages.UNKNOWN_VERSION, detail={"tool": name, "version": version})
        ) from None


# ------------------------------------------------------------------ step 4: validate arguments


def validate_arguments(registered: Registered, arguments: Any) -> dict[str, Any]:
    """Validate against input_schema and apply defaults (on a copy: the caller's is untouched)."""
    if not isinstance(arguments, Mapping):
        raise _Refused(ToolValidationError(detail={"problem": "arguments are not an object"}))
    data = copy.deepcopy(dict(arguments))
    try:
        registered.validate_input(data)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise _Refused(
            ToolValidationError(detail={"problem": exc.message, "rule": exc.rule})
        ) from None
    return data


# ------------------------------------------------------------------ step 8: execute


async def execute(
    tool: ToolCallable, arguments: Mapping[str, Any], context: ToolExecutionContext
) -> ToolOutput:
    """Await an async tool; run a sync tool in a worker thread so the loop stays free."""
    if inspect.iscoroutinefunction(tool) or inspect.iscoroutinefunction(type(tool).__call__):
        return await tool(arguments, context)  # type: ignore[no-any-return,misc]
    import asyncio  # here, not at module import: `toolhost check` never pays for asyncio

    result = await asyncio.to_thread(tool, arguments, context)
    if inspect.isawaitable(result):
        result = await result
    return result  # type: ignore[return-value]


def _check_failure(registered: Registered, failure: ToolFailure) -> ToolFailure:
    """A tool may raise only the reason codes it declared; anything else is INTERNAL."""
    if failure.reason_code in registered.tool.reason_codes:
        return failure
    return ToolFailure(
        core_messages.INTERNAL_UNDECLARED,
        detail={"reason_code": failure.reason_code, "detail": dict(failure.detail)},
    )


# ------------------------------------------------------------------ step 10: validate output


def validate_output(registered: Registered, output: Any) -> ToolOutput:
    if not isinstance(output, ToolOutput):
        raise _Refused(
            ToolFailure(core_messages.OUTPUT_SCHEMA, detail={"problem": "not a ToolOutput"})
        )
    if not isinstance(output.content, str):
        raise _Refused(
            ToolFailure(core_messages.OUTPUT_SCHEMA, detail={"problem": "content is not text"})
        )
    try:
        registered.validate_output(copy.deepcopy(dict(output.structured)))
    except (fastjsonschema.JsonSchemaValueException, TypeError, ValueError) as exc:
        raise _Refused(
            ToolFailure(core_messages.OUTPUT_SCHEMA, detail={"problem": str(exc)})
        ) from None
    return output


# ------------------------------------------------------------------ step 11: clamp trust


def clamp_trust(declared: Trust, returned: Trust | None) -> Trust:
    """Effective trust is the lower of the spec's and the result's: a tool may only lower it."""
    if not isinstance(returned, Trust):
        return declared
    return Trust.lower(declared, returned)


# ------------------------------------------------------------------ rendering


def render_failure(messages: Mapping[str, str], failure: ToolFailure) -> FailureInfo:
    """The model-facing failure: the static table entry, byte for byte, never the detail."""
    return FailureInfo(
        kind=failure_kind_of(failure.reason_code),
        reason_code=failure.reason_code,
        message=messages[failure.reason_code],
        retryable=failure.retryable,
        detail=dict(failure.detail),
    )


class Pipeline:
    """Runs invocations against one registry with one message table."""

    def __init__(
        self,
        registry: Registry,
        messages: Mapping[str, str],
        build: Callable[[Registered], ToolCallable],
    ) -> None:
        self.registry = registry
        self.messages = messages
        self._build = build

    def _failed(self, name: str, version: str | None, failure: ToolFailure) -> Outcome:
        info = render_failure(self.messages, failure)
        return Outcome(
            tool=name, version=version, status=OutcomeStatus.FAILED, content=info.message,
            failure=info,
        )

    async def invoke(
        self,
        name: str,
        arguments: Any,
        context: ToolExecutionContext,
        *,
        version: str | None = None,
    ) -> Outcome:
        registered: Registered | None = None
        try:
            registered = resolve(self.registry, name, version)
            data = validate_arguments(registered, arguments)
            try:
                raw = await execute(self._build(registered), data, context)
            except ToolFailure as failure:
                raise _Refused(_check_failure(registered, failure)) from None
            except Exception as exc:  # the model gets the static message; operators the detail
                raise _Refused(
                    ToolFailure(
                        core_messages.INTERNAL_UNEXPECTED,
                        detail={"exception": type(exc).__name__, "error": str(exc)},
                    )
                ) from None
            output = validate_output(registered, raw)
        except _Refused as refused:
            resolved_version = registered.spec.version if registered else version
            return self._failed(name, resolved_version, refused.failure)
        return Outcome(
            tool=name,
            version=registered.spec.version,
            status=OutcomeStatus.SUCCEEDED,
            content=output.content,
            structured=dict(output.structured),
            output_trust=clamp_trust(registered.spec.output_trust, output.output_trust),
        )
