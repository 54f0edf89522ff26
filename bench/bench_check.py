"""`toolhost check` wall time next to `python -c pass`, in the same run.

Goal (issue #2): under 150 ms above the bare interpreter with both Milestone 1 plugins
installed. Run: python bench/bench_check.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def wall_ms(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    env = dict(os.environ)
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "toolhost --help": [sys.executable, "-m", "toolhost._cli", "--help"],
        "toolhost check": [sys.executable, "-m", "toolhost._cli", "check"],
    }
    # Interleave the commands so machine noise hits all of them alike.
    results: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            results[name] += wall_ms(argv, 1, env)
    base = statistics.median(results["python -c pass"])
    print(f"{'command':18} {'median ms':>10} {'p90 ms':>8} {'above python':>13}")
    for name, samples in results.items():
        med = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(f"{name:18} {med:10.1f} {p90:8.1f} {med - base:+12.1f}")


if __name__ == "__main__":
    main()
