"""Where a CI run's CPU goes, by process: what bench/README.md's "Where a run's CPU goes, by
process" table comes from (issue #28).

bench/ci_test_cpu.py charges CPU to test files, but a server a fixture starts for the session
and a process nobody waited for are in no test's figure. This reads every process's CPU from
/proc instead, every ``--every`` seconds while a command runs, and groups it by the nox
session whose virtualenv ran it (``.nox/<session>/`` in its command line) and by command:

    python bench/ci_process_cpu.py -- bash .ci/run     # in a clean clone, as CI runs it

A process is seen from its first sample to its last, so one that lives less than ``--every``
is missed (their sum shows as the gap to the total of ``os.times`` of the command's waited-for
processes, printed first). The poller's own CPU is its own: it slows the run a little.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

#: Clock ticks per second, for /proc/PID/stat's utime and stime.
_HZ = os.sysconf("SC_CLK_TCK")


#: (pid, start time) -> (command line at first sight, CPU seconds at the latest sample)
Seen = dict[tuple[str, str], tuple[str, float]]


def _sample(seen: Seen) -> None:
    """Each process's command line (at first sight) and CPU seconds (latest)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
            cpu = (int(fields[11]) + int(fields[12])) / _HZ  # utime, stime
            key = (pid, fields[19])  # pid and start time: a reused pid is another process
            if key not in seen:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                seen[key] = (command.decode(errors="replace").strip(), cpu)
            else:
                seen[key] = (seen[key][0], cpu)
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile


def _report(seen: Seen, before: set[tuple[str, str]], rows: int) -> None:
    sessions: collections.defaultdict[str, float] = collections.defaultdict(float)
    commands: collections.defaultdict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    for key, (command, cpu) in seen.items():
        if key in before or not command:  # alive before the run, or a kernel thread
            continue
        found = re.search(r"\.nox/([^/ ]+)/", command)
        session = found.group(1) if found else "(no session)"
        sessions[session] += cpu
        shown = re.sub(r"\S*/\.nox/[^/ ]+/bin/", "", command)
        shown = re.sub(r"/tmp/\S+", "TMP", shown)
        shown = re.sub(r"\d{3,}", "N", shown)[:70]
        commands[f"{session}: {shown}"] += cpu
        counts[f"{session}: {shown}"] += 1
    print(f"{'CPU s':>8}  session")
    for session, cpu in sorted(sessions.items(), key=lambda item: -item[1]):
        print(f"{cpu:8.1f}  {session}")
    print(f"\n{'CPU s':>8} {'procs':>6}  session: command")
    for command, cpu in sorted(commands.items(), key=lambda item: -item[1])[:rows]:
        print(f"{cpu:8.1f} {counts[command]:6d}  {command}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--rows", type=int, default=30, help="commands shown")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    seen: Seen = {}
    _sample(seen)
    before = set(seen)
    done = threading.Event()

    def poll() -> None:
        while not done.wait(args.every):
            _sample(seen)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    started = os.times()
    status = subprocess.run(command, check=False).returncode
    _sample(seen)
    done.set()
    poller.join()
    ended = os.times()
    total = (ended.children_user - started.children_user
             + ended.children_system - started.children_system)
    print(f"\nthe command exited {status}; its processes' CPU (os.times): {total:.1f} s\n")
    _report(seen, before, args.rows)
    sys.exit(status)


if __name__ == "__main__":
    main()
