"""sandbox.run_command's own cost next to a bare subprocess, in the same run (issue #13).

Rows, each a median over interleaved runs so machine noise hits all alike:

- ``bare``: ``subprocess.run(["/bin/sh", "-c", "true"])``, the floor;
- ``bwrap``: the same command under the plugin's whole bwrap command line, no limits;
- ``body``: the tool body (cgroup, limits, bwrap, provenance walk of an empty workspace);
- ``pipeline``: one call through the host's pipeline (validation, row, trust, excerpt).

Then the time to kill: ``sleep 1000`` (with a ``setsid`` child) is started, the call is
cancelled once the sandbox runs, and the clock stops when the body has returned, every
process gone. Reported beside a bare ``sh`` process group's killpg (which a setsid child escapes).

Run: python bench/bench_sandbox.py [--runs N]
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
from toolhost.testing import CancellationEvent, Harness

NAME = "sandbox.run_command"
ALLOW = {"TOOLHOST_POLICY": '{"CODE_EXECUTION/HIGH": "allow"}'}


def ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def bare() -> None:
    subprocess.run(["/bin/sh", "-c", "true"], check=True)


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
    root_started = threading.Event()
    body = harness.tool(NAME)
    finished: list[float] = []

    def call() -> None:
        body({"command": "touch s; (setsid sleep 1000 &); sleep 1000", "timeout_s": 300},
             context)
        finished.append(time.perf_counter())

    worker = threading.Thread(target=call)
    worker.start()
    while not root_started.is_set():
        try:
            context.workspace.read("s")
            root_started.set()
        except Exception:
            time.sleep(0.005)
    start = time.perf_counter()
    cancellation.cancel()
    worker.join(30)
    return (finished[0] - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    bwrap = find_bwrap(Settings())
    with tempfile.TemporaryDirectory() as tmp, Harness.over(
            {"toolhost-sandbox": plugin}, settings=ALLOW) as harness:
        root = Path(tmp)
        run = harness.start_run(workspace=root)
        body = harness.tool(NAME)
        rows: dict[str, Callable[[], object]] = {
            "bare sh -c true": bare,
            "bwrap sh -c true": bwrap_only(bwrap, root),
            "tool body": lambda: body({"command": "true", "timeout_s": 10},
                                      harness.context(run=run)),
            "pipeline call": lambda: harness.call(NAME, {"command": "true"}, run=run),
        }
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, fn in rows.items():
                times[name].append(ms(fn))
        floor = statistics.median(times["bare sh -c true"])
        print(f"start cost per call, median of {args.runs} (ms), ratio to bare")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:<18} {median:8.2f}  x{median / floor:6.1f}")
        kills = [kill_sandbox(harness) for _ in range(max(3, args.runs // 5))]
        bares = [kill_bare() for _ in range(max(3, args.runs // 5))]
        print(f"time to kill sleep 1000 + a setsid child, median of {len(kills)} (ms)")
        print(f"  {'sandbox (all gone)':<18} {statistics.median(kills):8.2f}")
        print(f"  {'bare killpg':<18} {statistics.median(bares):8.2f}  "
              f"(sh + sleep, no setsid child: killpg would miss one)")
        harness.end_run(run)


if __name__ == "__main__":
    main()
