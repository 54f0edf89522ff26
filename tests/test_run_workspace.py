"""A run's workspace across an approval (D218-D220, D222): an approval answered within the call is
not a pause; a call left waiting pauses the run (its workspace is discarded); a paused call
approved anywhere on the host runs in the run's next workspace, which the run then goes on
in; provenance follows it; the run's deadline is on the row and bounds the approved call.

The adapter's tests open the same run from two ``RunWorkspaces`` (as two processes of one
host do): each holds its own descriptors and its own ``flock``s, exactly as separate
processes would."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import make_plugin, make_spec, make_tool, nothing_left

from toolhost import (
    Idempotency,
    OutcomeStatus,
    Provenance,
    Risk,
    SideEffect,
    ToolExecutionContext,
    ToolOutput,
    Trust,
    UserWords,
    WorkspaceNotFound,
    WorkspaceUnavailable,
)
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._model import host_reasons as core_messages
from toolhost._pipeline.policy import policy_from_settings
from toolhost.testing import DEFAULT_INSTANT, Host, host_for

# ---------------------------------------------------------------------------- the adapter


def _generations(root: Path, run_id: str) -> list[str]:
    run_dir = root / run_id
    return sorted(p.name for p in run_dir.iterdir() if p.is_dir()) if run_dir.exists() else []


def test_two_processes_of_a_host_share_the_runs_generation(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    first, second = RunWorkspaces(root), RunWorkspaces(root)
    ours = first.start("run-1")[0]
    ours.write("a.md", b"mine")
    theirs = second.for_approval("run-1")  # the run is live: its workspace, not a new one
    assert theirs.read("a.md") == b"mine"
    # Provenance follows the workspace: what one process stamped, the other reads.
    assert theirs.provenance("a.md") is Provenance.TOOL_WRITTEN
    theirs.write("b.md", b"theirs", provenance=Provenance.SANDBOX_WRITTEN)
    theirs.close()
    assert ours.provenance("b.md") is Provenance.SANDBOX_WRITTEN
    assert len(_generations(root, "run-1")) == 1
    ours.end()
    assert not (root / "run-1").exists()


def test_an_ended_runs_workspace_is_never_made_again(tmp_path: Path) -> None:
    # Issue #26 review: a sync tool body that ignored its cancellation wrote after its MCP
    # session ended, claimed the run a fresh generation, registered it live again and left
    # it (with its descriptors) until the server stopped.
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1")[0]
    ours.write("a.md", b"before the end")
    ours.end()
    with pytest.raises(WorkspaceUnavailable):
        ours.write("late.md", b"after the end")
    with pytest.raises(WorkspaceUnavailable):
        ours.read("a.md")
    assert not (root / "run-1").exists()


def test_a_stamp_holds_only_while_the_file_is_the_one_stamped(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1")[0]
    ours.write("a.md", b"mine")
    (generation,) = _generations(root, "run-1")
    (root / "run-1" / generation / "a.md").write_bytes(b"an outsider's")
    theirs = RunWorkspaces(root).for_approval("run-1")
    assert theirs.provenance("a.md") is Provenance.UNKNOWN
    assert ours.provenance("a.md") is Provenance.UNKNOWN
    theirs.close()
    ours.end()


def test_a_pause_discards_the_generation_and_the_next_use_starts_a_fresh_one(
    tmp_path: Path,
) -> None:
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1")[0]
    ours.write("a.md", b"before the pause")
    (before,) = _generations(root, "run-1")
    ours.discard()
    assert _generations(root, "run-1") == []
    with pytest.raises(WorkspaceNotFound):
        ours.read("a.md")
    (after,) = _generations(root, "run-1")
    assert after != before
    ours.end()


def test_a_generation_another_process_holds_outlives_the_pause_until_it_lets_go(
    tmp_path: Path,
) -> None:
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1")[0]
    ours.write("a.md", b"x")
    theirs = RunWorkspaces(root).for_approval("run-1")
    assert theirs.read("a.md") == b"x"  # they hold it now
    ours.discard()  # the run pauses here: the name goes at once, the directory stays
    (held,) = _generations(root, "run-1")
    assert theirs.read("a.md") == b"x"
    theirs.close()  # the last holder of a generation that is no longer the run's removes it
    assert held not in _generations(root, "run-1")
    ours.end()
    assert not (root / "run-1").exists()


def test_an_approval_for_a_run_not_live_here_gets_a_workspace_of_its_own(
    tmp_path: Path,
) -> None:
    root = tmp_path / "workspaces"
    alone = RunWorkspaces(root).for_approval("gone-run")
    alone.write("out.txt", b"x")
    path = alone.root
    alone.close()
    assert not path.exists()
    assert not (root / "gone-run").exists()


def test_an_operators_directory_is_the_runs_workspace_through_a_pause(tmp_path: Path) -> None:
    directory = tmp_path / "mine"
    directory.mkdir()
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1", directory=directory)[0]
    ours.write("a.md", b"kept")
    ours.discard()
    assert (directory / "a.md").read_bytes() == b"kept"
    approved = RunWorkspaces(root).for_approval("run-1")
    assert approved.read("a.md") == b"kept"
    approved.close()
    ours.end()
    assert (directory / "a.md").read_bytes() == b"kept"


def test_live_runs_are_listed_and_an_ended_one_is_not(tmp_path: Path) -> None:
    registry = RunWorkspaces(tmp_path / "workspaces")
    one = registry.start("r1")[0]
    one.write("x", b"1")
    registry.start("r2", directory=tmp_path)
    assert registry.live() == [("r1", None, True), ("r2", tmp_path, False)]
    assert registry.end("r1") and not registry.end("r1")
    assert [r[0] for r in registry.live()] == ["r2"]


# ---------------------------------------------------------------------------- the pipeline


class SettableClock:
    """A clock a test moves."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def now(self) -> dt.datetime:
        return self.at


#: Every body run, so a test can tell that an approval did not run one.
RAN: list[str] = []

PATH_IN = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 64}},
           "required": ["path"], "additionalProperties": False}
TEXT_OUT = {"type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": False}


def _touch(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """Writes ``path``; answers with what the workspace held before (its listing)."""
    RAN.append(arguments["path"])
    seen = ",".join(e.path for e in context.workspace.listdir().entries)
    context.workspace.write(arguments["path"], b"x")
    return ToolOutput(structured={"text": seen}, content=seen)


def _look(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    listing = ",".join(e.path for e in context.workspace.listdir().entries)
    return ToolOutput(structured={"text": listing}, content=listing)


PLUGIN = make_plugin(("fx",), [
    # WORKSPACE_WRITE / HIGH: the default policy asks for an approval.
    make_tool(make_spec(name="fx.gated_write", input_schema=PATH_IN, output_schema=TEXT_OUT,
                        side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.HIGH,
                        idempotency=Idempotency.IDEMPOTENT, allow_parallel=False),
              call=_touch),
    make_tool(make_spec(name="fx.write", input_schema=PATH_IN, output_schema=TEXT_OUT,
                        side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                        idempotency=Idempotency.IDEMPOTENT, allow_parallel=False),
              call=_touch),
    make_tool(make_spec(name="fx.look", output_schema=TEXT_OUT,
                        input_schema={"type": "object", "properties": {},
                                      "additionalProperties": False},
                        side_effect=SideEffect.WORKSPACE_READ, output_trust=Trust.INTERNAL_TOOL),
              call=_look),
])


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock(DEFAULT_INSTANT)


@pytest.fixture
def host(tmp_path: Path, clock: SettableClock) -> Iterator[Host]:
    RAN.clear()
    with host_for({"toolhost-fx": PLUGIN}, clock=clock, data_dir=tmp_path / "data") as made:
        yield made


def test_an_approval_answered_within_the_call_keeps_the_runs_workspace(host: Host) -> None:
    async def journey() -> list[Any]:
        run = host.start_run()
        await host.invoke("fx.write", {"path": "first.txt"}, run=run)
        paused = await host.pipeline.invoke(run, "fx.gated_write", {"path": "second.txt"},
                                            hold=True)
        assert paused.status is OutcomeStatus.AWAITING_APPROVAL
        assert paused.invocation_id is not None
        approved = await host.pipeline.approve(paused.invocation_id, "person", run=run)
        after = await host.invoke("fx.look", {}, run=run)
        host.end_run(run)
        return [approved, after]

    approved, after = asyncio.run(journey())
    assert approved.ok and approved.content == "first.txt"  # the approved call saw it
    assert after.content == "first.txt,second.txt"


def test_a_call_left_waiting_pauses_the_run_and_its_approval_becomes_the_runs_workspace(
    host: Host, tmp_path: Path, clock: SettableClock,
) -> None:
    async def before_approval() -> Any:
        run = host.start_run()
        await host.invoke("fx.write", {"path": "before.txt"}, run=run)
        paused = await host.invoke("fx.gated_write", {"path": "made.txt"}, run=run)
        return run, paused

    run, paused = asyncio.run(before_approval())
    assert paused.status is OutcomeStatus.AWAITING_APPROVAL
    # The operator approves from another process of the host (its own Host on the data dir).
    with host_for({"toolhost-fx": PLUGIN}, clock=clock, data_dir=tmp_path / "data") as other:
        approved = other.approve_sync(paused.invocation_id, "operator")
    assert approved.ok and approved.content == ""  # the pause discarded before.txt
    after = asyncio.run(host.invoke("fx.look", {}, run=run))
    assert after.content == "made.txt"  # the run goes on in the approved call's workspace
    host.end_run(run)
    assert not (tmp_path / "data" / "workspaces" / run.id).exists()


def test_a_call_approved_after_its_runs_deadline_ends_without_running(
    host: Host, clock: SettableClock,
) -> None:
    run = host.start_run(timeout_s=60)
    paused = asyncio.run(host.invoke("fx.gated_write", {"path": "late.txt"}, run=run))
    assert paused.invocation_id is not None
    assert host.pipeline.row(paused.invocation_id).run_deadline == (
        DEFAULT_INSTANT + dt.timedelta(seconds=60))
    clock.at = DEFAULT_INSTANT + dt.timedelta(seconds=61)
    late = host.approve_sync(paused.invocation_id, "operator")
    assert late.failure is not None
    assert (late.failure.reason_code, late.failure.retryable) == (
        core_messages.RUN_DEADLINE_PASSED, False)
    assert late.content == core_messages.MESSAGES[core_messages.RUN_DEADLINE_PASSED]
    assert RAN == []
    row = host.pipeline.row(paused.invocation_id)
    assert (row.state.value, row.approver) == ("failed", "operator")
    # A second approval runs nothing either, and says what stands.
    assert host.approve_sync(paused.invocation_id, "operator").failure is not None
    assert RAN == []
    host.end_run(run)


def test_an_approval_within_the_deadline_is_bounded_by_what_is_left_of_it(
    host: Host, clock: SettableClock,
) -> None:
    run = host.start_run(timeout_s=60)
    paused = asyncio.run(host.invoke("fx.gated_write", {"path": "ok.txt"}, run=run))
    clock.at = DEFAULT_INSTANT + dt.timedelta(seconds=30)
    assert host.approve_sync(str(paused.invocation_id), "operator").ok
    assert RAN == ["ok.txt"]
    host.end_run(run)


def test_a_named_run_goes_on_across_host_processes_until_it_ends(
    tmp_path: Path, clock: SettableClock,
) -> None:
    for n in range(2):  # two commands of the run, each its own host (as toolhost call is)
        with host_for({"toolhost-fx": PLUGIN}, clock=clock, data_dir=tmp_path / "d") as h:
            run = h.start_run(run_id="named")
            asyncio.run(h.invoke("fx.write", {"path": f"f{n}.txt"}, run=run))
            h.run_outcome(run)
    with host_for({"toolhost-fx": PLUGIN}, clock=clock, data_dir=tmp_path / "d") as h:
        run = h.start_run(run_id="named")
        assert asyncio.run(h.invoke("fx.look", {}, run=run)).content == "f0.txt,f1.txt"
        h.end_run(run)
    assert not (tmp_path / "d" / "workspaces" / "named").exists()
    assert nothing_left(tmp_path / "d" / "workspaces")


# ---------------------------------------------------------------------------- review fixes


def test_an_operator_directory_is_recorded_absolute(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A relative --workspace kept as given would mean, for the next command of the run or an
    # approval, whatever directory that process happened to start in.
    (tmp_path / "mine").mkdir()
    (tmp_path / "elsewhere").mkdir()
    root = tmp_path / "workspaces"
    monkeypatch.chdir(tmp_path / "mine")
    RunWorkspaces(root).start("run-1", directory=Path("."))[0].write("a.md", b"x")
    monkeypatch.chdir(tmp_path / "elsewhere")
    approved = RunWorkspaces(root).for_approval("run-1")
    approved.write("b.md", b"y")
    approved.close()
    assert sorted(os.listdir(tmp_path / "mine")) == ["a.md", "b.md"]
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_pause_while_a_call_still_runs_here_names_no_workspace_for_the_run_at_once(
    tmp_path: Path,
) -> None:
    # The session's pause is deferred while one of its calls executes; an approval in another
    # process meanwhile must not run in the workspace the pause discards.
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1")[0]
    ours.write("before.txt", b"x")
    ours.pause()  # what Pipeline.pause does at once; the discard itself waits for the call
    approved = RunWorkspaces(root).for_approval("run-1")
    assert approved.listdir().entries == ()
    approved.write("approved.txt", b"y")
    approved.close()
    ours.discard()  # the last call here ended
    ours.refresh()
    assert [e.path for e in ours.listdir().entries] == ["approved.txt"]
    ours.end()


def test_a_claimed_generation_is_held_before_the_registry_lets_go(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    registry = RunWorkspaces(root)
    registry.start("run-1")
    generation, hold = registry.claim("run-1")
    assert hold is not None
    RunWorkspaces(root).drop("run-1")  # a pause elsewhere, just after the claim
    assert (root / "run-1" / generation).is_dir()  # held: its holder removes it
    os.close(hold)
    registry.let_go("run-1", generation)
    assert not (root / "run-1" / generation).exists()


def test_ending_a_run_removes_what_a_killed_process_held(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("run-1")[0]
    ours.write("a.txt", b"x")
    (orphan,) = _generations(root, "run-1")
    RunWorkspaces(root).drop("run-1")  # paused elsewhere while this "process" holds it...
    assert (root / "run-1" / orphan).is_dir()
    os.close(ours._hold)  # ...and then it is killed: its lock goes with its descriptors
    ours._hold = None
    registry = RunWorkspaces(root)
    assert registry.end("run-1")
    assert not (root / "run-1").exists()
    assert not registry.end("run-1")


def test_a_named_runs_deadline_cannot_be_put_off_by_a_later_command(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    first = DEFAULT_INSTANT + dt.timedelta(seconds=10)
    assert RunWorkspaces(root).start("r", deadline_at=first)[1] == first
    later = DEFAULT_INSTANT + dt.timedelta(seconds=1000)
    assert RunWorkspaces(root).start("r", deadline_at=later)[1] == first
    assert RunWorkspaces(root).start("r")[1] == first
    sooner = DEFAULT_INSTANT + dt.timedelta(seconds=5)
    assert RunWorkspaces(root).start("r", deadline_at=sooner)[1] == sooner


WORDS_IN = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 64}},
            "required": ["text"], "additionalProperties": False}
TURNS: list[str | None] = []


def _remember(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    TURNS.append(context.user_turn)
    return ToolOutput(structured={"text": arguments["text"]}, content=arguments["text"])


WORDS_PLUGIN = make_plugin(("fx",), [attrs.evolve(
    make_tool(make_spec(name="fx.remember", input_schema=WORDS_IN, output_schema=TEXT_OUT,
                        side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.HIGH,
                        idempotency=Idempotency.IDEMPOTENT, allow_parallel=False),
              call=_remember),
    user_words=UserWords("It asks to remember this.", arguments=("text",)))])


def test_a_words_call_the_policy_denies_is_denied_not_sent_for_words(tmp_path: Path) -> None:
    """Regression (D446): a call its deny cell denies ended ``needs_user`` (step 4 checked the
    person's words before step 5), which tells the model to ask the person for them."""
    policy = policy_from_settings({"TOOLHOST_POLICY": '{"WORKSPACE_WRITE/HIGH": "deny"}'})
    with host_for({"toolhost-fx": WORDS_PLUGIN}, data_dir=tmp_path / "d", policy=policy) as h:
        denied = h.invoke_sync("fx.remember", {"text": "x"}, run=h.start_run())
        assert denied.status is OutcomeStatus.DENIED and denied.invocation_id is not None
        row = h.row(denied.invocation_id)
        assert (row.state.value, row.user_turn) == ("denied", None)


def test_the_persons_words_go_with_a_call_approved_elsewhere(tmp_path: Path) -> None:
    TURNS.clear()
    with host_for({"toolhost-fx": WORDS_PLUGIN}, data_dir=tmp_path / "d") as h:
        refused = h.invoke_sync("fx.remember", {"text": "x"}, run=h.start_run())
        assert refused.failure is not None
        assert refused.failure.reason_code == core_messages.NEEDS_USER
        paused = h.invoke_sync("fx.remember", {"text": "my words"},
                               run=h.start_run(user_turn="my words"))
        assert paused.invocation_id is not None
    with host_for({"toolhost-fx": WORDS_PLUGIN}, data_dir=tmp_path / "d") as other:
        assert other.approve_sync(paused.invocation_id, "operator").ok
    assert TURNS == ["my words"]
