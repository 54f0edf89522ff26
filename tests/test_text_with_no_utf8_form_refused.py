"""Text with no UTF-8 form (a lone surrogate: what ``os.environ`` gives for a byte that is not
UTF-8) is no JSON (D393): in a typed tool's default, Literal, Enum, ``Doc`` or ``Pattern`` it is
refused where it is written, naming it; in a hand-written schema registration's step 5 points
at it. Before, it passed both, and every command died with UnicodeEncodeError from the
validator cache's key: the whole host, not just that plugin."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Literal

import pytest
from installed import install_fake_plugin
from test_cli import assert_no_traceback, toolhost
from test_typed_tools import SAFE

from toolhost import Doc, Pattern, tool

LONE = "/srv/caf\udce9"
NO_UTF8 = r"has no UTF-8 form \(a lone surrogate"


def _made(hint: Any, default: Any) -> Any:
    def probe(x: Any = default) -> str:
        """Probe."""
        return ""

    probe.__annotations__ = {"x": hint, "return": str}
    return tool("text.probe", "1.0.0", **SAFE)(probe)


class Root(enum.Enum):
    SRV = LONE


@pytest.mark.parametrize(("hint", "default", "expected"), [
    (str, LONE, r"probe\(x\): the default '/srv/caf\\udce9' " + NO_UTF8),
    (list[str], ("ok", LONE), r"probe\(x\): the default '/srv/caf\\udce9' "),
    (str | None, LONE, r"probe\(x\): the default "),
    (Literal["ok", LONE], "ok", r"probe\(x\): the value '/srv/caf\\udce9' " + NO_UTF8),
    (Root, Root.SRV, r"probe\(x\): the value '/srv/caf\\udce9' "),
])
def test_a_typed_tool_with_such_text_is_a_type_error_naming_the_parameter(
        hint: Any, default: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=expected + r".*JSON cannot carry it"):
        _made(hint, default)


@pytest.mark.parametrize("marker", [lambda: Doc(LONE), lambda: Pattern(LONE)])
def test_a_marker_with_such_text_fails_when_it_is_made(marker: Any) -> None:
    with pytest.raises(ValueError, match=NO_UTF8):
        marker()


PLUGIN = '''
from toolhost import (hookimpl, Domain, Tool, ToolSpec, SideEffect, Risk, Idempotency, Trust)

ROOT = {"type": "string", "default": "/srv/caf\\udce9"}
SCHEMA = {"type": "object", "properties": {"root": ROOT}, "required": [],
          "additionalProperties": False}
OUT = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
SPEC = ToolSpec.builtin(
    "rooted.show", "1.0.0", description="Shows the root.", input_schema=SCHEMA,
    output_schema=OUT, side_effect=SideEffect.NONE, risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL, required_scopes=(),
    timeout_s=2, maximum_output_bytes=4096)

@hookimpl
def toolhost_domains():
    return [Domain("rooted")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=lambda arguments, context: None)]
'''


@pytest.mark.parametrize("command", ["check", "tools"])
def test_a_hand_written_schema_with_such_text_is_refused_at_step_5(tmp_path: Path,
                                                                   command: str) -> None:
    install_fake_plugin(tmp_path / "site", "fake-rooted", "fake_rooted", PLUGIN)
    result = toolhost(command, env={"TOOLHOST_PLUGINS": "fake-rooted"}, site=tmp_path / "site")
    assert_no_traceback(result)
    assert (result.returncode, result.stdout) == (1, "")
    assert "fake-rooted" in result.stderr and "rooted.show" in result.stderr
    assert "input_schema: /properties/root/default: is not JSON" in result.stderr
    assert "text with no lone surrogate" in result.stderr
