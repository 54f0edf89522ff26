"""The one-shot commands' wall time, each beside its reference in the same run (issue #27).

Rows, each a whole process, run interleaved so machine noise hits every command of a round
alike; medians over the rounds:

- ``toolhost check`` with the nine first-party plugins, above ``python -c pass`` (goal +60 ms);
- ``toolhost call math.calculate``, above ``python -c pass`` (goal +100 ms);
- ``toolhost pending``, above ``python -c pass`` (goal +100 ms);
- ``toolhost artifacts get ID -o FILE`` of a 32 MiB artifact, against what a user would do with
  the same file: ``sha256sum`` of the stored content, then ``cp`` of it (goal 1.5x).

The children compile their bytecode once, into a private cache (PYTHONPYCACHEPREFIX), as an
installed package has it, and share a private data directory that the warm-up fills as any
command after the first finds it (check's caches, the artifact). Each row also gives the
children's CPU time (user + system), which a machine shared with other work inflates less.

``--baseline DIR`` runs every toolhost row a second time with DIR first on PYTHONPATH (a copy
of ``host/`` as it was), with a data directory of its own, in the same rounds: before and
after, side by side.

Run: python bench/bench_commands.py [--rounds N] [--baseline DIR]
     (TOOLHOST_PLUGINS / TOOLHOST_PLUGINS_EXCLUDE in the environment reach the children; by
     default every installed plugin but the example, toolhost-greet)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ARTIFACT_BYTES = 32 * 1024 * 1024
#: Goals: (row, reference row, "delta" in ms or "ratio", the bound).
GOALS = (
    ("toolhost check", "python -c pass", "delta", 60.0),
    ("toolhost call math.calculate", "python -c pass", "delta", 100.0),
    ("toolhost pending", "python -c pass", "delta", 100.0),
    ("toolhost artifacts get -o", "sha256sum + cp", "ratio", 1.5),
)


def toolhost_command() -> list[str]:
    """The installed ``toolhost`` script beside this interpreter (what an operator runs)."""
    script = Path(sys.executable).with_name("toolhost")
    return [str(script)] if script.exists() else [sys.executable, "-m", "toolhost._cli"]


def timed(steps: list[list[str]], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU time (the children's user + system), in ms, of these processes in turn."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for argv in steps:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


class Tree:
    """One host tree's data directory and environment, and its toolhost rows."""

    def __init__(self, label: str, env: dict[str, str], work: Path,
                 source: Path | None = None) -> None:
        self.label = label
        self.env = dict(env)
        if source is not None:
            self.env["PYTHONPATH"] = os.pathsep.join(
                [str(source), *filter(None, [env.get("PYTHONPATH")])])
        self.data = work / f"data-{label}"
        self.env["TOOLHOST_DATA_DIR"] = str(self.data)
        self.out = work / f"out-{label}.bin"

    def prepare(self, blob: Path) -> None:
        """What a command after the first finds: check's caches, and the 32 MiB artifact."""
        toolhost = toolhost_command()
        subprocess.run([*toolhost, "check"], check=True, stdout=subprocess.DEVNULL,
                       env=self.env)
        uploaded = subprocess.run([*toolhost, "artifacts", "upload", str(blob),
                                   "--conversation", "bench"], check=True, text=True,
                                  capture_output=True, env=self.env)
        self.artifact = uploaded.stdout.strip()

    def content(self) -> Path:
        """The stored content file of the artifact (content-addressed under the data dir)."""
        listed = subprocess.run([*toolhost_command(), "artifacts", "list", "--json"],
                                check=True, text=True, capture_output=True, env=self.env)
        (record,) = [r for r in json.loads(listed.stdout) if r["id"] == self.artifact]
        digest = record["checksum"].removeprefix("sha256:")
        return self.data / "artifacts" / "sha256" / digest[:2] / digest[2:]

    def rows(self, suffix: str) -> dict[str, Callable[[], tuple[float, float]]]:
        toolhost = toolhost_command()
        commands = {
            "toolhost check": [*toolhost, "check"],
            "toolhost call math.calculate": [*toolhost, "call", "math.calculate", "--args",
                                             '{"expression": "17 * 23"}'],
            "toolhost pending": [*toolhost, "pending"],
            "toolhost artifacts get -o": [*toolhost, "artifacts", "get", self.artifact, "-o",
                                          str(self.out)],
        }
        return {f"{name}{suffix}": (lambda argv=argv: timed([argv], self.env))
                for name, argv in commands.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds (>= 7)")
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="a host/ tree to run the toolhost rows with too (PYTHONPATH)")
    args = parser.parse_args()
    env = dict(os.environ)
    if "TOOLHOST_PLUGINS" not in env:
        env.setdefault("TOOLHOST_PLUGINS_EXCLUDE", "toolhost-greet")
    work_dir = tempfile.TemporaryDirectory(prefix="toolhost-bench-commands-")
    work = Path(work_dir.name)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    blob = work / "blob.bin"
    blob.write_bytes(os.urandom(ARTIFACT_BYTES))
    trees = [Tree("now", env, work)]
    if args.baseline is not None:
        trees.append(Tree("baseline", env, work, args.baseline.resolve()))
    for tree in trees:
        tree.prepare(blob)
    content, copy = trees[0].content(), work / "copy.bin"
    rows: dict[str, Callable[[], tuple[float, float]]] = {
        "python -c pass": lambda: timed([[sys.executable, "-c", "pass"]], env),
        # What a user does with the same file: check it, copy it.
        "sha256sum + cp": lambda: timed([["sha256sum", str(content)],
                                         ["cp", str(content), str(copy)]], env),
    }
    for tree in trees:
        rows |= tree.rows("" if tree.label == "now" else " (baseline)")
    for run in rows.values():  # warm-up: bytecode, page cache
        run()
    wall: dict[str, list[float]] = {name: [] for name in rows}
    cpu: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, run in rows.items():
            w, c = run()
            wall[name].append(w)
            cpu[name].append(c)
    load = os.getloadavg()
    work_dir.cleanup()
    med = {name: statistics.median(samples) for name, samples in wall.items()}
    cpu_med = {name: statistics.median(samples) for name, samples in cpu.items()}
    print(f"{args.rounds} rounds, interleaved; medians; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f} at the end; {os.cpu_count()} CPUs")
    print(f"{'command':44} {'wall ms':>8} {'p90':>7} {'cpu ms':>7}")
    for name in rows:
        p90 = statistics.quantiles(wall[name], n=10)[-1]
        print(f"{name:44} {med[name]:8.1f} {p90:7.1f} {cpu_med[name]:7.1f}")
    print()
    print(f"{'row':44} {'reference':16} {'wall':>9} {'cpu':>9} {'goal':>8}  met")
    for row, reference, kind, bound in GOALS:
        for suffix in ("", " (baseline)"):
            name = row + suffix
            if name not in med:
                continue
            if kind == "delta":
                figure, cpu_figure = med[name] - med[reference], cpu_med[name] - cpu_med[
                    reference]
                shown = (f"{figure:+8.1f}ms {cpu_figure:+8.1f}ms {'+' + str(int(bound)):>6}ms")
            else:
                figure = med[name] / med[reference]
                shown = (f"{figure:8.2f}x {cpu_med[name] / cpu_med[reference]:8.2f}x "
                         f"{bound:7.1f}x")
            print(f"{name:44} {reference:16} {shown}  {'yes' if figure <= bound else 'no'}")


if __name__ == "__main__":
    main()
