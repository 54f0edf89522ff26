"""``prints`` (what every CLI line, approval display and refusal's shown name checks before it
escapes) on 1 KiB texts, this tree beside another commit's ``_model/printable.py``, in one run
(D479 added blank-drawn characters and runs of combining marks to what it escapes, and an
ASCII fast path).

Each text is timed on both, alternately, in 9 rounds (best of 3 x 2,000 calls per round); the
medians are printed with their ratio (this tree / the other).

Run: python bench/bench_printable.py [--baseline REV]   (default REV: 5b13b78, before D479)
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import tempfile
import timeit
from pathlib import Path
from types import ModuleType
from typing import Any

from toolhost._model import printable

TEXTS = {
    "ASCII": ("The quick brown fox jumps over the lazy dog. " * 23)[:1024],
    "BMP (Cyrillic)": ("Съешь же ещё этих мягких французских булок. " * 24)[:1024],
    "dense marks (Hebrew)": ("בְּרֵאשִׁית בָּרָא אֱלֹהִים " * 40)[:1024],
}


def module_at(rev: str, where: Path) -> ModuleType:
    """``_model/printable.py`` as it was at ``rev``, loaded on its own."""
    path = where / "printable_baseline.py"
    path.write_text(subprocess.run(
        ["git", "show", f"{rev}:host/toolhost/_model/printable.py"], check=True,
        capture_output=True, text=True, cwd=Path(__file__).parent).stdout)
    spec = importlib.util.spec_from_file_location("printable_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call_us(prints: Any, text: str) -> float:
    return min(timeit.repeat(lambda: prints(text), number=2000, repeat=3)) / 2000 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default="5b13b78")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        baseline = module_at(args.baseline, Path(where))
        print(f"{'1 KiB text':22} {args.baseline + ' µs':>12} {'this tree µs':>13} {'ratio':>6}")
        for name, text in TEXTS.items():
            rounds = [(per_call_us(baseline.prints, text), per_call_us(printable.prints, text))
                      for _ in range(9)]
            before = statistics.median(r[0] for r in rounds)
            after = statistics.median(r[1] for r in rounds)
            ratio = statistics.median(r[1] / r[0] for r in rounds)
            print(f"{name:22} {before:12.2f} {after:13.2f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
