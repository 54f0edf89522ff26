"""Declarations a typed tool refuses at decoration, with words that say what to change.

An attrs field's default must match its own schema as a parameter's does (``limit: int =
None`` would hand the body None); the call's context and the host services are given only to
a parameter annotated exactly ``ToolExecutionContext`` or ``Services``, and any other spelling
of them says so rather than sending the author after ``TYPE_CHECKING`` imports.
"""

from __future__ import annotations

from typing import Annotated, Any

import attrs
import pytest
from test_typed_tools import SAFE as TYPED_SAFE

from toolhost import (
    Doc,
    Services,
    ToolExecutionContext,
    tool,
)

SAFE = TYPED_SAFE  # the safety fields of a read-only tool


@attrs.frozen
class Query:
    limit: int = None  # type: ignore[assignment]  # as a plugin may write it


@attrs.frozen
class Ranged:
    text: str = attrs.field(default=attrs.Factory(lambda: 5))


@attrs.frozen
class Fine:
    limit: int | None = None
    label: str = attrs.field(default=attrs.Factory(lambda: "all"))
    echo: str = attrs.field(default=attrs.Factory(lambda self: self.label, takes_self=True))


def _made(function: Any) -> Any:
    return tool("refusals.probe", "1.0.0", **SAFE)(function)


def test_an_attrs_fields_default_its_schema_refuses_is_a_type_error() -> None:
    def field(q: Query) -> str:
        """Field."""
        return ""

    def factory(r: Ranged) -> str:
        """Factory."""
        return ""

    with pytest.raises(TypeError, match=r"field\(q\)\.limit: the default None does not match"):
        _made(field)
    with pytest.raises(TypeError, match=r"factory\(r\)\.text: the default 5 does not match"):
        _made(factory)


def test_a_default_its_schema_admits_and_one_made_from_the_instance_are_kept() -> None:
    def fine(f: Fine) -> str:
        """Fine."""
        return ""

    properties = _made(fine).spec.input_schema["properties"]["f"]["properties"]
    assert properties["limit"] == {"type": ["integer", "null"], "default": None}
    assert properties["label"] == {"type": "string", "default": "all"}
    assert properties["echo"] == {"type": "string"}  # computed from the instance: no default


def context_or_none(n: int, context: ToolExecutionContext | None = None) -> str:
    """Context or None."""
    return ""


def annotated_context(context: Annotated[ToolExecutionContext, Doc("the call")]) -> str:
    """Annotated context."""
    return ""


def services_or_none(services: Services | None) -> str:
    """Services or None."""
    return ""


def listed_context(contexts: list[ToolExecutionContext]) -> str:
    """Listed context."""
    return ""


@pytest.mark.parametrize(("function", "name"), [
    (context_or_none, "ToolExecutionContext"), (annotated_context, "ToolExecutionContext"),
    (services_or_none, "Services"), (listed_context, "ToolExecutionContext"),
])
def test_the_context_or_services_spelled_otherwise_says_to_annotate_exactly(
        function: Any, name: str) -> None:
    with pytest.raises(TypeError, match=rf"annotate the parameter exactly {name}") as raised:
        _made(function)
    assert "TYPE_CHECKING" not in str(raised.value)


def test_the_context_as_a_result_is_refused_as_one() -> None:
    def returns_context() -> ToolExecutionContext:
        """Returns the context."""
        raise AssertionError

    with pytest.raises(TypeError, match="given by the host to a parameter, not a result"):
        _made(returns_context)
