"""Unions inside a typed tool's attrs classes reach the body structured, ``Annotated`` members
and all.

cattrs hands an attrs field's union to the host's union hook with its members' ``Annotated``
layers kept (a top-level parameter is stripped before): the hook must compare the members
without their markers, or every value, the field's own default included, is refused.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import attrs
import pytest
from test_typed_tools import SAFE as TYPED_SAFE

from toolhost import (
    Doc,
    Domain,
    MaxLen,
    Range,
    hookimpl,
    tool,
)
from toolhost.testing import Harness

SAFE = TYPED_SAFE  # the safety fields of a read-only tool


@attrs.frozen
class Page:
    size: Annotated[int, Doc("rows per page")] | Literal["all"] = 10
    cursor: Annotated[str, MaxLen(64)] | int | None = None
    order: Annotated[Literal["asc", "desc"], Doc("the order")] | int = "asc"
    either: Annotated[int | str, Doc("a number or a name")] | None = None
    band: Annotated[int, Range(1, 5)] | Annotated[int, Range(10, 20)] = 1
    tags: list[Annotated[str, MaxLen(8)] | int] = attrs.field(factory=list)


@tool("unions.page", "1.0.0", **SAFE)
def page(page: Page) -> str:
    """Show the page the body received."""
    return repr(page)


@pytest.fixture
def harness() -> Iterator[Harness]:
    plugin = types.SimpleNamespace(
        toolhost_domains=hookimpl(lambda: [Domain("unions", "Unions under test.")]),
        toolhost_tools=hookimpl(lambda: [page]))
    with Harness.over({"toolhost-unions": plugin}) as made:
        yield made


def _body_got(harness: Harness, **arguments: Any) -> str:
    outcome = harness.invoke("unions.page", **arguments)
    assert outcome.ok, (outcome.failure, outcome.content)
    return outcome.content


def test_an_empty_object_gets_every_union_fields_default(harness: Harness) -> None:
    assert _body_got(harness, page={}) == repr(Page())


@pytest.mark.parametrize(("given", "expected"), [
    ({"size": 25}, Page(size=25)),
    ({"size": "all"}, Page(size="all")),
    ({"size": 25.0}, Page(size=25)),  # a whole float is the int member
    ({"cursor": "abc"}, Page(cursor="abc")),
    ({"cursor": 7}, Page(cursor=7)),
    ({"order": "desc"}, Page(order="desc")),
    ({"order": 3}, Page(order=3)),
    ({"either": "ada"}, Page(either="ada")),
    ({"either": 4}, Page(either=4)),
    ({"band": 12}, Page(band=12)),
    ({"tags": ["x", 2]}, Page(tags=["x", 2])),
])
def test_a_value_an_annotated_member_admits_reaches_the_body(
        harness: Harness, given: dict[str, Any], expected: Page) -> None:
    assert _body_got(harness, page=given) == repr(expected)


def test_the_schema_still_carries_the_members_markers() -> None:
    properties = page.spec.input_schema["properties"]["page"]["properties"]
    assert {"type": "integer", "description": "rows per page"} in properties["size"]["anyOf"]
    assert {"type": "string", "maxLength": 64} in properties["cursor"]["anyOf"][0]["anyOf"]
