"""math.calculate against simpleeval, and the time the tool takes to refuse hostile input.

Standalone: ``python bench/bench_math.py`` from the repository root. It uses the installed
toolhost and toolhost-math, or the source trees beside this file if they are not installed,
and installs simpleeval (a bench-only comparison, never a runtime dependency) if missing.

Every figure is the median over repeats of a timeit run sized by ``autorange``, in
microseconds per call. The tool is timed as the host runs it: the callable that
``toolhost_math.tool.build(services)`` returns, called with arguments and a context.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
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


def _import_tool() -> Any:
    try:
        return importlib.import_module("toolhost_math.tool")
    except ImportError:
        sys.path[:0] = [str(ROOT / "host"), str(ROOT / "plugins" / "math" / "src")]
        return importlib.import_module("toolhost_math.tool")


def _import_simpleeval() -> Any:
    try:
        return importlib.import_module("simpleeval")
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "simpleeval"])
        return importlib.import_module("simpleeval")


def median_us(function: Callable[[], object]) -> float:
    """Median microseconds per call over REPEATS runs of an autoranged timeit."""
    timer = timeit.Timer(function)
    number, _ = timer.autorange()
    runs = timer.repeat(repeat=REPEATS, number=number)
    return statistics.median(runs) / number * 1e6


def outcome(function: Callable[[], object]) -> str:
    """What one call does: its result, or the exception it raises, in a few words."""
    try:
        value = function()
    except Exception as exc:  # the point is to report whatever it is
        code = getattr(exc, "reason_code", None)
        return f"refused: {code.rsplit('.', 1)[1] if code else type(exc).__name__}"
    content = getattr(value, "content", value)
    text = str(content).splitlines()[0]
    return text if len(text) <= 28 else text[:25] + "..."


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


def main() -> None:
    tool = _import_tool()
    simpleeval = _import_simpleeval()
    from toolhost import FixedClock, Principal, Services, ToolExecutionContext

    built = tool.build(Services(clock=FixedClock(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))))

    def calculate(arguments: dict[str, str], context: object) -> object:
        # The body is a coroutine that awaits nothing: drive it inline, as the loop would.
        coroutine = built(arguments, context)
        try:
            coroutine.send(None)
        except StopIteration as stop:
            return stop.value
        raise RuntimeError("math.calculate suspended")
    context = ToolExecutionContext(run_id="bench", principal=Principal("bench"))

    def ours(expression: str) -> Callable[[], object]:
        arguments = {"expression": expression}

        def run() -> object:
            try:
                return calculate(arguments, context)
            except Exception as exc:  # ToolFailure: a refusal is a result here
                return exc

        run.raw = lambda: calculate(arguments, context)  # type: ignore[attr-defined]
        return run

    def theirs(expression: str) -> Callable[[], object]:
        def run() -> object:
            try:
                return simpleeval.simple_eval(expression)
            except Exception as exc:
                return exc

        run.raw = lambda: simpleeval.simple_eval(expression)  # type: ignore[attr-defined]
        return run

    sum_small = plus_chain(1000, 1)  # 1+2+3+...: about 550 tokens, over the 512 bound
    sum_fits = plus_chain(1000, 1000)  # 1000+1001+...: 1000 characters inside 512 tokens
    libmpdec = getattr(decimal, "__libmpdec_version__", "none: the pure-Python _pydecimal")
    print(f"python {platform.python_version()} ({platform.python_implementation()}), "
          f"decimal {decimal.__version__} (libmpdec {libmpdec}), "
          f"simpleeval {metadata.version('simpleeval')}, {platform.machine()}")
    print(f"median of {REPEATS} autoranged timeit runs, microseconds per call\n")

    rows = [
        ("17 * 23", "17 * 23"),
        (f"1+2+...+n, {len(sum_small)} chars", sum_small),
        (f"1000+1001+..., {len(sum_fits)} chars", sum_fits),
    ]
    print(f"{'expression':34} {'math.calculate':>15} {'simple_eval':>12} {'ratio':>7}  "
          f"{'math.calculate gives':30} simple_eval gives")
    for label, expression in rows:
        mine, other = ours(expression), theirs(expression)
        a, b = median_us(mine), median_us(other)
        print(f"{label:34} {a:15.1f} {b:12.1f} {a / b:7.2f}  "
              f"{outcome(mine.raw):30} {outcome(other.raw)}")  # type: ignore[attr-defined]

    print("\ntime to refuse (goal: under 1 ms each; hard gate 5 allows 50 ms)\n")
    hostile = [
        ("9**9**9", "9**9**9"),
        ("9^9^9", "9^9^9"),
        ("1025 characters", "1" * 1025),
        ("33 nested groups", "(" * 33 + "1" + ")" * 33),
    ]
    print(f"{'expression':34} {'math.calculate':>15} {'simple_eval':>12}  "
          f"{'math.calculate gives':30} simple_eval gives")
    for label, expression in hostile:
        mine, other = ours(expression), theirs(expression)
        a = median_us(mine)
        # simple_eval on 9**9**9 refuses quickly (MAX_POWER), but 9^9^9 is XOR to Python and
        # 33 groups are legal; each is timed as it behaves.
        b = median_us(other)
        print(f"{label:34} {a:15.1f} {b:12.1f}  "
              f"{outcome(mine.raw):30} {outcome(other.raw)}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
