"""Who an MCP client acts as, read once from the host's settings when ``serve`` starts.

    TOOLHOST_MCP_PRINCIPAL            principal id recorded on every invocation row (default
                                      ``mcp``)
    TOOLHOST_MCP_SCOPES               comma-separated scopes granted to that principal; unset:
                                      every scope a served tool requires (the operator chose
                                      the roster, so the roster's scopes are what they granted);
                                      set, even empty: exactly those
    TOOLHOST_MCP_ELICITATION          ``on`` (default) or ``off``: whether a client that supports
                                      elicitation may approve a paused call by asking its user.
                                      ``off`` leaves every approval to ``toolhost approve``
    TOOLHOST_MCP_ELICITATION_TIMEOUT_S seconds to wait for the user's answer (default 300);
                                      unanswered, the call stays pending for the operator
    TOOLHOST_MCP_WORKSPACE            an existing directory every session's run uses as its
                                      workspace root (as ``toolhost call --workspace`` does);
                                      unset: each session gets a fresh workspace, discarded
                                      when the server stops
    TOOLHOST_MCP_PINS                 ``name=version,name=version``: serve these versions under
                                      their names (``toolhost serve --pin`` adds to them), for a
                                      client pinned to an older contract
    TOOLHOST_MCP_RUN_TIMEOUT_S        seconds each session's run may last (its deadline; unset:
                                      none). A call approved after it does not run
    TOOLHOST_MCP_STDIO                ``auto`` (default): serve stdio on the event loop when
                                      stdin and stdout are pipes; ``sdk``: always through the
                                      SDK's own thread-backed ``stdio_server`` (the fallback,
                                      and what bench/bench_mcp.py compares against)

Why environment settings: a desktop client starts ``toolhost serve`` from a JSON config whose
only knobs are the command, its arguments and its environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from toolhost._model.context import Principal
from toolhost._model.settings import Settings
from toolhost._registration.refusals import Registered

__all__ = ["ConfigError", "ServeConfig", "pins_setting"]

DEFAULT_PRINCIPAL = "mcp"
DEFAULT_ELICITATION_TIMEOUT_S = 300.0
#: How often a server settles rows whose process died (TOOLHOST_RECOVER_INTERVAL_S; 0: only at
#: its start). With several hosts on one database, a host that dies leaves rows another must
#: settle while it keeps serving, not only when it next restarts.
DEFAULT_RECOVER_INTERVAL_S = 60.0


class ConfigError(ValueError):
    """A TOOLHOST_MCP_* setting the server cannot use; the message names it."""


@attrs.frozen(kw_only=True)
class ServeConfig:
    principal: Principal
    elicitation: bool = True
    elicitation_timeout_s: float = DEFAULT_ELICITATION_TIMEOUT_S
    #: False: stdio always through the SDK's stdio_server (TOOLHOST_MCP_STDIO=sdk).
    loop_stdio: bool = True
    #: The operator's directory every run uses as its workspace; None: a fresh one per run.
    workspace: Path | None = None
    #: Seconds between recoveries while serving; None: only the one at the start.
    recover_interval_s: float | None = DEFAULT_RECOVER_INTERVAL_S
    #: name -> version served under that name (TOOLHOST_MCP_PINS and ``--pin``).
    pins: Mapping[str, str] = attrs.field(factory=dict)
    #: Each session's run deadline, in seconds from its start; None: none.
    run_timeout_s: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings, roster: Iterable[Registered], *,
                      pins: Mapping[str, str] | None = None) -> ServeConfig:
        """:raises ConfigError: a malformed value (one line naming the setting)."""
        principal_id = (settings.get("TOOLHOST_MCP_PRINCIPAL") or "").strip() or DEFAULT_PRINCIPAL
        raw_scopes = settings.get("TOOLHOST_MCP_SCOPES")
        if raw_scopes is None:
            scopes = frozenset(s for r in roster for s in r.tool.scopes)
        else:
            scopes = frozenset(s.strip() for s in raw_scopes.split(",") if s.strip())
        switch = (settings.get("TOOLHOST_MCP_ELICITATION") or "on").strip().lower()
        if switch not in ("on", "off"):
            raise ConfigError(f"TOOLHOST_MCP_ELICITATION must be on or off, not {switch!r}")
        raw_timeout = settings.get("TOOLHOST_MCP_ELICITATION_TIMEOUT_S")
        timeout = DEFAULT_ELICITATION_TIMEOUT_S
        if raw_timeout is not None:
            try:
                timeout = float(raw_timeout)
            except ValueError:
                timeout = -1.0
            if not timeout > 0:
                raise ConfigError(
                    f"TOOLHOST_MCP_ELICITATION_TIMEOUT_S must be a positive number of seconds, "
                    f"not {raw_timeout!r}")
        stdio = (settings.get("TOOLHOST_MCP_STDIO") or "auto").strip().lower()
        if stdio not in ("auto", "sdk"):
            raise ConfigError(f"TOOLHOST_MCP_STDIO must be auto or sdk, not {stdio!r}")
        raw_workspace = (settings.get("TOOLHOST_MCP_WORKSPACE") or "").strip()
        workspace = Path(raw_workspace) if raw_workspace else None
        if workspace is not None and not workspace.is_dir():
            raise ConfigError(
                f"TOOLHOST_MCP_WORKSPACE {raw_workspace!r} is not an existing directory")
        raw_run = (settings.get("TOOLHOST_MCP_RUN_TIMEOUT_S") or "").strip()
        run_timeout = None
        if raw_run:
            try:
                run_timeout = float(raw_run)
            except ValueError:
                run_timeout = -1.0
            if not 0 < run_timeout < float("inf"):
                raise ConfigError(f"TOOLHOST_MCP_RUN_TIMEOUT_S must be a positive number of "
                                  f"seconds, not {raw_run!r}")
        return cls(principal=Principal(principal_id, scopes), elicitation=switch == "on",
                   elicitation_timeout_s=timeout, loop_stdio=stdio == "auto",
                   workspace=workspace, recover_interval_s=_recover_interval(settings),
                   pins=dict(pins or {}), run_timeout_s=run_timeout)


def pins_setting(settings: Settings) -> list[str]:
    """The ``NAME=VERSION`` items of TOOLHOST_MCP_PINS (comma-separated; blanks skipped)."""
    return [item for item in (settings.get("TOOLHOST_MCP_PINS") or "").split(",")
            if item.strip()]


def _recover_interval(settings: Settings) -> float | None:
    raw = (settings.get("TOOLHOST_RECOVER_INTERVAL_S") or "").strip()
    if not raw:
        return DEFAULT_RECOVER_INTERVAL_S
    try:
        interval = float(raw)
    except ValueError:
        interval = -1.0
    if not (interval >= 0 and interval != float("inf")):
        raise ConfigError(f"TOOLHOST_RECOVER_INTERVAL_S must be a number of seconds (0: only at "
                          f"the start), not {raw!r}")
    return interval or None
