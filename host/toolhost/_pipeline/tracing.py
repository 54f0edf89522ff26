"""OpenTelemetry spans for invocations and the pipeline steps that take time.

One span per invocation, named and attributed by the GenAI semantic conventions for tool
execution (``execute_tool {gen_ai.tool.name}``, kind INTERNAL, ``gen_ai.operation.name =
execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` = the invocation id, ``error.type``
on failure), plus toolhost's own (``toolhost.tool.version``, ``toolhost.status``,
``toolhost.reason_code``, ``toolhost.run_id``). Its children are the steps that take time
(``STEPS``): child spans rather than span events, because what an operator asks of a slow call
is *where* the time went, and an event is a point without a duration.

Only ``opentelemetry-api`` is used, imported guardedly: without it (the CLI installed without
the ``mcp`` or ``otel`` extra) every function here is a no-op. With the API and no SDK
configured, nothing is made either: whether a tracer provider exists is asked once per
``CHECK_EVERY_S`` (the API's answer costs ~1 µs, too much to ask on every call), and a real one,
once seen, is kept (the API sets the global provider once per process).

Never the arguments, the results or a secret: the arguments go on the span only when the
operator sets ``TOOLHOST_TRACE_ARGUMENTS=on``, and then redacted as a log line is (the log's
redaction: members named like a credential, credentials inside strings, URL passwords), and
every value of a secret setting as well (``redacted_arguments``).

A name no registered tool has is the caller's word: the span is named ``execute_tool`` alone
once the call did not resolve, and ``gen_ai.tool.name`` is the name as a refusal's detail shows
it (``steps.shown``: at most 200 characters), never a megabyte a caller sent.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from toolhost._model.host_reasons import UNKNOWN_VERSION
from toolhost._model.outcome import Outcome, OutcomeStatus, ToolFailure
from toolhost._pipeline.log import SecretValues, redact_value, secret_values
from toolhost._pipeline.steps import shown

#: The API's modules, imported by ``api_loaded`` once something else in the process has.
otel_trace: Any = None
otel_context: Any = None
otel_propagate: Any = None


def api_loaded() -> bool:
    """Whether the OpenTelemetry API is imported here, importing it only when some other code
    already has: a tracer or meter provider is configured by code that imported the API (the
    operator's setup, ``opentelemetry-instrument``'s sitecustomize, the MCP SDK), so before
    that there is nothing to report to, and ``toolhost call`` does not pay the API's ~15 ms
    of imports for nothing (D274)."""
    global otel_trace, otel_context, otel_propagate
    if otel_trace is not None:
        return True
    if "opentelemetry" not in sys.modules:
        return False
    try:
        from opentelemetry import context, propagate, trace
    except ImportError:  # pragma: no cover - a broken or partial installation
        return False
    otel_context, otel_propagate, otel_trace = context, propagate, trace
    return True

__all__ = [
    "CHECK_EVERY_S",
    "STEPS",
    "CallTrace",
    "ProviderProbe",
    "Tracing",
    "continued_trace",
    "named_no_tool",
    "parent_context",
    "record_outcome",
    "step",
]

#: The instrumentation scope's name.
TRACER_NAME = "toolhost"
#: How often, at most, the API is asked again whether a tracer provider has been configured.
CHECK_EVERY_S = 1.0
#: The step spans' names, by what they time.
STEPS = {
    "validate": "toolhost.validate",      # steps 1 to 4: resolve, enabled, scopes, arguments
    "policy": "toolhost.policy",          # step 5
    "approval": "toolhost.approval.wait",  # a person deciding within the call (MCP)
    "execute": "toolhost.execute",        # step 8: the tool's body
    "excerpt": "toolhost.excerpt",        # step 12: excerpt and artifactize the output
    "record": "toolhost.record",          # a row write (steps 6 and 13, a writer's running row)
}
_REDACTED = "***"

#: The invocation being traced in this context (its span is the current span), or None.
_current: contextvars.ContextVar[CallTrace | None] = contextvars.ContextVar(
    "toolhost_call_trace", default=None)
_current_get = _current.get


class ProviderProbe:
    """When to ask the API again whether a provider (tracer or meter) has been configured: at
    most once per ``CHECK_EVERY_S``, and only once the API is imported (D274)."""

    __slots__ = ("_monotonic", "_next")

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._next = float("-inf")

    def due(self) -> bool:
        now = self._monotonic()
        if now < self._next:
            return False
        self._next = now + CHECK_EVERY_S
        return api_loaded()


class _NoStep:
    """The step of a call nobody traces: entering and leaving cost a method call each."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_STEP = _NoStep()


class _Step:
    """One step's child span, current while the step runs (a tool body's own spans, an HTTP
    client's say, are its children)."""

    __slots__ = ("_name", "_span", "_token", "_tracer")

    def __init__(self, tracer: Any, name: str) -> None:
        self._tracer = tracer
        self._name = name

    def __enter__(self) -> None:
        self._span = self._tracer.start_span(self._name)
        self._token = otel_context.attach(otel_trace.set_span_in_context(self._span))

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        otel_context.detach(self._token)
        if exc is not None:
            self._span.set_attribute("error.type", _error_type(exc))
        self._span.end()


class CallTrace:
    """The span of one invocation. Opened by the pipeline (``invoke``, ``resume``), or by a
    front end around a whole request (``Tracing.request``: an MCP ``tools/call`` whose
    approval is asked within the call), in which case the pipeline's calls inside it report
    to this one span instead of opening their own."""

    __slots__ = ("_outer", "_token", "failed", "span", "tracer")

    def __init__(self, tracer: Any, span: Any, outer: bool) -> None:
        self.tracer = tracer
        self.span = span
        self._outer = outer
        self._token: Any = None
        #: Whether the last outcome reported failed: the span's ``error.type`` is its reason
        #: code, which the exception a front end answers it with (MCP's -32602) must not hide.
        self.failed = False


class Tracing:
    """Spans for the pipeline and its front ends, as the settings ask.

    :param monotonic: the host's monotonic clock (seconds), for when to ask the API again.
    :param arguments: put the (redacted) arguments on the invocation span
        (``TOOLHOST_TRACE_ARGUMENTS``).
    :param secrets: the values of the secret settings, never to appear in a span.
    """

    def __init__(self, monotonic: Callable[[], float], *, arguments: bool = False,
                 secrets: Iterable[str] = ()) -> None:
        self._probe = ProviderProbe(monotonic)
        self._tracer: Any = None
        self.arguments = arguments
        self._secrets = SecretValues(secrets)

    @classmethod
    def from_settings(cls, settings: Any, monotonic: Callable[[], float]) -> Tracing:
        return cls(monotonic, arguments=settings.flag("TOOLHOST_TRACE_ARGUMENTS"),
                   secrets=secret_values(settings.env))

    def tracer(self) -> Any:
        """The tracer, or None while no tracer provider is configured (or no API installed)."""
        if self._tracer is not None:
            return self._tracer
        if not self._probe.due():
            return None
        provider = otel_trace.get_tracer_provider()
        if isinstance(provider, (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)):
            return None
        from toolhost import __version__

        self._tracer = provider.get_tracer(TRACER_NAME, __version__)
        return self._tracer

    # ------------------------------------------------------------------ the invocation span

    def begin(self, name: str, run_id: str, arguments: Any = None) -> CallTrace | None:
        """Open the invocation's span and make it current; None when nothing is traced. A
        request's span (``request``) already open in this context is the invocation's."""
        outer = _current.get()
        if outer is not None and outer._outer:
            outer.span.set_attribute("toolhost.run_id", run_id)
            if arguments is not None and self.arguments:
                outer.span.set_attribute("gen_ai.tool.call.arguments",
                                         self.redacted_arguments(arguments))
            return outer
        tracer = self.tracer()
        if tracer is None:
            return None
        name = shown(name)  # a registered tool's name is itself
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": name, "toolhost.run_id": run_id}
        if arguments is not None and self.arguments:
            attributes["gen_ai.tool.call.arguments"] = self.redacted_arguments(arguments)
        span = tracer.start_span(f"execute_tool {name}", kind=otel_trace.SpanKind.INTERNAL,
                                 attributes=attributes)
        call = CallTrace(tracer, span, outer=False)
        call._token = (otel_context.attach(otel_trace.set_span_in_context(span)),
                       _current.set(call))
        return call

    def end(self, call: CallTrace | None, outcome: Outcome | None,
            exc: BaseException | None = None) -> None:
        """Close the invocation's span with what the outcome says (an outer request's span
        is only told; its front end closes it)."""
        if call is None:
            return
        if outcome is not None:
            call.failed = record_outcome(call.span, outcome)
        elif exc is not None:
            call.span.set_attribute("error.type", _error_type(exc))
            call.span.set_status(otel_trace.StatusCode.ERROR)
        if call._outer:
            return
        context_token, call_token = call._token
        _current.reset(call_token)
        otel_context.detach(context_token)
        call.span.end()

    @staticmethod
    def step(name: str) -> _Step | _NoStep:
        """``step``."""
        return step(name)

    # ------------------------------------------------------------------ a front end's request

    def request(self, name: str, parent: Any = None) -> _Request:
        """The invocation span around a whole front-end request (an MCP ``tools/call``),
        continuing the trace of ``parent`` (``parent_context``), or of the current context."""
        return _Request(self, name, parent)

    def redacted_arguments(self, arguments: Any) -> str:
        """The arguments as JSON, redacted as a log line is (``log.redact_value``) and with
        every value of a secret setting replaced, each by ``***``. Arguments JSON cannot
        show (a key that is not text, a cycle: the Python API takes any object) are named
        only: the span must not fail the call it describes."""
        try:
            text = json.dumps(redact_value(arguments, _REDACTED), sort_keys=True,
                              ensure_ascii=False, default=repr)
        except (TypeError, ValueError, RecursionError) as exc:
            return f"(arguments not shown: {type(exc).__name__})"
        return self._secrets.redact(text, _REDACTED)


class _Request:
    """``Tracing.request``: open and current for the request, ended when it is answered."""

    def __init__(self, tracing: Tracing, name: str, parent: Any) -> None:
        self._tracing = tracing
        self._name = name
        self._parent = parent
        self._call: CallTrace | None = None
        self._tokens: Any = None

    def __enter__(self) -> CallTrace | None:
        tracer = self._tracing.tracer()
        if tracer is None:
            return None
        name = shown(self._name)
        span = tracer.start_span(
            f"execute_tool {name}", context=self._parent,
            kind=otel_trace.SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name})
        self._call = CallTrace(tracer, span, outer=True)
        self._tokens = (otel_context.attach(otel_trace.set_span_in_context(span)),
                        _current.set(self._call))
        return self._call

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if self._call is None:
            return
        context_token, call_token = self._tokens
        _current.reset(call_token)
        otel_context.detach(context_token)
        if exc is not None and not self._call.failed:
            self._call.span.set_attribute("error.type", _error_type(exc))
            self._call.span.set_status(otel_trace.StatusCode.ERROR)
        self._call.span.end()


def named_no_tool(outcome: Outcome) -> bool:
    """Whether the call named no registered tool: it resolved none (a resolved call has a
    version, whatever failed after it, a record store's outage included), and not for an
    unknown version of a tool that exists, whose name is the tool's (D273, D420)."""
    if outcome.version is not None:
        return False
    return outcome.failure is None or outcome.failure.reason_code != UNKNOWN_VERSION


def record_outcome(span: Any, outcome: Outcome) -> bool:
    """The outcome's attributes on an invocation span; a failure is the span's error, its
    ``error.type`` the reason code (D272). Whether it was one."""
    attributes: dict[str, Any] = {"toolhost.status": outcome.status.value}
    if outcome.invocation_id is not None:
        attributes["gen_ai.tool.call.id"] = outcome.invocation_id
    if outcome.version is not None:
        attributes["toolhost.tool.version"] = outcome.version
    if outcome.failure is not None:
        attributes["toolhost.reason_code"] = outcome.failure.reason_code
    span.set_attributes(attributes)
    if named_no_tool(outcome):  # the caller's word, not a span name (names are few, D273)
        span.update_name("execute_tool")
    if outcome.status is OutcomeStatus.FAILED and outcome.failure is not None:
        span.set_attribute("error.type", outcome.failure.reason_code)
        # No description: the static message is the model's, the detail the operator's log.
        span.set_status(otel_trace.StatusCode.ERROR)
        return True
    return False


def step(name: str) -> _Step | _NoStep:
    """A context manager timing one step of the invocation traced in this context as a child
    span (``STEPS[name]``); a no-op when none is (one context variable read: the pipeline
    enters five or six a call)."""
    call = _current_get()
    if call is None:
        return _NO_STEP
    return _Step(call.tracer, STEPS[name])


def parent_context(meta: Mapping[str, Any] | None,
                   headers: Mapping[str, str] | None) -> Any:
    """Whose trace an MCP request continues: the caller's ``params._meta.traceparent`` (and
    ``tracestate``), else the HTTP request's ``traceparent`` header; None (the current
    context: the SDK's own request span when it runs, else a new trace) when neither holds a
    valid one. The SDK's request span, when it runs, already continues ``_meta``: it is then
    the parent, so the trace keeps it."""
    if not api_loaded():
        return None
    current = otel_trace.get_current_span().get_span_context()
    for carrier in (meta, headers):
        if not carrier or "traceparent" not in carrier:
            continue
        try:
            extracted = otel_propagate.extract(
                {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")})
        except (TypeError, ValueError):
            continue
        found = otel_trace.get_current_span(extracted).get_span_context()
        if not found.is_valid:
            continue
        if current.is_valid and current.trace_id == found.trace_id:
            return None  # the SDK's span continued it: ours is that span's child
        return extracted
    return None


@contextlib.contextmanager
def continued_trace(settings: Any) -> Iterator[None]:
    """For ``toolhost call``: the trace of ``TRACEPARENT`` (and ``TRACESTATE``), the
    environment carriers OpenTelemetry names for a process started inside a trace (a CI
    job's, a script's), is the current context while it runs; without a valid one the call's
    span is the root of a trace of its own."""
    parent = settings.get("TRACEPARENT") if api_loaded() else None
    if not parent:
        yield
        return
    carrier = {"traceparent": parent.strip()}
    state = settings.get("TRACESTATE")
    if state:
        carrier["tracestate"] = state.strip()
    extracted = otel_propagate.extract(carrier)
    if not otel_trace.get_current_span(extracted).get_span_context().is_valid:
        yield
        return
    token = otel_context.attach(extracted)
    try:
        yield
    finally:
        otel_context.detach(token)


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, ToolFailure):
        return exc.reason_code
    return type(exc).__qualname__
