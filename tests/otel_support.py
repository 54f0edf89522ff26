"""One OpenTelemetry SDK tracer provider for the test process, and exporters that collect
only while a test wants them.

The API sets the global tracer provider once per process: the first test that needs spans
installs an SDK ``TracerProvider``, and every later one adds its own collecting processor to
it. A processor cannot be removed from a provider, so each collects only between its
``start`` and ``stop`` (the tests after it are not slowed by a growing list).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _WhileOn(SpanProcessor):
    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.on = False

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.on:
            self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def provider() -> TracerProvider:
    """The process's SDK tracer provider, installed by the first caller."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    made = TracerProvider()
    trace.set_tracer_provider(made)
    assert trace.get_tracer_provider() is made
    return made


@contextmanager
def collected_spans() -> Iterator[InMemorySpanExporter]:
    """The spans every tracer of the process ends while this is open."""
    exporter = InMemorySpanExporter()
    processor = _WhileOn(SimpleSpanProcessor(exporter))
    provider().add_span_processor(processor)
    processor.on = True
    try:
        yield exporter
    finally:
        processor.on = False


def every_text(span: ReadableSpan) -> str:
    """Everything a span carries as text: name, attributes, events and their attributes,
    status, links: what must never hold an argument or a secret."""
    parts = [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
    for event in span.events:
        parts += [event.name, repr(dict(event.attributes or {}))]
    for link in span.links:
        parts.append(repr(dict(link.attributes or {})))
    return "\n".join(parts)
