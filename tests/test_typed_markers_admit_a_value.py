"""What a typed tool's schema says must be a value JSON can carry, and admit some argument:
a default or a ``Range`` bound that is NaN, an infinity or an integer too long to write out
fails where it is written (the marker when made, the default at decoration), naming it,
rather than at registration's step 5 with pointer ``/``; and markers that admit nothing
(equal bounds one of which is exclusive, ``MinLen`` above ``MaxLen``, an integer ``Range``
with no integer in it, a ``$`` inside ``[...]`` the validator would rewrite) are refused too.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import pytest
from test_typed_tools import SAFE

from toolhost import MaxLen, MinLen, Pattern, Range, tool

#: More digits than Python writes out, so no JSON text can hold the number.
HUGE = 10 ** (sys.get_int_max_str_digits() + 1)


def _made(hint: Any, default: Any = None) -> Any:
    def probe(x: Any = default) -> str:
        """Probe."""
        return ""

    probe.__annotations__ = {"x": hint, "return": str}
    if default is None:
        probe.__defaults__ = None
    return tool("markers.probe", "1.0.0", **SAFE)(probe)


@pytest.mark.parametrize(("hint", "default", "expected"), [
    (float, float("inf"), r"probe\(x\): the default is inf, which JSON has no form for"),
    (float, float("-inf"), r"probe\(x\): the default is -inf, which JSON has no form for"),
    (float, float("nan"), r"probe\(x\): the default is nan, which JSON has no form for"),
    pytest.param(int, HUGE, r"probe\(x\): the default is an integer of more than \d+ digits",
                 id="huge"),
    (list[float], (1.0, float("inf")), r"probe\(x\): the default is inf, which JSON"),
])
def test_a_default_json_cannot_carry_is_a_type_error_naming_the_parameter(
        hint: Any, default: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=expected):
        _made(hint, default)


@pytest.mark.parametrize(("bounds", "expected"), [
    ({"maximum": float("inf")}, r"maximum: a bound is a number JSON can hold, not inf"),
    ({"exclusive_minimum": float("-inf")}, r"exclusive_minimum: .* not -inf"),
    pytest.param({"minimum": HUGE}, r"minimum: .* not an integer of more than \d+ digits",
                 id="huge"),
])
def test_a_bound_json_cannot_carry_fails_when_the_range_is_made(
        bounds: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        Range(**bounds)


@pytest.mark.parametrize("bounds", [
    {"exclusive_minimum": 1, "exclusive_maximum": 1},
    {"minimum": 1, "exclusive_maximum": 1},
    {"exclusive_minimum": 1, "maximum": 1},
    {"minimum": 1, "exclusive_minimum": 1, "maximum": 1},
])
def test_equal_bounds_one_of_them_exclusive_admit_no_number(bounds: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="admits no number: its bounds are equal and one of"):
        Range(**bounds)


def test_equal_inclusive_bounds_admit_their_number() -> None:
    schema = _made(Annotated[int, Range(3, 3)]).spec.input_schema["properties"]["x"]
    assert schema == {"type": "integer", "minimum": 3, "maximum": 3}


@pytest.mark.parametrize(("hint", "expected"), [
    (Annotated[str, MinLen(5), MaxLen(2)], r"MinLen\(5\) and MaxLen\(2\) admit no value"),
    (Annotated[list[int], MinLen(3), MaxLen(2)] | None, r"MinLen\(3\) and MaxLen\(2\)"),
    (Annotated[int, Range(0.2, 0.8)], "its Range admits no integer"),
    (Annotated[int, Range(exclusive_minimum=1, exclusive_maximum=2)], "its Range admits no"),
    (Annotated[int | None, Range(exclusive_minimum=-0.5, maximum=-0.1)], "its Range admits"),
])
def test_markers_that_admit_no_value_together_are_a_type_error(hint: Any,
                                                                expected: str) -> None:
    with pytest.raises(TypeError, match=r"probe\(x\): " + expected):
        _made(hint)


@pytest.mark.parametrize("hint", [
    Annotated[int, Range(0.2, 1)],
    Annotated[int, Range(exclusive_minimum=1, exclusive_maximum=3)],
    Annotated[float, Range(0.2, 0.8)],
    Annotated[str, MinLen(2), MaxLen(2)],
])
def test_markers_that_admit_a_value_are_kept(hint: Any) -> None:
    _made(hint)


def test_a_dollar_the_validator_cannot_read_fails_when_the_pattern_is_made() -> None:
    with pytest.raises(ValueError, match=r"reads every unescaped \$ as the end of the string"):
        Pattern(r"^[$a-z]+$")
    assert Pattern(r"^[\$a-z]+$").regex == r"^[\$a-z]+$"  # escaped: the same set for both


@pytest.mark.parametrize(("hint", "expected"), [
    (Annotated[float, Range(minimum=5), Range(maximum=1)], "its lower bound is above its upper"),
    (Annotated[float, Range(exclusive_minimum=1), Range(maximum=1)],
     "its bounds are equal and one of them is exclusive"),
    (Annotated[float | None, Range(minimum=1), Range(exclusive_maximum=1)], "its bounds are equal"),
])
def test_separate_ranges_that_admit_no_number_together_are_a_type_error(
        hint: Any, expected: str) -> None:
    # Each Range alone is sound; as on an int, together they refuse every call.
    with pytest.raises(TypeError, match=r"probe\(x\): its Range markers admit no number: "
                                        + expected):
        _made(hint)


def test_separate_ranges_that_admit_a_number_together_are_kept() -> None:
    schema = _made(Annotated[float, Range(minimum=1), Range(maximum=1)]).spec.input_schema
    assert schema["properties"]["x"] == {"type": "number", "minimum": 1, "maximum": 1}
