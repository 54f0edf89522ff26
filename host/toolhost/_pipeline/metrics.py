"""A tiny metrics registry, rendered in the Prometheus text exposition format (0.0.4).

Why our own and not ``prometheus_client``: the host needs three instrument kinds (counter,
histogram, gauge), labels, and one rendering; a dependency for that would be another package
every operator installs whether or not anyone scrapes. The same instruments are mirrored to
the OpenTelemetry metrics API when it is importable and a meter provider is configured
(``toolhost._pipeline.instruments``); this module knows nothing of OpenTelemetry.

Every instrument is safe to update from any thread (one lock per instrument: the pipeline's
calls update them on the loop, sync tools and ``invoke_sync`` callers on their own threads).
The format: ``# HELP`` and ``# TYPE`` once per family, label values escaped (backslash, double
quote, line feed), samples sorted by their labels so a scrape is stable, histograms as
cumulative ``_bucket{le="..."}`` with ``le="+Inf"``, then ``_sum`` and ``_count``.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Sequence
from typing import TypeVar

__all__ = [
    "CONTENT_TYPE",
    "DURATION_BUCKETS",
    "Counter",
    "Gauge",
    "Histogram",
    "Registry",
    "escape_label_value",
]

#: The media type of the text exposition format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds: from a cached read (~100 µs) to a long sandbox command or an approval (minutes).
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


def escape_label_value(value: str) -> str:
    """A label value as the text format writes it between double quotes."""
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Family:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str],
                 lock: threading.Lock | None = None) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(labels)
        #: Guards the family's values; several families may share one (``Registry.lock``),
        #: so a caller updating them together takes it once.
        self._lock = lock if lock is not None else threading.Lock()

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def _header(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    def render(self) -> list[str]:
        raise NotImplementedError


_F = TypeVar("_F", bound=_Family)


class Counter(_Family):
    """A count that only goes up, by label values. ``name`` ends ``_total`` by convention."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 lock: threading.Lock | None = None) -> None:
        super().__init__(name, help_text, labels, lock)
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, values: tuple[str, ...] = (), amount: float = 1.0) -> None:
        with self._lock:
            self.inc_locked(values, amount)

    def inc_locked(self, values: tuple[str, ...], amount: float = 1.0) -> None:
        """``inc`` under a lock the caller holds (``lock``): one lock for several updates."""
        values_ = self._values
        values_[values] = values_.get(values, 0.0) + amount

    def value(self, values: tuple[str, ...] = ()) -> float:
        return self._values.get(values, 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return [*self._header(), *(f"{self.name}{_labels(self.label_names, k)} {_number(v)}"
                                   for k, v in items)]


class Gauge(_Family):
    """A value that goes up and down (calls waiting for an answer, say)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 lock: threading.Lock | None = None) -> None:
        super().__init__(name, help_text, labels, lock)
        self._values: dict[tuple[str, ...], float] = {}

    def add(self, amount: float, values: tuple[str, ...] = ()) -> None:
        with self._lock:
            self._values[values] = self._values.get(values, 0.0) + amount

    def value(self, values: tuple[str, ...] = ()) -> float:
        return self._values.get(values, 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        if not items and not self.label_names:
            items = [((), 0.0)]  # an unlabelled gauge always has its one sample
        return [*self._header(), *(f"{self.name}{_labels(self.label_names, k)} {_number(v)}"
                                   for k, v in items)]


class Histogram(_Family):
    """Observations counted into fixed buckets (upper bounds, ascending), with their sum."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 buckets: Iterable[float] = DURATION_BUCKETS,
                 lock: threading.Lock | None = None) -> None:
        super().__init__(name, help_text, labels, lock)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[tuple[str, ...], _Series] = {}

    def observe(self, value: float, values: tuple[str, ...] = ()) -> None:
        with self._lock:
            self.observe_locked(value, values)

    def observe_locked(self, value: float, values: tuple[str, ...]) -> None:
        """``observe`` under a lock the caller holds (``lock``)."""
        series = self._series.get(values)
        if series is None:
            series = self._series[values] = _Series(len(self.buckets) + 1)
        # bisect_left: a value equal to a bound counts in that bucket (``le`` is inclusive).
        series.counts[bisect.bisect_left(self.buckets, value)] += 1
        series.total += value
        series.count += 1

    def count(self, values: tuple[str, ...] = ()) -> int:
        series = self._series.get(values)
        return 0 if series is None else series.count

    def render(self) -> list[str]:
        with self._lock:
            items = sorted((k, (list(s.counts), s.total, s.count))
                           for k, s in self._series.items())
        lines = self._header()
        for values, (counts, total, count) in items:
            cumulative = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                cumulative += n
                le = f'le="{_number(bound)}"'
                lines.append(f"{self.name}_bucket{_labels(self.label_names, values, le)} "
                             f"{cumulative}")
            lines.append(f"{self.name}_sum{_labels(self.label_names, values)} {_number(total)}")
            lines.append(f"{self.name}_count{_labels(self.label_names, values)} {count}")
        return lines


class _Series:
    """One histogram series: the count in each bucket (not cumulative; the last is +Inf),
    the sum and the count of its observations."""

    __slots__ = ("count", "counts", "total")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets
        self.total = 0.0
        self.count = 0


class Registry:
    """The instruments of one process, in the order they were made; ``render`` is a scrape."""

    def __init__(self) -> None:
        self._families: list[_Family] = []
        #: The one lock of every instrument made here: an update of several takes it once.
        self.lock = threading.Lock()

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help_text, labels, self.lock))

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        return self._add(Gauge(name, help_text, labels, self.lock))

    def histogram(self, name: str, help_text: str, labels: Sequence[str] = (),
                  buckets: Iterable[float] = DURATION_BUCKETS) -> Histogram:
        return self._add(Histogram(name, help_text, labels, buckets, self.lock))

    def _add(self, family: _F) -> _F:
        if any(f.name == family.name for f in self._families):
            raise ValueError(f"a metric named {family.name} is registered already")
        self._families.append(family)
        return family

    def render(self) -> str:
        """The whole registry in the text exposition format, ending with a line feed."""
        lines: list[str] = []
        for family in self._families:
            lines.extend(family.render())
        return "\n".join(lines) + "\n"
