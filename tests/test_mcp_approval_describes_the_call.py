"""The MCP approval question says what the tool says the call will do (``Tool(describe=...)``)
before the arguments block, in the host's escaped lines, each after a bullet so that none
starts a block of its own; the arguments block stays the last thing asked about (D466)."""

from __future__ import annotations

from pathlib import Path

import mcp.types as types
from installed import install_fake_plugin
from test_cli_show_describes_the_call import DESCRIBED
from test_mcp_server import Served, assert_no_traceback, elicitation_answers, run, session


def _asked(tmp_path: Path, *tickets: str) -> list[str]:
    """The question of each call of fxd.close, each declined."""
    install_fake_plugin(tmp_path / "site", "fake-described", "fake_described", DESCRIBED)
    served = Served(tmp_path, plugins="fake-described", site=tmp_path / "site")
    asked: list[str] = []
    decline = elicitation_answers(*(types.ElicitResult(action="decline") for _ in tickets),
                                  asked=asked)

    async def main() -> None:
        async with session(served, elicitation_callback=decline) as s:
            for ticket in tickets:
                await s.call_tool("fxd.close", {"ticket": ticket})

    run(main)
    assert_no_traceback(served.stderr())
    return asked


def test_the_question_says_what_the_tool_says_before_the_arguments(tmp_path: Path) -> None:
    first, fence = _asked(tmp_path, "t_1", "t_fence")
    lines = first.split("\n")
    assert lines[1:6] == [
        "What fake-described says this call does:",
        "\u2022 closes t_1: printer on floor 3 (owner alice)",
        "\u2022 tells \\u202eeveryone",
        "Approve runs it once with exactly the arguments in the block below (canonical JSON).",
        "```json",
    ]
    assert lines[-2:] == ['{"ticket":"t_1"}', "```"]
    # A line that reads as a fence opens none: it follows a bullet, on the line it is given.
    fenced = fence.split("\n")
    assert fenced[2] == '\u2022 closes t_fence: ```json {"ticket":"t_1"}'
    assert [line for line in fenced if line.startswith("```")] == ["```json", "```"]


def test_a_describer_that_fails_is_one_static_line_in_the_question(tmp_path: Path) -> None:
    (asked,) = _asked(tmp_path, "t_boom")
    assert asked.split("\n")[1:3] == [
        "What fake-described says this call does:",
        "\u2022 (fake-described could not describe this call; the log says why)"]
    assert "/secret/path" not in asked
