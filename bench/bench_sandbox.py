"""sandbox.run_command ``true`` next to bare bubblewrap, in the same run (issues #13, #27).

The reference is what a user would run instead: ``bwrap --ro-bind / / --unshare-all true``.
Rows, each timed once per round after a short pause (a pause as between an agent's calls: a
kernel's lazily released state, such as an RCU grace period, is not left warm for the next
call), rounds interleaved (the order turning each round) so machine noise hits all alike; the
median of each row, its ratio to the reference's median, and the median of the per-round
ratios (steadier when the load changes during the run):

- ``bare sh -c true``: ``subprocess.run(["/bin/sh", "-c", "true"])``, the floor;
- ``bwrap reference``: the reference above;
- ``bwrap, plugin argv``: ``sh -c true`` under the plugin's whole bwrap command line, started
  directly (no limits, no cgroup): what the sandbox's own isolation costs;
- ``tool body``: the tool body in an operator's directory (cgroup, limits, bwrap, the
  provenance walks of an empty workspace);
- ``pipeline call``: one call through the host's pipeline (validation, row, trust, excerpt),
  in the same directory;
- ``pipeline, host ws``: one call in a run whose workspace the host made (a generation,
  a filesystem of its own where the host can mount), kept across the calls;
- ``fresh run + call``: a run started, one call, the run ended: the workspace created and
  discarded around the call.

Then the time to kill: ``sleep 1000`` (with a ``setsid`` child) is started, the call is
cancelled once the sandbox runs, and the clock stops when the body has returned, every
process gone. Reported beside a bare ``sh`` process group's killpg (which a setsid child escapes).

Run: python bench/bench_sandbox.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from toolhost_sandbox import plugin
from toolhost_sandbox.isolation import account_files, bwrap_argv, find_bwrap
from toolhost_sandbox.seccomp import filter_program

from toolhost import Settings
from toolhost.testing import CancellationEvent, Harness, Run

NAME = "sandbox.run_command"
ALLOW = {"TOOLHOST_POLICY": '{"CODE_EXECUTION/HIGH": "allow"}'}
REFERENCE = "bwrap reference"
#: A pause before each timed call: what the previous one left to the kernel (a network
#: namespace is torn down by a worker after its last process ends) must not land on the next.
SETTLE_S = 0.02


def ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def bare() -> None:
    subprocess.run(["/bin/sh", "-c", "true"], check=True)


def reference(bwrap: str) -> Callable[[], None]:
    def run() -> None:
        subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-all", "true"], check=True)
    return run


def bwrap_only(bwrap: str, root: Path) -> Callable[[], None]:
    def run() -> None:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        status_r, status_w = os.pipe()
        data = []
        for content in (*account_files(), filter_program()):
            r, w = os.pipe()
            os.write(w, content)
            os.close(w)
            data.append(r)
        argv = bwrap_argv(bwrap, workspace_fd=fd, status_fd=status_w, passwd_fd=data[0],
                          group_fd=data[1], seccomp_fd=data[2], command="true")
        try:
            subprocess.run(argv, check=True, pass_fds=(fd, status_w, *data))
        finally:
            for f in (fd, status_r, status_w, *data):
                os.close(f)
    return run


def succeeded(harness: Harness, run: Run) -> Callable[[], None]:
    def call() -> None:
        outcome = harness.call(NAME, {"command": "true"}, run=run)
        assert outcome.failure is None, outcome.failure
    return call


def fresh_run(harness: Harness) -> None:
    run = harness.start_run()
    try:
        succeeded(harness, run)()
    finally:
        harness.end_run(run)


def kill_bare() -> float:
    process = subprocess.Popen(["/bin/sh", "-c", "sleep 1000 & wait"], start_new_session=True)
    time.sleep(0.05)
    start = time.perf_counter()
    os.killpg(process.pid, signal.SIGKILL)  # the whole group; a setsid child would survive
    process.wait()
    return (time.perf_counter() - start) * 1000


def kill_sandbox(harness: Harness) -> float:
    cancellation = CancellationEvent()
    context = harness.context(timeout_s=300, cancellation=cancellation)
    body = harness.tool(NAME)
    finished: list[float] = []

    def call() -> None:
        body({"command": "touch s; (setsid sleep 1000 &); sleep 1000", "timeout_s": 300},
             context)
        finished.append(time.perf_counter())

    worker = threading.Thread(target=call)
    worker.start()
    while True:
        try:
            context.workspace.read("s")
            break
        except Exception:
            time.sleep(0.005)
    start = time.perf_counter()
    cancellation.cancel()
    worker.join(30)
    return (finished[0] - start) * 1000


def measure(rows: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Each row once a round, the order turned by one each round."""
    names = list(rows)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm: imports, the tool built, templates made
        rows[name]()
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            time.sleep(SETTLE_S)
            times[name].append(ms(rows[name]))
    return times


def report(times: dict[str, list[float]], rounds: int) -> None:
    reference_ms = statistics.median(times[REFERENCE])
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"sandbox `true`, {rounds} interleaved rounds, {os.cpu_count()} cores, "
          f"load average {load}")
    print(f"  {'row':<22} {'median ms':>9} {'p25':>7} {'p75':>7}  {'x ref':>6}  "
          f"{'x ref, per round':>16}")
    for name, values in times.items():
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        per_round = statistics.median(v / r for v, r in zip(values, times[REFERENCE], strict=True))
        print(f"  {name:<22} {median:9.2f} {quartiles[0]:7.2f} {quartiles[2]:7.2f}  "
              f"{median / reference_ms:6.2f}  {per_round:16.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", "--runs", type=int, default=30)
    args = parser.parse_args()
    rounds = max(7, args.rounds)
    bwrap = find_bwrap(Settings())
    with tempfile.TemporaryDirectory() as tmp, Harness.over(
            {"toolhost-sandbox": plugin}, settings=ALLOW) as harness:
        root = Path(tmp)
        run = harness.start_run(workspace=root)
        hosted = harness.start_run()
        body = harness.tool(NAME)
        context = harness.context(run=run, timeout_s=3600)
        rows: dict[str, Callable[[], object]] = {
            "bare sh -c true": bare,
            REFERENCE: reference(bwrap),
            "bwrap, plugin argv": bwrap_only(bwrap, root),
            "tool body": lambda: body({"command": "true", "timeout_s": 10}, context),
            "pipeline call": succeeded(harness, run),
            "pipeline, host ws": succeeded(harness, hosted),
            "fresh run + call": lambda: fresh_run(harness),
        }
        report(measure(rows, rounds), rounds)
        kills = [kill_sandbox(harness) for _ in range(max(3, rounds // 5))]
        bares = [kill_bare() for _ in range(max(3, rounds // 5))]
        print(f"time to kill sleep 1000 + a setsid child, median of {len(kills)} (ms)")
        print(f"  {'sandbox (all gone)':<22} {statistics.median(kills):9.2f}")
        print(f"  {'bare killpg':<22} {statistics.median(bares):9.2f}  "
              f"(sh + sleep, no setsid child: killpg would miss one)")
        harness.end_run(hosted)
        harness.end_run(run)


if __name__ == "__main__":
    main()
