"""Structured logging: one event per pipeline step, bound to the invocation and run ids.

Logs go to stderr (stdout is a transport for ``toolhost serve``), as JSON when stderr is not a
TTY. ``detail`` goes to logs, never into model-facing text. A processor redacts secrets: any
key ending in _API_KEY (or _TOKEN, _SECRET, _PASSWORD), any ``authorization`` key, any
``Secret`` value, however deeply nested, and credentials inside strings: after an auth scheme
(``Bearer``, ``Basic``, ``Token``; separated by a space, a colon, ``%20`` or ``+``), as the
whole value of an ``Authorization`` header (any scheme, also in a dict's repr), as the value
of a secret-named header or parameter (``x-api-key: ...``, ``?access_token=...``,
``OPENAI_API_KEY=...``, ``password: ...``), and bare, by a provider key's published shape
(``sk-...``, ``ghp_...``, ``AKIA...``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TextIO

from toolhost._model.secrets import Secret
from toolhost._model.settings import is_secret_name, redact_url_password
from toolhost._ports.clock import Clock

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["REDACTED", "apply_logging", "configure_logging", "get_logger", "logging_configured",
           "redact_secrets", "unfiltered_logger"]

REDACTED = "[redacted]"


class _Pattern:
    """A regular expression compiled when first used: compiling the five below was most of
    importing this module, which every command that opens the stores does, and most of them
    never redact a line."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def sub(self, replacement: Any, text: str) -> str:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return self._compiled.sub(replacement, text)


#: A credential after a scheme: RFC 6750's token68 characters.
_CHARACTER = r"[A-Za-z0-9._~+/=-]"
_CREDENTIAL = _CHARACTER + "+"
#: ``Bearer x``, ``Bearer: x``, ``Bearer=x``, and URL- or form-encoded: ``Bearer%20x``,
#: ``Bearer+x``. The credential runs to the next space, quote or separator, not only over
#: RFC 6750's characters: a malformed one (``Bearer tok!x``) is still somebody's secret.
_SCHEME = _Pattern(r"""(?i)\b(bearer|basic)(\s*[:=]\s*|%20|\+|\s+)([^\s"'&,;]+)""")
#: The credential of an ``Authorization`` header, whatever its scheme (``Token x``, a scheme
#: of a provider's own, none), also as a dict's repr shows it: ``'Authorization': '...'``.
#: The scheme stays, for the reader of the log.
_AUTHORIZATION = _Pattern(
    r"""(?i)(?<![A-Za-z0-9_-])((?:proxy-)?authorization)(["']?\s*[:=]\s*["']?"""
    r"""(?:[A-Za-z][A-Za-z0-9_-]*(?::\s*|%20|\+|\s+)(?=[^\s"']))?)([^\s"']+)""")
#: Provider keys by their published shapes, wherever they appear, named or not: OpenAI's and
#: Anthropic's ``sk-...``, GitHub's ``ghp_...``/``github_pat_...``, Slack's ``xoxb-...``,
#: AWS access key ids, Google API keys.
_KEY_SHAPES = _Pattern(
    r"\b(?:sk-[A-Za-z0-9_-]{20,}|(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})")
#: ``Token x`` (GitHub's and Django REST framework's scheme). "token" is also this host's
#: everyday word ("Token limit exceeded"), so after a plain space only a credential-shaped
#: word goes: one with a digit or one of ``_./+=~``, or 24 characters or more. With a colon
#: or ``=`` it is a named value, below, and goes whatever it is.
_TOKEN_SCHEME = _Pattern(
    rf"(?i)\b(token)(%20|\+|\s+)((?=[A-Za-z-]*[0-9_./+=~]){_CREDENTIAL}|{_CHARACTER}{{24,}})"
)
#: The value of a secret-named header, parameter or setting in a string: ``x-api-key: x``,
#: ``?access_token=x``, ``&client_secret=x``, ``OPENAI_API_KEY=x``, ``"api_key": "x"``,
#: ``password: x``. The name is a whole word (``max_tokens=5`` is not ``token=``).
_NAMED = _Pattern(
    r"""(?i)(?<![A-Za-z0-9_-])((?:[A-Za-z0-9_-]*[_-])?(?:api[_-]?key|token|secret|password))"""
    r"""(["']?\s*[:=]\s*["']?)([^\s"'&#,;]+)"""
)


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
        return _redact_text(value)
    return value


def _redact_text(text: str) -> str:
    """The string with each credential replaced; the scheme or name and separator stay."""
    for pattern in (_AUTHORIZATION, _SCHEME, _TOKEN_SCHEME, _NAMED):
        text = pattern.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
    text = _KEY_SHAPES.sub(REDACTED, text)
    return redact_url_password(text) if "://" in text else text


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


#: The standard library's level names and numbers (``logging.getLevelNamesMapping()``),
#: stated here so that configuring the log imports neither logging nor structlog; a test
#: keeps them equal.
_LEVEL_NUMBERS = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30,
                  "INFO": 20, "DEBUG": 10, "NOTSET": 0}

#: What structlog's dev module imports at its own import when it happens to be installed, for
#: colours and tracebacks toolhost's renderers never use (rich alone is +50-80 ms of a start).
_OPTIONAL = ("rich", "colorama", "better_exceptions")


class _Configuration:
    """What ``configure_logging`` was asked for, applied to structlog when it is imported."""

    __slots__ = ("clock", "json", "level", "stream")

    def __init__(self, clock: Clock, level: int, stream: TextIO, json: bool) -> None:
        self.clock, self.level, self.stream, self.json = clock, level, stream, json

    def apply(self, structlog: ModuleType) -> None:
        renderer: Any = (
            structlog.processors.JSONRenderer(sort_keys=True)
            if self.json
            # The plain traceback named, not structlog's default: that one is rich's when
            # rich is installed, and the output would depend on what else is installed.
            else structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback)
        )
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                _clock_timestamper(self.clock),
                redact_secrets,
                renderer,
            ],
            wrapper_class=structlog.make_filtering_bound_logger(self.level),
            logger_factory=structlog.PrintLoggerFactory(file=self.stream),
            cache_logger_on_first_use=False,
        )


#: ``configure_logging``'s configuration while structlog is not imported: a command that
#: logs nothing at its level (most one-shot commands) never imports structlog.
_pending: _Configuration | None = None
#: structlog, once ``_import_structlog`` has it.
_structlog: ModuleType | None = None


def configure_logging(
    clock: Clock, *, level: str = "info", stream: TextIO | None = None, json: bool | None = None
) -> None:
    """Configure structlog once for the process. ``json`` defaults to "stderr is not a TTY".

    Applied at once when structlog is imported already, else when the first event at the
    level (or ``apply_logging``) needs it; a configuration structlog was given meanwhile by
    someone else is newer, and is kept."""
    from toolhost._model.settings import LOG_LEVELS, SettingError

    global _pending
    number = _LEVEL_NUMBERS.get(level.strip().upper())
    if number is None:  # one line for the operator, not a KeyError
        raise SettingError(f"{level!r} is not a log level: use one of {', '.join(LOG_LEVELS)}")
    stream = stream if stream is not None else sys.stderr
    configuration = _Configuration(clock, number, stream,
                                   json if json is not None else not stream.isatty())
    if "structlog" in sys.modules:
        _pending = None
        configuration.apply(_import_structlog())
    else:
        _pending = configuration


def logging_configured() -> bool:
    """Whether structlog is configured, or ``configure_logging``'s configuration waits for it."""
    structlog = sys.modules.get("structlog")
    return _pending is not None or (structlog is not None and structlog.is_configured())


def apply_logging() -> ModuleType:
    """structlog, imported, with ``configure_logging``'s configuration applied if it waits (a
    server applies it at its start: a library it loads may log through structlog too)."""
    global _pending
    structlog = _import_structlog()
    pending, _pending = _pending, None
    # Configured since by someone else (a test's, an application's own): theirs is newer.
    if pending is not None and not structlog.is_configured():
        pending.apply(structlog)
    return structlog


def _import_structlog() -> ModuleType:
    """structlog, imported without the optional libraries its dev module picks up when they
    are installed (``_OPTIONAL``): each is marked "not installed" (None in ``sys.modules``, the
    import system's own marker) for the length of the import only. An application that
    imported structlog before toolhost did keeps its own."""
    global _structlog
    if _structlog is None:
        if "structlog" not in sys.modules:
            absent = [name for name in _OPTIONAL if name not in sys.modules]
            for name in absent:
                sys.modules[name] = None  # type: ignore[assignment]
            try:
                import structlog
            finally:
                for name in absent:
                    if name in sys.modules and sys.modules[name] is None:
                        del sys.modules[name]
        import structlog

        _structlog = structlog
    return _structlog


def unfiltered_logger() -> Any:
    """A logger with the configured processors and stream and no level filter: for what no
    level may hide (a loosened policy)."""
    structlog = apply_logging()
    return structlog.wrap_logger(
        None, wrapper_class=structlog.make_filtering_bound_logger(0), logger_name="toolhost")


def get_logger(**bound: Any) -> Any:
    return _Deferred(bound)


#: The level of each logging method a filtering logger may drop.
_LEVEL_OF = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40,
             "exception": 40, "critical": 50, "fatal": 50}


def _dropped(*args: Any, **kwargs: Any) -> None:
    return None


class _Deferred:
    """A logger bound on first use at a level the configuration lets through: the pipeline
    gets one per call and mostly logs below the level, so binding up front (~5 µs) is waste."""

    __slots__ = ("_bound", "_logger")

    def __init__(self, bound: dict[str, Any]) -> None:
        self._bound = bound
        self._logger: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._logger is None:
            level = _LEVEL_OF.get(name)
            # Below a configuration still waiting: dropped without importing structlog.
            pending = _pending
            if level is not None and pending is not None and level < pending.level:
                return _dropped
            structlog = (apply_logging() if pending is not None or _structlog is None
                         else _structlog)
            # Read at each call, not at binding: configure_logging may change it meanwhile.
            wrapper = structlog.get_config()["wrapper_class"]
            enabled = getattr(wrapper, "is_enabled_for", None)
            if level is not None and enabled is not None and not enabled(wrapper, level):
                return _dropped
            self._logger = structlog.get_logger("toolhost").bind(**self._bound)
        return getattr(self._logger, name)
