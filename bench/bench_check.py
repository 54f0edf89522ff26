"""`toolhost check` wall time next to `python -c pass`, in the same run (issue #11).

Goal: `toolhost check` with every installed plugin under 100 ms above the bare interpreter.
The anchor row is `import importlib.metadata` alone, what entry-point discovery used to cost
before anything of toolhost ran.

Each command is a whole process, run interleaved with the others so machine noise hits all
alike. The children compile their bytecode once, into a private cache directory
(PYTHONPYCACHEPREFIX), as an installed package has it: an environment with
PYTHONDONTWRITEBYTECODE and a source checkout would otherwise recompile every module on every
start, which no operator's install does. `--no-bytecode` measures that case instead.

The children share a private data directory (unless TOOLHOST_DATA_DIR is set): the warm-up run
fills what `check` keeps there (the determinism scan's findings, the validators' generated
code, which plugins have readiness probes), as any check after the first finds it. Each row
also gives the children's CPU time (user + system, bwrap's included), which a machine shared
with other work inflates less than the wall time.

Run: python bench/bench_check.py [--runs N] [--no-bytecode]
     (TOOLHOST_PLUGINS / TOOLHOST_PLUGINS_EXCLUDE in the environment reach the children)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MS = 100.0


def wall_ms(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The command's wall time and its CPU time (its own and its children's), in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def toolhost_command() -> list[str]:
    """The installed ``toolhost`` script beside this interpreter (what an operator runs)."""
    script = Path(sys.executable).with_name("toolhost")
    return [str(script)] if script.exists() else [sys.executable, "-m", "toolhost._cli"]


def installed_plugins() -> list[str]:
    from toolhost._model.settings import Settings
    from toolhost._registration.discovery import _entry_points, _select

    return sorted({ep.distribution for ep in _select(_entry_points(), Settings.from_environ())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="children write no bytecode: every module compiles on every start")
    args = parser.parse_args()
    env = dict(os.environ)
    cache = tempfile.TemporaryDirectory(prefix="toolhost-bench-pycache-")
    data = tempfile.TemporaryDirectory(prefix="toolhost-bench-data-")
    env.setdefault("TOOLHOST_DATA_DIR", data.name)
    if args.no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache.name
    toolhost = toolhost_command()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import importlib.metadata": [sys.executable, "-c", "import importlib.metadata"],
        "toolhost --help": [*toolhost, "--help"],
        "toolhost check": [*toolhost, "check"],
    }
    for argv in commands.values():  # warm-up: the bytecode, the page cache, check's caches
        wall_ms(argv, env)
    results: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            wall, used = wall_ms(argv, env)
            results[name].append(wall)
            cpu[name].append(used)
    cache.cleanup()
    data.cleanup()
    base = statistics.median(results["python -c pass"])
    cpu_base = statistics.median(cpu["python -c pass"])
    plugins = installed_plugins()
    print(f"{args.runs} runs each, interleaved; bytecode "
          f"{'not written' if args.no_bytecode else 'cached (PYTHONPYCACHEPREFIX)'}; "
          f"{len(plugins)} plugins: {', '.join(plugins)}; "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print(f"{'command':26} {'median ms':>10} {'p90 ms':>8} {'above python':>13} "
          f"{'cpu ms':>7} {'cpu above':>10}")
    for name, samples in results.items():
        med = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        used = statistics.median(cpu[name])
        print(f"{name:26} {med:10.1f} {p90:8.1f} {med - base:+12.1f} {used:7.1f} "
              f"{used - cpu_base:+10.1f}")
    above = statistics.median(results["toolhost check"]) - base
    verdict = "met" if above < GOAL_MS else "not met"
    print(f"toolhost check above python -c pass: {above:+.1f} ms "
          f"(goal under +{GOAL_MS:.0f} ms: {verdict})")


if __name__ == "__main__":
    main()
