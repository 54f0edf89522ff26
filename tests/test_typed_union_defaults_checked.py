"""An attrs field's default is checked against its own schema wherever the class sits: as a
parameter, and as a branch of a union (``Page | None``, ``A | B``, a list of either), where the
schema carries no default yet the body receives it all the same (D421, D299).

A ``pattern`` is read as the host's validator reads it: ``$`` is the end of the string, not
also the place before a final newline, so a default the validator refuses is refused at
decoration too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import attrs
import pytest
from test_typed_tools import SAFE

from toolhost import Pattern, Range, tool
from toolhost._model.typed_schema import fits
from toolhost._registration.schema import compile_schema


@attrs.frozen
class Page:
    limit: Annotated[int, Range(1, 10)] = 50  # outside its own Range


@attrs.frozen
class Cursor:
    id: str
    cursor: str = None  # type: ignore[assignment]  # as a plugin may write it


@attrs.frozen
class Made:
    tag: Literal["made"]
    size: int = attrs.field(default=attrs.Factory(lambda: "big"))


@attrs.frozen
class Other:
    tag: Literal["other"]


def optional(page: Page | None = None) -> str:
    """Optional page."""
    return ""


def either(c: Cursor | Page) -> str:
    """Either."""
    return ""


def listed(pages: list[Made | Other] | None = None) -> str:
    """A list of a union."""
    return ""


@pytest.mark.parametrize(("function", "expected"), [
    (optional, r"optional\(page\)\.limit: the default 50 does not match its own schema"),
    (either, r"either\(c\)\.cursor: the default None does not match its own schema"),
    (listed, r"listed\(pages\)\[\]\.size: the default 'big' does not match its own schema"),
])
def test_a_union_branchs_field_default_its_schema_refuses_is_a_type_error(
        function: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=expected):
        tool("unions.probe", "1.0.0", **SAFE)(function)


@attrs.frozen
class Fine:
    limit: Annotated[int, Range(1, 10)] = 5


def fine(page: Fine | None = None) -> str:
    """Fine."""
    return ""


def test_a_union_branchs_sound_default_is_still_left_out_of_the_branch() -> None:
    schema = tool("unions.fine", "1.0.0", **SAFE)(fine).spec.input_schema
    branch = schema["properties"]["page"]["anyOf"][0]
    assert branch["properties"]["limit"] == {"type": "integer", "minimum": 1, "maximum": 10}


def tagged(name: Annotated[str, Pattern(r"^[a-z]+$")] = "main\n") -> str:
    """Tagged."""
    return name


def test_a_default_matching_only_before_a_final_newline_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"tagged\(name\): the default 'main\\n' does not match"):
        tool("pattern.probe", "1.0.0", **SAFE)(tagged)


@pytest.mark.parametrize("regex", [r"^[a-z]+$", r"a$", r"^a\$$", r"^(a|b$)", r"x\\$"])
@pytest.mark.parametrize("value", ["a", "a\n", "a$", "b\n", "x\\", "x\\\n", ""])
def test_fits_reads_a_pattern_as_the_hosts_validator_does(regex: str, value: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": regex}},
              "required": ["v"], "additionalProperties": False}
    validator = compile_schema(schema)
    try:
        validator({"v": value})
        admitted = True
    except Exception:  # the validator's refusal, whatever its class
        admitted = False
    assert fits(value, schema["properties"]["v"]) is admitted
