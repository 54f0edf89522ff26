"""Structured logging: one event per pipeline step, bound to the invocation and run ids.

Logs go to stderr (stdout is a transport for ``toolhost serve``), as JSON when stderr is not a
TTY. ``detail`` goes to logs, never into model-facing text. A processor redacts secrets: any
key ending in _API_KEY (or _TOKEN, _SECRET, _PASSWORD), any ``authorization`` key, any
``Bearer`` credential inside a string, and any ``Secret`` value, however deeply nested.
"""

from __future__ import annotations

import logging as _stdlib_logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from toolhost._model.secrets import Secret
from toolhost._model.settings import is_secret_name
from toolhost._ports.clock import Clock

__all__ = ["REDACTED", "configure_logging", "get_logger", "redact_secrets"]

REDACTED = "[redacted]"
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")


def _is_secret_key(key: str) -> bool:
    return is_secret_name(key) or key.lower() in {"authorization", "proxy-authorization",
                                                  "x-api-key", "api_key", "apikey"}


def _redact(value: Any) -> Any:
    if isinstance(value, Secret):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: REDACTED if isinstance(k, str) and _is_secret_key(k) else _redact(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(_redact(v) for v in value)
    if isinstance(value, str):
        return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", value)
    return value


def redact_secrets(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: secrets never reach a log line, however deeply nested."""
    return {k: REDACTED if _is_secret_key(k) else _redact(v) for k, v in event_dict.items()}


def _clock_timestamper(clock: Clock) -> Any:
    # Timestamps come from the injected Clock, so logs under a fixed clock are byte-stable.
    def add_timestamp(
        logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event_dict["timestamp"] = clock.now().isoformat(timespec="microseconds")
        return event_dict

    return add_timestamp


def configure_logging(
    clock: Clock, *, level: str = "info", stream: TextIO | None = None, json: bool | None = None
) -> None:
    """Configure structlog once for the process. ``json`` defaults to "stderr is not a TTY"."""
    stream = stream if stream is not None else sys.stderr
    as_json = json if json is not None else not stream.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _clock_timestamper(clock),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            _stdlib_logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def get_logger(**bound: Any) -> Any:
    return structlog.get_logger("toolhost").bind(**bound)
