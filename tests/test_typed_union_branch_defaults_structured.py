"""An attrs field's default reaches the body as the type its annotation says, in a union's
branch as outside one: a field left out is given its default's JSON form, which is structured
as an argument is (an ``int`` field's ``2.0`` arrives as ``2``, an Enum field's ``"red"`` as
``Color.RED``, a ``list`` field's tuple as a list). Outside a union the validator fills the
schema's default in; inside a branch no default is written (D499), and attrs used to put the
default in as written, so the same class gave the body a float, a str and a tuple there."""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from typing import Any, Literal

import attrs
import pytest
from test_typed_tools import SAFE

from toolhost import Domain, Tool, hookimpl, tool
from toolhost.testing import Harness


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Opt:
    n: int = 2.0  # type: ignore[assignment]  # as a plugin may write it; JSON's 2.0 is an integer
    c: Color = "red"  # type: ignore[assignment]
    tags: list[str] = ("a",)  # type: ignore[assignment]
    made: list[int] = attrs.Factory(lambda: (1,))


@attrs.frozen
class Tagged:
    kind: Literal["tagged"]
    n: int = 3.0  # type: ignore[assignment]


@attrs.frozen
class Outer:
    inner: Opt


SEEN: dict[str, Any] = {}


def _types(p: Any) -> str:
    return f"{p.n!r} {p.c!r} {p.tags!r} {p.made!r}"


@tool("branches.plain", "1.0.0", **SAFE)
def plain(p: Opt) -> str:
    """The class as a parameter."""
    return _types(p)


@tool("branches.optional", "1.0.0", **SAFE)
def optional(p: Opt | None = None) -> str:
    """The class in T | None."""
    return _types(p)


@tool("branches.either", "1.0.0", **SAFE)
def either(p: Tagged | Outer) -> str:
    """A class in a union of two, and one nested in a branch."""
    return repr(p.n) if isinstance(p, Tagged) else _types(p.inner)


@tool("branches.listed", "1.0.0", **SAFE)
def listed(ps: list[Opt | None]) -> str:
    """A list of optional objects."""
    return " | ".join(_types(p) for p in ps if p is not None)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("branches", "Union branches under test.")]


@hookimpl
def toolhost_tools() -> list[Tool]:
    return [plain, optional, either, listed]


PLUGINS = {"toolhost-branches": sys.modules[__name__]}

#: What the body gets for ``Opt`` left empty: the annotated types, as a plain parameter gets.
AS_ANNOTATED = "2 <Color.RED: 'red'> ['a'] [1]"


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with Harness.over(PLUGINS) as made:
        yield made


@pytest.mark.parametrize(("name", "arguments"), [
    ("branches.plain", {"p": {}}),
    ("branches.optional", {"p": {}}),
    ("branches.either", {"p": {"inner": {}}}),
    ("branches.listed", {"ps": [{}, None]}),
])
def test_a_left_out_field_arrives_as_its_annotation_says(harness: Harness, name: str,
                                                         arguments: dict[str, Any]) -> None:
    outcome = harness.invoke(name, **arguments)
    assert outcome.ok, outcome.content
    assert outcome.content == AS_ANNOTATED


def test_a_tagged_branchs_default_is_structured_too(harness: Harness) -> None:
    outcome = harness.invoke("branches.either", p={"kind": "tagged"})
    assert (outcome.ok, outcome.content) == (True, "3")


def test_a_given_field_is_taken_as_given(harness: Harness) -> None:
    outcome = harness.invoke("branches.optional", p={"n": 7, "c": "blue", "tags": [],
                                                     "made": [4.0]})
    assert (outcome.ok, outcome.content) == (True, "7 <Color.BLUE: 'blue'> [] [4]")
