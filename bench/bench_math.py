"""math.calculate against simpleeval, on ordinary input and on the hostile forms it refuses.

Standalone: ``python bench/bench_math.py`` from the repository root. It uses the installed
toolhost and toolhost-math, or the source trees beside this file if they are not installed,
and installs simpleeval (a bench-only comparison, never a runtime dependency) if missing.

Every figure is the median over repeats of a timeit run sized by ``autorange``, in
microseconds per call; a row's three columns take their runs in turn (interleaved), so load
from elsewhere on the machine falls on all three alike. The tool is timed as
the host runs it: the body the test kit's ``Harness.tool`` returns (what the host builds),
called with arguments and a context from ``Harness.context`` and driven inline (it is a
coroutine that awaits nothing), so the figure includes building its ToolOutput.

The anchor is a *reused* ``simpleeval.SimpleEval().eval``: one evaluator built once, as a
long-lived process would hold it. ``simple_eval`` builds a new evaluator per call, which is
slower and shown for reference. Both get sqrt, ln and pi (floats, from ``math``), so every row
asks them the same question. On the hostile rows the comparison is time to answer: our tool
refuses 9**9**9, 9^9^9 and the 33rd nesting level; simpleeval refuses 9**9**9 (MAX_POWER),
reads ^ as XOR and evaluates the nested groups. ``1 / 0`` is refused by both (issue #27's
row: a refusal of an operation, which the hot path makes itself).
"""

from __future__ import annotations

import argparse
import decimal
import importlib
import math
import platform
import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

REPEATS = 11
ROOT = Path(__file__).resolve().parents[1]


def _import_plugin() -> Any:
    try:
        return importlib.import_module("toolhost_math.plugin")
    except ImportError:
        sys.path[:0] = [str(ROOT / "host"), str(ROOT / "plugins" / "math" / "src")]
        return importlib.import_module("toolhost_math.plugin")


def _import_simpleeval() -> Any:
    try:
        return importlib.import_module("simpleeval")
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "simpleeval"])
        return importlib.import_module("simpleeval")


def medians_us(functions: list[Callable[[], object]], repeats: int = REPEATS) -> list[float]:
    """Median microseconds per call of each function over ``repeats`` runs of an autoranged
    timeit, their runs interleaved (one run of each, ``repeats``
    times over): a burst of load on this shared machine then falls on every column of a row
    alike, not on whichever happened to be running, so the row's ratio holds still."""
    timers = [timeit.Timer(function) for function in functions]
    numbers = [timer.autorange()[0] for timer in timers]
    runs: list[list[float]] = [[] for _ in timers]
    for _ in range(repeats):
        for timer, number, times in zip(timers, numbers, runs, strict=True):
            times.append(timer.timeit(number) / number * 1e6)
    return [statistics.median(times) for times in runs]


def outcome(function: Callable[[], object]) -> str:
    """What one call does: its result, or the exception it raises, in a few words."""
    try:
        value = function()
    except Exception as exc:  # the point is to report whatever it is
        code = getattr(exc, "reason_code", None)
        return f"refused: {code.rsplit('.', 1)[1] if code else type(exc).__name__}"
    content = getattr(value, "content", value)
    text = str(content).splitlines()[0]
    return text if len(text) <= 24 else text[:21] + "..."


def plus_chain(length: int, first: int) -> str:
    """``first+(first+1)+...`` of exactly ``length`` characters (the last term pads it)."""
    terms: list[str] = []
    n = first
    while True:
        candidate = "+".join([*terms, str(n)])
        if len(candidate) > length:
            break
        terms.append(str(n))
        n += 1
    text = "+".join(terms)
    remaining = length - len(text)
    if remaining >= 2:
        text += "+" + "1" * (remaining - 1)
    elif remaining == 1:
        text += " "
    assert len(text) == length
    return text


def quietly(function: Callable[[], object]) -> Callable[[], object]:
    """``function`` with a raised exception returned instead: a refusal is an answer here."""

    def run() -> object:
        try:
            return function()
        except Exception as exc:
            return exc

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help="timeit runs per figure")
    args = parser.parse_args(argv)

    plugin = _import_plugin()
    simpleeval = _import_simpleeval()
    from toolhost.testing import Harness

    functions = {**simpleeval.DEFAULT_FUNCTIONS, "sqrt": math.sqrt, "ln": math.log}
    names = {**simpleeval.DEFAULT_NAMES, "pi": math.pi}
    reused = simpleeval.SimpleEval(functions=functions, names=names)

    sum_fits = plus_chain(1000, 1000)  # 1000+1001+...: 1000 characters inside 512 tokens
    sum_small = plus_chain(1000, 1)  # 1+2+3+...: about 550 tokens, over the 512 bound
    rows = [
        ("17 * 23", "17 * 23"),
        ("sqrt(2)*pi/ln(10)", "sqrt(2)*pi/ln(10)"),
        ("9**9**9", "9**9**9"),
        ("9^9^9", "9^9^9"),
        ("33 nested groups", "(" * 33 + "1" + ")" * 33),
        (f"1000+1001+..., {len(sum_fits)} chars", sum_fits),
        (f"1+2+..., {len(sum_small)} chars", sum_small),
        ("1025 characters", "1" * 1025),
        # A refusal the hot path (toolhost_math.hotpath) makes itself since issue #27; it
        # used to decline it, and the exact path answered after it.
        ("1 / 0", "1 / 0"),
        # Declined by the hot path, so the exact path answers after it: a valid input it does
        # not read.
        ("17\t*\t23 (tabs)", "17\t*\t23"),
    ]
    #: The rows issue #11 (the first six) and issue #27 (``1 / 0``) set a target on: at most
    #: 1.0x the reused SimpleEval.
    targeted = {label for label, _ in rows[:6]} | {"1 / 0"}

    libmpdec = getattr(decimal, "__libmpdec_version__", "none: the pure-Python _pydecimal")
    print(f"python {platform.python_version()} ({platform.python_implementation()}), "
          f"decimal {decimal.__version__} (libmpdec {libmpdec}), "
          f"simpleeval {metadata.version('simpleeval')}, {platform.machine()}")
    print(f"median of {args.repeats} autoranged timeit runs, microseconds per call; "
          "ratio = math.calculate / reused SimpleEval().eval\n")
    print(f"{'expression':28} {'math.calculate':>14} {'SimpleEval':>11} {'ratio':>6} "
          f"{'simple_eval':>12}  {'math.calculate gives':28} SimpleEval gives")

    with Harness.over({"toolhost-math": plugin}) as harness:
        body = harness.tool("math.calculate")
        context = harness.context()

        def calculate(arguments: dict[str, str]) -> object:
            # The body is a coroutine that awaits nothing: drive it inline, as the loop would.
            coroutine = body(arguments, context)
            try:
                coroutine.send(None)  # type: ignore[union-attr]
            except StopIteration as stop:
                return stop.value
            raise RuntimeError("math.calculate suspended")

        ratios: list[float] = []
        for label, expression in rows:
            arguments = {"expression": expression}
            ours: Callable[[], object] = lambda a=arguments: calculate(a)  # noqa: E731
            anchor: Callable[[], object] = lambda e=expression: reused.eval(e)  # noqa: E731
            fresh: Callable[[], object] = (  # noqa: E731
                lambda e=expression: simpleeval.simple_eval(e, functions=functions, names=names)
            )
            a, b, c = medians_us([quietly(ours), quietly(anchor), quietly(fresh)], args.repeats)
            if label in targeted:
                ratios.append(a / b)
            mark = "" if label in targeted else " (informative)"
            print(f"{label:28} {a:14.2f} {b:11.2f} {a / b:6.2f} {c:12.2f}  "
                  f"{outcome(ours):28} {outcome(anchor)}{mark}")
    print(f"\nworst ratio on the {len(targeted)} targeted rows: {max(ratios):.2f} "
          "(target: at most 1.00)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
