"""The default policy: every call pauses for approval (CODE_EXECUTION/HIGH), and the approved
call runs in a fresh workspace, since the run's workspace is discarded when it pauses."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from sandbox_support import NAME, structured
from toolhost.testing import Harness


@pytest.fixture
def toolhost_settings() -> Mapping[str, str]:
    return {}  # the default policy


def test_every_call_pauses_and_the_approved_call_gets_an_empty_workspace(
    toolhost_host: Harness, isolation: None,
) -> None:
    run = toolhost_host.start_run()
    run.workspace.write("notes.md", b"written before the pause")
    paused = toolhost_host.call(NAME, {"command": "echo ran; ls -A"}, run=run)
    assert paused.paused and paused.invocation_id is not None
    assert toolhost_host.record(paused.invocation_id).state.value == "awaiting_approval"
    done = toolhost_host.approve(paused.invocation_id)
    # notes.md is gone: the workspace was discarded at the pause (D87), as the README says.
    assert structured(done)["stdout"] == "ran\n"
    toolhost_host.end_run(run)
