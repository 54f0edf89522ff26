"""The host's synchronous entries (``Host.invoke_sync``, ``approve_sync``, ``recover``, the
CLI's call) end at the call's deadline even when a tool's ``asyncio.to_thread`` work is stuck:
``asyncio.run`` waited at its end for its default executor's threads, so a media reference read
stuck for 6 s held a call whose deadline was 1 s for 6 s (the media review)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conftest import make_plugin, make_spec, make_tool

from toolhost import ToolOutput
from toolhost.testing import host_for

RELEASE = threading.Event()


async def stuck_read(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    # A blocking read no cancellation reaches (a slow disk, a hung network filesystem).
    await asyncio.to_thread(RELEASE.wait, 30)
    return ToolOutput(structured={"echo": "late"}, content="late")


def test_a_call_whose_thread_is_stuck_ends_at_its_deadline(tmp_path: Path) -> None:
    tool = make_tool(make_spec(name="fx.stuck", timeout_s=0.5), call=stuck_read)
    with host_for({"fx-dist": make_plugin(tools=[tool])}, data_dir=tmp_path) as host:
        began = time.monotonic()
        try:
            outcome = host.invoke_sync("fx.stuck", {"x": "a"})
        finally:
            took = time.monotonic() - began
            RELEASE.set()
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.timeout.deadline"
    assert took < 10, f"{took:.1f} s for a 0.5 s deadline"  # a loose bound: it was 30 s
