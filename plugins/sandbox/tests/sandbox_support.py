"""What the sandbox tests share: the plugin under test, the policy that lets a call run
without an approval pause, and the call helper's type."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from toolhost import Outcome
from toolhost_sandbox import plugin

NAME = "sandbox.run_command"
PLUGINS: Mapping[str, object] = {"toolhost-sandbox": plugin}
#: The default policy pauses every call of this tool for approval (CODE_EXECUTION/HIGH). The
#: behaviour tests allow it so a call runs at once; test_sandbox_approval.py keeps the default.
ALLOW = {"TOOLHOST_POLICY": '{"CODE_EXECUTION/HIGH": "allow"}'}
#: A loose bound for "ends bounded": never a timing assertion, only "did not hang".
BOUND_S = 30.0


def pause(seconds: float) -> None:
    threading.Event().wait(seconds)


def wait_for(path: Path) -> bool:
    """Whether ``path`` exists within ``BOUND_S`` (a command running in the sandbox made it)."""
    for _ in range(int(BOUND_S / 0.05)):
        if path.exists():
            return True
        pause(0.05)
    return path.exists()


class Call(Protocol):
    def __call__(self, command: str, timeout_s: int = ..., /) -> Outcome: ...


def structured(outcome: Outcome) -> dict[str, Any]:
    assert outcome.failure is None, outcome.failure
    assert outcome.structured is not None
    return dict(outcome.structured)


def processes_with(marker: str) -> list[int]:
    """The pids whose command line holds ``marker``: what a call left running."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found
