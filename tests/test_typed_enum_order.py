"""A typed tool's schema does not depend on what the process imported first.

typing hands back a ``typing.Union`` (``Literal[...] | None`` is one), an ``Annotated`` or a
``typing.List`` from a cache keyed by equality, and ``Literal["desc", "asc"]`` equals
``Literal["asc", "desc"]``: the object a plugin gets may carry another module's order. Below
such a form the host lists a Literal's values sorted (by JSON type, then value) and a union's
branches in a fixed order; a Literal or a union the plugin wrote as the annotation itself,
and an Enum anywhere, keep their own order.
"""

from __future__ import annotations

import enum
import json
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from toolhost import Doc, Idempotency, Risk, SideEffect, Trust, tool

SAFE: dict[str, Any] = {
    "side_effect": SideEffect.NONE, "risk": Risk.LOW, "idempotency": Idempotency.READ_ONLY,
    "output_trust": Trust.INTERNAL_TOOL, "required_scopes": (), "timeout_s": 2,
    "maximum_output_bytes": 4096, "reasons": (),
}

#: As an unrelated module imported earlier would have written them: typing caches these.
EARLIER = (Optional[Literal["zulu", "alpha"]],  # noqa: UP045 - a spelling typing caches
           Annotated[Literal["zulu", "alpha"], Doc("the order")],
           Optional[Union[str, int]],  # noqa: UP007, UP045
           typing.List[Literal["zulu", "alpha"]])  # noqa: UP006


class Speed(enum.Enum):
    SLOW = "slow"
    FAST = "fast"


def _properties(function: Any) -> dict[str, Any]:
    made = tool("order.probe", "1.0.0", **SAFE)(function)
    return dict(made.spec.input_schema["properties"])


def test_a_literal_below_a_cached_form_is_sorted_whatever_was_cached_first() -> None:
    def sort(order: Literal["alpha", "zulu"] | None = None,
             documented: Annotated[Literal["alpha", "zulu"], Doc("the order")] = "zulu",
             several: typing.List[Literal["alpha", "zulu"]] = (),  # noqa: UP006
             ) -> str:
        """Sort."""
        return ""

    properties = _properties(sort)
    assert properties["order"]["anyOf"][0]["enum"] == ["alpha", "zulu"]
    assert properties["documented"]["enum"] == ["alpha", "zulu"]
    assert properties["several"]["items"]["enum"] == ["alpha", "zulu"]


def test_a_union_below_a_cached_form_has_its_branches_in_a_fixed_order() -> None:
    def pick(key: Optional[Union[int, str]] = None) -> str:  # noqa: UP007, UP045
        """Pick."""
        return ""

    assert _properties(pick)["key"]["anyOf"][0]["anyOf"] == [{"type": "integer"},
                                                             {"type": "string"}]


def test_values_are_sorted_by_json_type_then_value() -> None:
    def mixed(v: Literal["b", 2, True, "a", 1, False] | None = None) -> str:
        """Mixed."""
        return ""

    assert _properties(mixed)["v"]["anyOf"][0] == {"enum": [False, True, 1, 2, "a", "b"]}


def test_what_no_cache_can_reorder_keeps_the_order_written() -> None:
    def written(order: Literal["zulu", "alpha"], many: list[Literal["zulu", "alpha"]],
                either: str | int, speed: Speed | None = None) -> str:
        """Written."""
        return ""

    properties = _properties(written)
    assert properties["order"]["enum"] == ["zulu", "alpha"]
    assert properties["many"]["items"]["enum"] == ["zulu", "alpha"]
    assert properties["either"]["anyOf"] == [{"type": "string"}, {"type": "integer"}]
    assert properties["speed"]["anyOf"][0]["enum"] == ["slow", "fast"]  # an Enum's own order


PLUGIN = """
    from typing import Annotated, Literal, Optional, Union
    from toolhost import Doc, Idempotency, Risk, SideEffect, Trust, tool

    @tool("{name}.sort", "1.0.0", side_effect=SideEffect.NONE, risk=Risk.LOW,
          idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
          required_scopes=(), timeout_s=2, maximum_output_bytes=4096, reasons=())
    def sort(order: Optional[Literal[{values}]] = None,
             documented: Annotated[Literal[{values}], Doc("the order")] = "desc",
             key: Optional[Union[{kinds}]] = None) -> str:
        \"\"\"Sort.\"\"\"
        return ""
"""

SHOW = """
import json, sys
for name in sys.argv[1:]:
    module = __import__(name)
print(json.dumps(module.sort.spec.input_schema, sort_keys=True))
"""


def test_a_plugins_schema_is_the_same_whichever_plugin_was_imported_first(
        tmp_path: Path) -> None:
    for name, values, kinds in (("earlier", '"asc", "desc"', "int, str"),
                                ("mine", '"desc", "asc"', "str, int")):
        source = textwrap.dedent(PLUGIN).format(name=name, values=values, kinds=kinds)
        (tmp_path / f"{name}.py").write_text(source)

    def schema(*imported: str) -> Any:
        done = subprocess.run([sys.executable, "-c", SHOW, *imported], cwd=tmp_path,
                              capture_output=True, text=True, check=True, timeout=60)
        return json.loads(done.stdout)

    alone = schema("mine")
    assert schema("earlier", "mine") == alone
    assert alone["properties"]["order"]["anyOf"][0]["enum"] == ["asc", "desc"]
