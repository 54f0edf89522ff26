"""A failure's detail is stored on the call's one ``failed`` row whatever a plugin put in it,
and bounded.

``ToolFailure.detail`` is free-form operator data (plugin-api.md), so bytes, a set, an
exception object or a cyclic dict in it is an ordinary plugin bug. Before, such a detail
failed the row's write (the call answered "changed nothing, try again", no row), or its
encoding raised RecursionError or TypeError out of ``invoke`` (a traceback, no row); and an
exception's text or a detail of megabytes was stored whole in every row. Now each call ends on
its row with its declared reason code (or ``tool.internal.unexpected``) and the static
message; the detail keeps what JSON can hold, at most ``MAX_DETAIL_CHARS`` characters of text
(a text cut there says how long it was). Real host and SQLite store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import Reason, Tool, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost._model import host_reasons
from toolhost._model.digest import canonical_json
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.nesting import MAX_ARGUMENT_DEPTH
from toolhost._pipeline.steps import MAX_DETAIL_CHARS
from toolhost.testing import Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}
NOPE = "tool.not_found.nope"
MESSAGE = "Nothing there. Try another."
#: What a stored detail's JSON may take at most: each kept character escaped (six bytes, a
#: lone surrogate's ``\\udc80``), with room for the markers and the structure around them.
MOST_BYTES = 6 * MAX_DETAIL_CHARS + 4096


class Thing:
    def __repr__(self) -> str:
        return "Thing()"


class Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("repr boom")


class BrokenMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iter boom")

    def __len__(self) -> int:
        return 1


class ItemsRaise(dict[str, Any]):
    """A dict of a plugin's own whose ``items()`` raises: what the JSON encoder reads."""

    def items(self) -> Any:
        raise RuntimeError("items boom")


def cyclic_dict() -> dict[str, Any]:
    found: dict[str, Any] = {"name": "loop"}
    found["self"] = found
    return found


def cyclic_list() -> list[Any]:
    found: list[Any] = ["loop"]
    found.append(found)
    return found


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


#: One list twice in a detail: the same object again, but no cycle.
SHARED = ["x"]

#: A detail the body raises, and the detail its row keeps.
DETAILS: dict[str, tuple[Any, Any]] = {
    "bytes": ({"b": b"\xff\x00raw"}, {"b": "b'\\xff\\x00raw'"}),
    "set": ({"s": {1, 2}, "f": frozenset({3})}, {"s": [1, 2], "f": [3]}),
    "tuple": ({"t": (1, "a")}, {"t": [1, "a"]}),
    "object": ({"o": Thing(), "e": ValueError("bad")},
               {"o": "Thing()", "e": "ValueError('bad')"}),
    "unshowable": ({"u": Unshowable()}, {"u": "(a Unshowable that cannot be shown)"}),
    "broken mapping": ({"m": BrokenMapping()}, {"m": "(a BrokenMapping that cannot be shown)"}),
    "bigint": ({"n": 10**5000, "small": 7}, {"n": f"(an integer of {(10**5000).bit_length()} "
                                                  "bits)", "small": 7}),
    "cyclic dict": ({"d": cyclic_dict()}, {"d": {"name": "loop", "self": "(a cycle)"}}),
    "cyclic list": ({"l": cyclic_list()}, {"l": ["loop", "(a cycle)"]}),
    "keys not text": ({1: "a", (1, 2): "b", None: "c"}, {"1": "a", "(1, 2)": "b", "None": "c"}),
    "shared, not a cycle": ({"a": [SHARED, SHARED], "b": Thing()},
                            {"a": [["x"], ["x"]], "b": "Thing()"}),
    "dict whose items raise": ({"m": ItemsRaise(a=1)},
                               {"m": "(a ItemsRaise that cannot be shown)"}),
    "keys one text": ({1: "from 1", "1": "from '1'"}, {"1": "from 1", "1 (again)": "from '1'"}),
    "surrogate and nan": ({"p": "bad \udc80 name", "x": float("nan")},
                          {"p": "bad \\udc80 name", "x": "nan"}),
}


def raising(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    raise ToolFailure(NOPE, detail=RAISED["detail"])


def raising_undeclared(arguments: Mapping[str, Any], context: ToolExecutionContext) -> (
    ToolOutput
):
    raise ToolFailure("tool.not_found.undeclared", detail=RAISED["detail"])


def raising_huge_text(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    raise ValueError("x" * 5_000_000)


#: What the next fx.raises call raises as its detail (set by each test).
RAISED: dict[str, Any] = {}


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    spec = {"input_schema": SCHEMA, "output_schema": OUT}
    tools = [
        Tool(make_spec(name="fx.raises", **spec), call=raising, reasons=(Reason(NOPE, MESSAGE),)),
        Tool(make_spec(name="fx.undeclared", **spec), call=raising_undeclared),
        Tool(make_spec(name="fx.huge_text", **spec), call=raising_huge_text),
    ]
    with Harness.over({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path / "data") as h:
        yield h


def failed_row(h: Harness, name: str, code: str, message: str) -> InvocationRecord:
    """The one call's outcome is ``code`` with its static ``message``, on its one failed row,
    whose detail is JSON within the bound."""
    outcome = h.invoke(name)
    assert outcome.failure is not None, outcome.content
    assert (outcome.failure.reason_code, outcome.content) == (code, message)
    (row,) = h.host.pipeline.invocations.list()
    assert (row.id, row.state, row.reason_code) == (outcome.invocation_id,
                                                    InvocationState.FAILED, code)
    assert len(canonical_json(row.failure_detail)) <= MOST_BYTES
    return row


@pytest.mark.parametrize("kind", DETAILS)
def test_a_declared_failure_is_stored_on_its_row_whatever_its_detail_holds(
    harness: Harness, kind: str,
) -> None:
    RAISED["detail"], stored = DETAILS[kind]
    row = failed_row(harness, "fx.raises", NOPE, MESSAGE)
    assert row.failure_detail == stored


def test_an_undeclared_code_with_such_a_detail_is_internal_on_its_row(harness: Harness) -> None:
    RAISED["detail"] = {"b": b"raw", "d": cyclic_dict()}
    row = failed_row(harness, "fx.undeclared", host_reasons.INTERNAL_UNDECLARED,
                     "The tool failed unexpectedly.")
    assert row.failure_detail == {"reason_code": "tool.not_found.undeclared", "detail": {
        "b": "b'raw'", "d": {"name": "loop", "self": "(a cycle)"}}}


def test_a_detail_nested_past_the_depth_bound_is_cut_there(harness: Harness) -> None:
    RAISED["detail"] = {"deep": nested(5000)}  # past any recursion limit
    row = failed_row(harness, "fx.raises", NOPE, MESSAGE)
    value = (row.failure_detail or {})["deep"]
    levels = 0
    while isinstance(value, list):
        (value,), levels = value, levels + 1
    # The detail itself is the first level.
    assert (levels, value) == (MAX_ARGUMENT_DEPTH - 1, f"(nested deeper than {MAX_ARGUMENT_DEPTH} "
                                                   "levels)")


def test_a_huge_text_in_a_detail_is_cut_saying_how_long_it_was(harness: Harness) -> None:
    RAISED["detail"] = {"h": "y" * 20_000_000}
    row = failed_row(harness, "fx.raises", NOPE, MESSAGE)
    kept = (row.failure_detail or {})["h"]
    assert kept.startswith("y" * 1000) and kept.endswith("y… (20000000 characters)")
    assert len(kept) <= MAX_DETAIL_CHARS + len("… (20000000 characters)")


def test_many_entries_are_cut_saying_how_many_were_left_out(harness: Harness) -> None:
    RAISED["detail"] = {"items": [str(i) for i in range(1_000_000)],
                        **{f"k{i}": i for i in range(100_000)}}
    row = failed_row(harness, "fx.raises", NOPE, MESSAGE)
    detail = row.failure_detail or {}
    items = detail["items"]
    assert items[:3] == ["0", "1", "2"]
    assert items[-1] == f"… ({1_000_000 - len(items) + 1} more items)"
    assert detail["…"] == f"({100_001 - len(detail) + 1} more entries)"


def test_an_exceptions_huge_text_is_cut_in_its_detail(harness: Harness) -> None:
    row = failed_row(harness, "fx.huge_text", host_reasons.INTERNAL_UNEXPECTED,
                     "The tool failed unexpectedly.")
    detail = row.failure_detail or {}
    assert detail["exception"] == "ValueError"
    assert detail["error"].endswith("… (5000000 characters)")
    assert detail["error"].startswith("x" * 1000)


def test_a_small_json_detail_is_stored_as_it_was(harness: Harness) -> None:
    RAISED["detail"] = {"path": "/tmp/x", "offset": 3, "nested": {"ok": [1, 2.5, None, True]}}
    row = failed_row(harness, "fx.raises", NOPE, MESSAGE)
    assert row.failure_detail == RAISED["detail"]
