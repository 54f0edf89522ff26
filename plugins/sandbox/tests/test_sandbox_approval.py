"""The default policy: every call needs approval (CODE_EXECUTION/HIGH). A call left waiting
pauses its run, whose workspace is discarded: the approved call runs in a fresh workspace,
which the run then goes on in. An approval answered within the call (``hold``) is no pause."""

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
    # notes.md is gone: the workspace was discarded at the pause, as the README says.
    assert structured(done)["stdout"] == "ran\n"
    toolhost_host.end_run(run)


def test_an_approval_within_the_call_runs_in_the_runs_workspace_and_leaves_its_files(
    toolhost_host: Harness, isolation: None,
) -> None:
    run = toolhost_host.start_run()
    run.workspace.write("gen.sh", b"echo made > out.txt\n")
    held = toolhost_host.call(NAME, {"command": "sh gen.sh; ls"}, run=run, hold=True)
    assert held.paused and held.invocation_id is not None
    done = toolhost_host.approve(held.invocation_id, "person", run=run)
    assert structured(done)["stdout"] == "gen.sh\nout.txt\n"
    assert run.workspace.read("out.txt") == b"made\n"
    assert run.workspace.provenance("out.txt").value == "SANDBOX_WRITTEN"
    toolhost_host.end_run(run)
