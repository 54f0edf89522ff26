"""The demonstration the spec asks for first: a run driven by a scripted fake model provider.

"What is 17 multiplied by 23?" → the model requests math.calculate {"expression": "17 * 23"}
→ the tool executes → 391. Every event is reported as it happens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from toolhost import Outcome
from toolhost._composition import Host, ToolCall

__all__ = [
    "DEMO_QUESTION",
    "FinalAnswer",
    "ScriptedModelProvider",
    "demo_provider",
    "run_demo",
]

DEMO_QUESTION = "What is 17 multiplied by 23?"


@attrs.frozen
class FinalAnswer:
    """The model's closing text. ``template`` may name ``{result}``: the last tool content."""

    template: str


Turn = ToolCall | FinalAnswer


class ScriptedModelProvider:
    """A fake model: returns its scripted turns in order, whatever it is shown."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self._turns: Iterator[Turn] = iter(turns)

    def next_turn(self, transcript: Sequence[dict[str, Any]]) -> Turn:
        try:
            return next(self._turns)
        except StopIteration:
            raise RuntimeError("the scripted model has no turn left") from None


def demo_provider() -> ScriptedModelProvider:
    """The demo's scripted model: math.calculate on ``17 * 23``, then the answer."""
    return ScriptedModelProvider(
        [
            ToolCall("math.calculate", {"expression": "17 * 23"}),
            FinalAnswer("17 multiplied by 23 is {result}."),
        ]
    )


def run_demo(
    host: Host,
    provider: ScriptedModelProvider,
    emit: Callable[[str], None],
    *,
    question: str = DEMO_QUESTION,
    run_id: str = "run-demo",
    max_steps: int = 8,
) -> list[Outcome]:
    """Drive one run to its final answer, emitting each event as one line."""
    emit(f"run created: {run_id}")
    transcript: list[dict[str, Any]] = [{"role": "user", "content": question}]
    emit(f"user: {question}")
    outcomes: list[Outcome] = []
    # Held by this command, as `toolhost call`'s own run is (D470): one a SIGKILL leaves is
    # ended by the next recovery, never listed as live for good.
    host.run_workspaces.own(run_id)
    run = host.start_run(run_id=run_id, user_turn=question)
    try:
        last = ""
        for _ in range(max_steps):
            turn = provider.next_turn(transcript)
            if isinstance(turn, FinalAnswer):
                answer = turn.template.replace("{result}", last)
                emit(f"model answers: {answer}")
                emit("run finished")
                return outcomes
            emit(f"model requests {turn.name} {json.dumps(turn.arguments, sort_keys=True)}")
            outcome = host.invoke_sync(turn.name, turn.arguments, version=turn.version, run=run)
            outcomes.append(outcome)
            emit(f"tool executes: {outcome.tool}@{outcome.version} {outcome.status.value}")
            emit(f"tool result: {outcome.content}")
            transcript.append({"role": "tool", "name": turn.name, "content": outcome.content})
            last = outcome.content
        emit("run stopped: step limit reached")
        return outcomes
    finally:
        # Finished or stopped, the run is over: it is not left live on this host.
        host.release_run(run)
