"""The host gives the call's context and its services to one parameter each: a second
parameter annotated ``ToolExecutionContext`` (or ``Services``) would never be passed, so every
call would fail as internal. Decoration refuses it, naming both parameters."""

from __future__ import annotations

import pytest
from test_typed_tools import SAFE

from toolhost import Services, ToolExecutionContext, tool


def two_contexts(text: str, ctx: ToolExecutionContext, context: ToolExecutionContext) -> str:
    """Two contexts."""
    return text


def two_services(services: Services, text: str, more: Services) -> str:
    """Two services."""
    return text


@pytest.mark.parametrize(("function", "expected"), [
    (two_contexts, r"two_contexts: parameters 'ctx' and 'context' are both "
                   r"ToolExecutionContext, which the host gives to one parameter; keep one"),
    (two_services, r"two_services: parameters 'services' and 'more' are both Services"),
])
def test_a_second_context_or_services_parameter_is_a_type_error(function: object,
                                                                expected: str) -> None:
    with pytest.raises(TypeError, match=expected):
        tool("context.probe", "1.0.0", **SAFE)(function)


def both(text: str, context: ToolExecutionContext, services: Services) -> str:
    """One of each."""
    return text


def test_one_context_and_one_services_parameter_are_kept() -> None:
    made = tool("context.both", "1.0.0", **SAFE)(both)
    assert made.spec.input_schema["properties"] == {"text": {"type": "string"}}
