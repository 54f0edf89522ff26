"""The inbox's overview: what the record says of the recent calls, as figures and as SVG
charts the server draws (D314: no script draws them, no third-party code, nothing fetched).

``summarize`` reads rows once into an ``Overview``; ``overview_body`` writes it. Each chart is
an ``<svg role="img">`` with a ``<title>`` naming what it shows, and the same numbers are in a
table beside it, so a screen reader or a keyboard user reads exactly what the picture shows.
"""

from __future__ import annotations

import collections
import datetime as dt
import statistics
from collections.abc import Sequence
from typing import Final

import attrs

from toolhost._composition import InvocationRecord, InvocationState
from toolhost._mcp.inbox.inert import text

__all__ = ["BUCKETS", "STATES", "Overview", "overview_body", "summarize"]

#: The columns of the calls-over-time chart.
BUCKETS: Final = 24
#: The states a chart tells apart, in the order they stack, with their colours.
STATES: Final = (("succeeded", "#1f7a3a"), ("failed", "#a12a2a"), ("denied", "#8a5a00"),
                 ("waiting", "#23395d"), ("running", "#6b6b6b"))
_COLOUR: Final = dict(STATES)


def _state_of(row: InvocationRecord) -> str:
    if row.state is InvocationState.AWAITING_APPROVAL:
        return "waiting"
    if row.state in (InvocationState.RUNNING, InvocationState.APPROVED):
        return "running"
    return str(row.state.value)


@attrs.frozen
class ToolFigures:
    tool: str
    by_state: dict[str, int]
    p50_ms: float | None
    p95_ms: float | None

    @property
    def calls(self) -> int:
        return sum(self.by_state.values())


@attrs.frozen
class Overview:
    rows: int
    first: dt.datetime | None
    last: dt.datetime | None
    tools: list[ToolFigures]
    #: (bucket start, {state: calls}), oldest first.
    over_time: list[tuple[dt.datetime, dict[str, int]]]
    #: Waiting calls: (tool, how many, the oldest's age in seconds).
    waiting: list[tuple[str, int, float]]


def summarize(rows: Sequence[InvocationRecord], now: dt.datetime) -> Overview:
    by_tool: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    durations: dict[str, list[float]] = collections.defaultdict(list)
    waiting: dict[str, list[float]] = collections.defaultdict(list)
    for row in rows:
        state = _state_of(row)
        by_tool[row.tool_name][state] += 1
        if row.started_at is not None and row.finished_at is not None and state in (
                "succeeded", "failed"):
            durations[row.tool_name].append(
                (row.finished_at - row.started_at).total_seconds() * 1000)
        if state == "waiting":
            waiting[row.tool_name].append((now - row.created_at).total_seconds())
    tools = [ToolFigures(tool, dict(counts), *_p50_p95(durations.get(tool, [])))
             for tool, counts in sorted(by_tool.items(), key=lambda kv: -sum(kv[1].values()))]
    first = min((r.created_at for r in rows), default=None)
    last = max((r.created_at for r in rows), default=None)
    return Overview(len(rows), first, last, tools, _over_time(rows, first, last),
                    sorted(((t, len(a), max(a)) for t, a in waiting.items()),
                           key=lambda w: -w[2]))


def _p50_p95(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _over_time(rows: Sequence[InvocationRecord], first: dt.datetime | None,
               last: dt.datetime | None) -> list[tuple[dt.datetime, dict[str, int]]]:
    if first is None or last is None:
        return []
    width = max((last - first) / BUCKETS, dt.timedelta(seconds=1))
    buckets: list[collections.Counter[str]] = [collections.Counter() for _ in range(BUCKETS)]
    for row in rows:
        index = min(BUCKETS - 1, int((row.created_at - first) / width))
        buckets[index][_state_of(row)] += 1
    return [(first + width * i, dict(b)) for i, b in enumerate(buckets)]


# ---------------------------------------------------------------------------- drawing


def overview_body(overview: Overview) -> str:
    """The overview page's body."""
    if not overview.rows:
        return "<h1>Overview</h1><p>No calls recorded yet.</p>"
    span = (f"{overview.rows} calls from {overview.first:%Y-%m-%d %H:%M} to "
            f"{overview.last:%Y-%m-%d %H:%M} UTC")
    parts = ["<h1>Overview</h1>", f"<p>{text(span)}</p>", _legend()]
    parts += ["<h2>Calls per tool and status</h2>", _per_tool_chart(overview),
              _per_tool_table(overview)]
    parts += ["<h2>Calls over time</h2>", _over_time_chart(overview)]
    parts += ["<h2>Duration per tool</h2>", _durations(overview)]
    parts += ["<h2>Waiting for a decision</h2>", _waiting(overview)]
    return "".join(parts)


def _legend() -> str:
    items = "".join(
        f'<li><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" '
        f'fill="{colour}"/></svg> {name}</li>' for name, colour in STATES)
    return f'<ul class="legend" aria-label="colours">{items}</ul>'


def _per_tool_chart(overview: Overview) -> str:
    tools = overview.tools[:20]
    most = max(t.calls for t in tools)
    bar, label, gap = 18, 220, 6
    width, height = 760, len(tools) * (bar + gap)
    shapes = []
    for i, figures in enumerate(tools):
        y = i * (bar + gap)
        shapes.append(f'<text x="{label - 6}" y="{y + 13}" text-anchor="end">'
                      f"{text(figures.tool)}</text>")
        x = float(label)
        for state, _ in STATES:
            count = figures.by_state.get(state, 0)
            if not count:
                continue
            w = (width - label - 60) * count / most
            shapes.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" '
                          f'fill="{_COLOUR[state]}"><title>{text(figures.tool)}: {count} '
                          f"{state}</title></rect>")
            x += w
        shapes.append(f'<text x="{x + 4:.1f}" y="{y + 13}">{figures.calls}</text>')
    return (f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}"><title>Calls per tool, stacked by status'
            f"</title>{''.join(shapes)}</svg>")


def _per_tool_table(overview: Overview) -> str:
    head = "".join(f"<th scope=\"col\">{name}</th>" for name, _ in STATES)
    body = "".join(
        f"<tr><th scope=\"row\">{text(t.tool)}</th>"
        + "".join(f"<td>{t.by_state.get(name, 0)}</td>" for name, _ in STATES)
        + f"<td>{t.calls}</td></tr>" for t in overview.tools)
    return (f'<table class="figures"><caption>Calls per tool and status</caption><thead><tr>'
            f'<th scope="col">tool</th>{head}<th scope="col">all</th></tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _over_time_chart(overview: Overview) -> str:
    width, height, pad = 760, 160, 20
    most = max(sum(c.values()) for _, c in overview.over_time) or 1
    column = (width - pad) / len(overview.over_time)
    shapes = []
    for i, (start, counts) in enumerate(overview.over_time):
        y = float(height - pad)
        for state, _ in STATES:
            count = counts.get(state, 0)
            if not count:
                continue
            h = (height - 2 * pad) * count / most
            y -= h
            shapes.append(f'<rect x="{pad + i * column:.1f}" y="{y:.1f}" '
                          f'width="{column * 0.8:.1f}" height="{h:.1f}" '
                          f'fill="{_COLOUR[state]}"><title>from {start:%Y-%m-%d %H:%M}: '
                          f"{count} {state}</title></rect>")
    rows = "".join(f"<tr><th scope=\"row\">{start:%Y-%m-%d %H:%M}</th>"
                   f"<td>{sum(counts.values())}</td></tr>" for start, counts in overview.over_time)
    return (f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}"><title>Calls over time, {len(overview.over_time)} equal '
            f"periods, stacked by status</title>{''.join(shapes)}</svg>"
            f'<details><summary>The numbers</summary><table class="figures"><thead><tr>'
            f'<th scope="col">period from</th><th scope="col">calls</th></tr></thead>'
            f"<tbody>{rows}</tbody></table></details>")


def _durations(overview: Overview) -> str:
    timed = [t for t in overview.tools if t.p50_ms is not None]
    if not timed:
        return "<p>No call has finished yet.</p>"
    body = "".join(f"<tr><th scope=\"row\">{text(t.tool)}</th><td>{_ms(t.p50_ms)}</td>"
                   f"<td>{_ms(t.p95_ms)}</td></tr>" for t in timed)
    return ('<table class="figures"><caption>Duration of finished calls (started to '
            'finished)</caption><thead><tr><th scope="col">tool</th><th scope="col">p50</th>'
            f'<th scope="col">p95</th></tr></thead><tbody>{body}</tbody></table>')


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f} ms"


def _waiting(overview: Overview) -> str:
    if not overview.waiting:
        return "<p>Nothing is waiting.</p>"
    body = "".join(f"<tr><th scope=\"row\">{text(tool)}</th><td>{count}</td>"
                   f"<td>{_age(age)}</td></tr>" for tool, count, age in overview.waiting)
    return ('<table class="figures"><thead><tr><th scope="col">tool</th>'
            '<th scope="col">waiting</th><th scope="col">oldest waits</th></tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _age(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if days else f"{hours} h {minutes} min"

