"""A call's workspace and artifact writer stop working once the call has ended.

A sync body abandoned at its deadline (the model told ``tool.timeout.deadline``, retryable),
or a thread a body started, used to go on writing the run's workspace beside the call's retry
and publishing EXPORT files no answer links. Now every use after the end, reads included, is
refused with ``WorkspaceUnavailable`` ("the call has ended"), and nothing reaches the run.

A real host (SQLite records and artifacts, the run's workspace on disk) through the
``Harness``; the late uses wait on events the test sets once the call's outcome is in, never
on sleeps racing the pipeline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from conftest import make_plugin, make_spec

from toolhost import (
    ArtifactOrigin,
    Idempotency,
    Tool,
    ToolExecutionContext,
    ToolOutput,
    Trust,
    WorkspaceUnavailable,
)
from toolhost._model.runs import Run
from toolhost._model.workspace import CallScope, call_workspace
from toolhost._testing.workspaces import ForwardingWorkspace
from toolhost.testing import Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}
DONE = ToolOutput(structured={"echo": "done"}, content="done")
#: How long a test waits for the late body's thread, at most (it never sleeps on purpose).
WAIT_S = 30


class Late:
    """Uses a call's handles once ``go`` is set, each use's outcome in ``used`` (its name, and
    the exception it raised or None), then sets ``done``. A stream is entered and written
    while the call runs and committed only after the end."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.done = threading.Event()
        self.used: dict[str, BaseException | None] = {}

    def use(self, context: ToolExecutionContext) -> None:
        try:
            with context.artifacts.stream(
                    origin=ArtifactOrigin.MODEL_OUTPUT, name="late.png", media_type="image/png",
                    trust=Trust.INTERNAL_TOOL, max_bytes=1024) as stream:
                stream.write(b"\x89PNG")
                self.go.wait(WAIT_S)
                self._try("commit", stream.commit)
        finally:
            ws, artifacts = context.workspace, context.artifacts
            self._try("write", lambda: ws.write("late.txt", b"late"))
            self._try("read", lambda: ws.read("early.txt"))
            self._try("read_chunks", lambda: ws.read_chunks("early.txt"))
            self._try("listdir", lambda: ws.listdir())
            self._try("provenance", lambda: ws.provenance("early.txt"))
            self._try("export", lambda: artifacts.write(
                origin=ArtifactOrigin.EXPORT, name="late.bin",
                media_type="application/octet-stream", content=b"late",
                trust=Trust.INTERNAL_TOOL))
            self._try("stream", lambda: artifacts.stream(
                origin=ArtifactOrigin.EXPORT, name="late2.bin",
                media_type="application/octet-stream", trust=Trust.INTERNAL_TOOL,
                max_bytes=16))
            self.done.set()

    def _try(self, name: str, use: Callable[[], object]) -> None:
        try:
            use()
        except BaseException as exc:  # recorded: the test asserts what each use raised
            self.used[name] = exc
        else:
            self.used[name] = None

    def assert_all_refused(self) -> None:
        self.go.set()
        assert self.done.wait(WAIT_S), "the late use never finished"
        assert set(self.used) == {"commit", "write", "read", "read_chunks", "listdir",
                                  "provenance", "export", "stream"}
        for name, raised in self.used.items():
            # Before: each went through (``None``): files written, artifacts published.
            assert isinstance(raised, WorkspaceUnavailable), (name, raised)
            assert raised.reason == "the call has ended", (name, raised.reason)


def harness(body: Callable[[Mapping[str, Any], ToolExecutionContext], ToolOutput],
            timeout_s: float = 30) -> Harness:
    spec = make_spec(name="fx.late", input_schema=SCHEMA, output_schema=OUT,
                     timeout_s=timeout_s, idempotency=Idempotency.READ_ONLY)
    return Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=body)])})


def assert_nothing_reached_the_run(h: Harness, run: Run) -> None:
    assert [entry.path for entry in run.workspace.listdir().entries] == ["early.txt"]
    assert h.host.pipeline.artifacts.list_run(run.id) == []
    assert h.host.attachments(run) == ()


def test_a_timed_out_body_writes_and_publishes_nothing_after_its_deadline() -> None:
    late = Late()

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        context.workspace.write("early.txt", b"while the call ran")
        late.use(context)  # past its deadline: it never looks at its cancellation
        return DONE

    # Long enough for the body's first write (the run's first use of its workspace).
    with harness(body, timeout_s=2) as h:
        run = h.start_run()
        outcome = h.call("fx.late", {}, run=run)
        assert outcome.failure is not None
        assert (outcome.failure.reason_code, outcome.failure.retryable) == (
            "tool.timeout.deadline", True)
        late.assert_all_refused()
        assert_nothing_reached_the_run(h, run)


def test_a_thread_a_body_started_is_refused_once_the_call_answered() -> None:
    late = Late()

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        context.workspace.write("early.txt", b"while the call ran")
        threading.Thread(target=late.use, args=(context,), daemon=True).start()
        return DONE

    with harness(body) as h:
        run = h.start_run()
        outcome = h.call("fx.late", {}, run=run)
        assert outcome.ok and outcome.attachments == ()
        late.assert_all_refused()
        assert_nothing_reached_the_run(h, run)


def test_a_call_publishes_and_writes_while_it_runs() -> None:
    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        context.workspace.write("made.txt", b"made")
        assert context.workspace.read("made.txt") == b"made"
        with context.artifacts.stream(origin=ArtifactOrigin.EXPORT, name="made.bin",
                                      media_type="application/octet-stream",
                                      trust=Trust.INTERNAL_TOOL, max_bytes=16) as stream:
            stream.write(b"made")
            stream.commit()
        return DONE

    with harness(body) as h:
        run = h.start_run()
        outcome = h.call("fx.late", {}, run=run)
        assert outcome.ok
        assert [ref["name"] for ref in outcome.attachments] == ["made.bin"]
        assert run.workspace.read("made.txt") == b"made"


def test_a_calls_workspace_offers_a_sandbox_only_over_one_that_does() -> None:
    # The sandbox asks for ``sandbox_root`` and ``usage`` and fails closed without them.
    with Harness.over({}) as h:
        run = h.start_run()
        scope = CallScope()
        host_view = call_workspace(run.workspace, scope)
        fake_view = call_workspace(ForwardingWorkspace(run.workspace), scope)
        assert callable(getattr(host_view, "sandbox_root", None))
        assert callable(getattr(host_view, "usage", None))
        assert getattr(fake_view, "sandbox_root", None) is None
        assert getattr(fake_view, "usage", None) is None
        assert host_view.usage(max_bytes=1 << 20, max_entries=10, max_depth=4).complete
        scope.end()
        for use in (lambda: host_view.usage(max_bytes=1, max_entries=1, max_depth=1),
                    host_view.sandbox_root):
            try:
                use()
            except WorkspaceUnavailable as exc:
                assert exc.reason == "the call has ended"
            else:
                raise AssertionError("a sandbox was given a call's ended workspace")


def test_a_context_kept_from_an_ended_call_fails_the_call_that_uses_it_unretryably() -> None:
    kept: list[ToolExecutionContext] = []

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        if not kept:
            kept.append(context)
            return DONE
        kept[0].workspace.write("stale.txt", b"through the first call's handle")
        return DONE

    with harness(body) as h:
        run = h.start_run()
        assert h.call("fx.late", {}, run=run).ok
        outcome = h.call("fx.late", {}, run=run)
        # Before: the write went through; refused as a workspace, it would read "try again".
        assert outcome.failure is not None
        assert (outcome.failure.reason_code, outcome.failure.retryable) == (
            "tool.internal.unexpected", False)
        assert h.record(outcome.invocation_id).failure_detail == {
            "exception": "CallEnded", "error": "the call has ended"}
        assert run.workspace.listdir().entries == ()
