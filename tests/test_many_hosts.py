"""Three host processes on one PostgreSQL database behave as one (D187, D193; docs/operator.md,
"Running several hosts").

200 gated calls are paused in the shared record; approvals go to hosts picked at random, some
to two hosts at once; one host is killed in the middle of a call. Every call runs at most
once (each execution appends a line to a file of the call's own), exactly one approver acts
on a call approved twice, and the killed host's row is settled by another host.

Each host is a real process (``DRIVER``) over its own Host and pool, reading commands on
stdin (``approve ID``, ``recover``) and answering one JSON line each.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from pg_server import pg_database, pg_server
from test_pg_invocations import lease_backend, past_grace, session_ends

from toolhost import Idempotency, Risk, SideEffect, Tool, ToolOutput
from toolhost._model.invocations import InvocationState
from toolhost._model.settings import Settings
from toolhost._pipeline.policy import Policy, PolicyAction
from toolhost.testing import host_for

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

HERE = Path(__file__).resolve().parent
KEY = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"],
       "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}
CALLS = 200
TWICE = 30  # of them approved by two hosts at once


def _write(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    """One execution: a line in $MH_DIR/<key>. A key starting ``block`` marks that it runs
    and then waits to be killed."""
    key = arguments["key"]
    directory = Path(os.environ["MH_DIR"])
    with open(directory / key, "a") as f:
        f.write("ran\n")
    if key.startswith("block"):
        (directory / f"{key}.running").touch()
        threading.Event().wait()
    return ToolOutput(structured={"echo": key}, content=key)


PLUGIN = make_plugin(domains=["mh"], tools=[
    Tool(make_spec(name="mh.write", input_schema=KEY, output_schema=OUT,
                   side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                   idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False, timeout_s=60),
         call=_write),
])
#: Every mh.write call waits for approval.
GATED = Policy.configured({(SideEffect.WORKSPACE_WRITE, Risk.LOW): PolicyAction.REQUIRE_APPROVAL})

DRIVER = """
import asyncio, json, sys
sys.path.insert(0, {tests!r})
from test_many_hosts import GATED, PLUGIN
from toolhost._model.settings import Settings
from toolhost.testing import host_for
host = host_for({{"mh-dist": PLUGIN}}, settings=Settings.from_environ(), policy=GATED)
host.pipeline
print(json.dumps({{"ready": host.pipeline.invocations.owner()}}), flush=True)
for line in sys.stdin:
    command, _, argument = line.strip().partition(" ")
    if command == "approve":
        resumed = asyncio.run(host.pipeline.resume(argument, "ops"))
        answer = {{"id": argument, "acted": resumed.acted,
                  "status": resumed.outcome.status.value}}
    else:
        answer = {{"recovered": [[r.invocation_id, r.action.value] for r in host.recover()]}}
    print(json.dumps(answer), flush=True)
"""


class Driver:
    """One host process."""

    def __init__(self, script: Path, env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=dict(env))
        self.owner = self._read()["ready"]
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"host process {self.proc.pid} ended"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def ask(self, command: str) -> dict[str, Any]:
        with self._lock:  # one command at a time per host: its answers come in order
            self.send(command)
            return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def drivers(pg_database: str, tmp_path: Path) -> Iterator[list[Driver]]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(HERE)))
    (tmp_path / "ran").mkdir()
    started: list[Driver] = []
    try:
        for i in range(3):
            started.append(Driver(script, {
                **os.environ, "TOOLHOST_DATABASE_URL": pg_database,
                "TOOLHOST_DATA_DIR": str(tmp_path / f"host-{i}"),
                "MH_DIR": str(tmp_path / "ran")}))
        yield started
    finally:
        for driver in started:
            driver.close()


def test_three_hosts_run_every_approved_call_at_most_once(
    pg_database: str, tmp_path: Path, drivers: list[Driver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = tmp_path / "ran"
    monkeypatch.setenv("MH_DIR", str(ran))
    pauser = host_for({"mh-dist": PLUGIN}, data_dir=tmp_path / "pauser", policy=GATED,
                      settings=Settings(env={"TOOLHOST_DATABASE_URL": pg_database}))
    try:
        keys = ["block-0", *(f"k{i}" for i in range(1, CALLS))]
        ids: dict[str, str] = {}
        for key in keys:
            outcome = pauser.invoke_sync("mh.write", {"key": key})
            assert outcome.status.value == "awaiting_approval"
            assert outcome.invocation_id is not None
            ids[key] = outcome.invocation_id
        assert list(ran.iterdir()) == []  # nothing runs before its approval

        # Host 0 takes the blocking call, and is killed in the middle of it.
        victim, alive = drivers[0], drivers[1:]
        start_blocking_call(victim, ids["block-0"], ran)
        kill_and_settle(victim, alive, pg_database, ids["block-0"])

        # The rest, approved on hosts picked at random; some by two hosts at once.
        rest = keys[1:]
        answers = approve_at_random(alive, {key: ids[key] for key in rest}, TWICE)

        acted = [a["id"] for a in answers if a["acted"]]
        assert sorted(acted) == sorted(ids[key] for key in rest)  # each by exactly one
        assert len(answers) == len(rest) + TWICE
        assert {a["status"] for a in answers if a["acted"]} == {"succeeded"}
        # The other of two approvers is handed the row as it stood: running, or done.
        assert {a["status"] for a in answers if not a["acted"]} <= {"running", "succeeded"}
        # At most once, everywhere: one execution per call, the killed one included.
        for key in keys:
            assert (ran / key).read_text() == "ran\n", key
        rows = {r.id: r for r in pauser.pipeline.invocations.list()}
        assert len(rows) == CALLS
        assert rows[ids["block-0"]].state is InvocationState.FAILED
        assert rows[ids["block-0"]].reason_code == "tool.internal.interrupted"
        assert all(rows[ids[key]].state is InvocationState.SUCCEEDED for key in rest)
        # Every host took a share of them.
        owners = {rows[ids[key]].owner["lease"] for key in rest}  # type: ignore[index]
        assert owners == {d.owner["lease"] for d in alive}
    finally:
        pauser.close()


def start_blocking_call(victim: Driver, invocation_id: str, ran: Path) -> None:
    """``victim`` approves the call that blocks, and it is running there."""
    victim.send(f"approve {invocation_id}")
    while not (ran / "block-0.running").exists():
        assert victim.proc.poll() is None
        threading.Event().wait(0.01)


def kill_and_settle(victim: Driver, alive: list[Driver], dsn: str, invocation_id: str) -> None:
    """Kill ``victim`` mid-call; the first of the living hosts settles its row, and the next
    finds nothing left to settle."""
    backend = lease_backend(dsn, victim.owner)
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    session_ends(dsn, backend)
    past_grace(dsn)  # a lease released right after a server start is UNKNOWN for a grace
    (settled,) = alive[0].ask("recover")["recovered"]
    assert settled == [invocation_id, "failed"]
    assert alive[1].ask("recover") == {"recovered": []}


def approve_at_random(alive: list[Driver], ids: Mapping[str, str],
                      twice: int) -> list[dict[str, Any]]:
    """Approve each call (``{key: invocation id}``) on a host picked at random, ``twice`` of
    them on every living host at once; every answer, with the call's key."""
    rng = random.Random(17)
    doubled = set(rng.sample(list(ids), twice))
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def approve(driver: Driver, key: str) -> None:
        answer = driver.ask(f"approve {ids[key]}")
        with lock:
            answers.append({**answer, "key": key})

    for key in ids:
        if key in doubled:
            both = [threading.Thread(target=approve, args=(d, key)) for d in alive]
            for t in both:
                t.start()
            for t in both:
                t.join()
        else:
            approve(rng.choice(alive), key)
    return answers
