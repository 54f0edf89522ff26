"""`toolhost demo` ("What is 17 multiplied by 23?" through math.calculate), on exact bytes, with
events reported as they happen."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conftest import make_plugin, make_spec, make_tool
from test_cli import toolhost

from toolhost import ToolOutput
from toolhost._cli.demo import FinalAnswer, ScriptedModelProvider, run_demo
from toolhost._model.runs import ToolCall
from toolhost._testing.cli import run_toolhost
from toolhost.testing import host_for

EXPECTED = """\
run created: run-demo
user: What is 17 multiplied by 23?
model requests math.calculate {"expression": "17 * 23"}
tool executes: math.calculate@1.0.0 succeeded
tool result: 391
model answers: 17 multiplied by 23 is 391.
run finished
"""


def test_toolhost_demo_prints_the_run_exactly() -> None:
    result = toolhost("demo")
    assert (result.returncode, result.stdout, result.stderr) == (0, EXPECTED, "")


def test_events_are_emitted_before_the_tool_runs() -> None:
    emitted: list[str] = []
    seen_by_tool: list[list[str]] = []

    def build(services: Any) -> Any:
        def echo(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
            seen_by_tool.append(list(emitted))  # what had been printed when the tool ran
            return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

        return echo

    host = host_for({"fx-dist": make_plugin(tools=[make_tool(make_spec(), build=build)])})
    provider = ScriptedModelProvider([ToolCall("fx.echo", {"x": "hi"}), FinalAnswer("{result}!")])
    outcomes = run_demo(host, provider, emitted.append, question="Say hi.")
    assert [o.content for o in outcomes] == ["hi"]
    assert seen_by_tool == [["run created: run-demo", "user: Say hi.",
                             'model requests fx.echo {"x": "hi"}']]
    assert emitted[-2:] == ["model answers: hi!", "run finished"]


def test_the_demo_leaves_no_run_live(tmp_path: Path) -> None:
    # Regression: `toolhost runs list` showed run-demo after the demo said "run finished".
    shown = run_toolhost("demo", data_dir=tmp_path)
    assert shown.returncode == 0, shown.stderr
    live = run_toolhost("runs", "list", "--json", data_dir=tmp_path)
    assert (live.returncode, json.loads(live.stdout)) == (0, [])
