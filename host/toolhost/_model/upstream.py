"""The MCP gateway's value objects: configured upstream servers, what they list, what a call
returns, and why one failed.

An upstream server is a ``[mcp.servers.<name>]`` table of ``toolhost.toml`` (D277): ``command``
and ``args`` (stdio) or ``url`` (Streamable HTTP; with a password in it, a reference or in a file
other users cannot read, as ``token``), ``env``, ``token``; its tools' classification is
the operator's, per server (the same keys on the server's table, as defaults) and per tool
(``[mcp.servers.<name>.tools.<tool>]``). ``parse_servers`` checks them; every problem is one line
``PATH:LINE: [mcp.servers.x] key: problem``. A ``command`` given by a relative path (``./server``)
names the file beside ``toolhost.toml``, as the file's path settings do (D497); a bare name is
looked up on the server's ``PATH``.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from toolhost._model.config_file import readable_secret, referenced_file, url_has_password
from toolhost._model.errors import ToolhostError
from toolhost._model.secrets import Secret
from toolhost._model.settings import SettingError, is_secret_name
from toolhost._model.spec import Idempotency, Risk, SideEffect

__all__ = [
    "MAX_SERVER_NAME",
    "SERVER_NAME_PATTERN",
    "TOO_LONG_WORDS",
    "ServerState",
    "UpstreamError",
    "UpstreamFailure",
    "UpstreamResult",
    "UpstreamServer",
    "UpstreamStatus",
    "UpstreamTool",
    "UpstreamToolClass",
    "parse_servers",
    "too_long_words",
]

#: A server's name: lower-case words joined by single underscores, at most 24 characters. No
#: ``__`` and no trailing ``_``, so the first ``__`` of a gateway tool's name
#: (``mcp.<server>__<tool>``) always ends the server's name, and two servers' tools never
#: share a name; 24 leaves 34 characters of the provider's 64 for the tool.
SERVER_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
MAX_SERVER_NAME = 24

_SERVER_KEYS = frozenset({"command", "args", "url", "env", "token", "tools", "side_effect",
                          "risk", "idempotency", "scopes", "timeout_s", "enabled",
                          "close_schema", "connect_timeout_s"})
_TOOL_KEYS = frozenset({"side_effect", "risk", "idempotency", "scopes", "timeout_s", "enabled",
                        "description", "close_schema"})
#: A timeout an operator may give a gateway tool: up to a day.
_MAX_TIMEOUT_S = 86400.0
#: How long a server may take to start and answer ``initialize``, a listing or a ping, unless
#: its table says otherwise; a start waits as long as its slowest server's (D443).
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: The longest ``connect_timeout_s``: a server fetched and built on first start (``npx -y``,
#: ``uvx``) takes a minute or two; past ten, the start is better told it is unreachable.
_MAX_CONNECT_TIMEOUT_S = 600.0


@attrs.frozen(kw_only=True)
class UpstreamToolClass:
    """The operator's classification of upstream tools (per server, or per tool). A field
    left None falls back to the server's, then to the gateway's default."""

    side_effect: SideEffect | None = None
    risk: Risk | None = None
    idempotency: Idempotency | None = None
    scopes: tuple[str, ...] | None = None
    timeout_s: float | None = None
    enabled: bool | None = None
    #: What the model reads instead of the upstream server's own description.
    description: str | None = None
    #: Close the upstream's open input schema (every object level ``additionalProperties:
    #: false``) instead of leaving the tool out (D282).
    close_schema: bool | None = None

    def over(self, fallback: UpstreamToolClass) -> UpstreamToolClass:
        """This classification, with ``fallback``'s value wherever this one has none."""
        return UpstreamToolClass(**{
            f.name: getattr(self, f.name) if getattr(self, f.name) is not None
            else getattr(fallback, f.name) for f in attrs.fields(UpstreamToolClass)})


@attrs.frozen(kw_only=True)
class UpstreamServer:
    """One configured upstream MCP server: exactly one of ``command`` and ``url``."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    #: Extra environment of a stdio server's process (its values may be credentials).
    env: Mapping[str, Secret] = attrs.field(factory=dict)
    #: The bearer token of a Streamable HTTP server.
    token: Secret | None = None
    #: The server's defaults for its tools.
    defaults: UpstreamToolClass = attrs.field(factory=UpstreamToolClass)
    #: Per upstream tool name, as the server lists it.
    tools: Mapping[str, UpstreamToolClass] = attrs.field(factory=dict)
    enabled: bool = True
    #: Seconds the server may take to start and answer ``initialize``, a listing or a ping.
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def classification(self, tool: str) -> UpstreamToolClass:
        """The operator's classification of ``tool`` (the server's defaults under it)."""
        return self.tools.get(tool, UpstreamToolClass()).over(self.defaults)


# ---------------------------------------------------------------------------- what upstream says


@attrs.frozen(kw_only=True)
class UpstreamTool:
    """One tool an upstream server lists. Everything here is the upstream's word, untrusted:
    the description and annotations are never used to classify."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class UpstreamResult:
    """A ``tools/call`` result: its text blocks joined, a line for each block of another kind,
    the structured content, and whether the upstream flagged it as an error."""

    text: str
    structured: Mapping[str, Any] | None = None
    is_error: bool = False


class UpstreamFailure(enum.Enum):
    """Why a call to an upstream server failed, as the gateway's static reasons say it."""

    UNREACHABLE = "unreachable"  # not connected (never was, or reconnecting)
    CONNECTION_LOST = "connection_lost"  # the server went away during the call
    TIMED_OUT = "timed_out"  # the SDK's own request timeout
    PROTOCOL = "protocol"  # an answer that is not a valid result
    REJECTED = "rejected"  # a JSON-RPC error answer to tools/call
    TOO_LARGE = "too_large"  # a result over what the gateway accepts


#: How a message past a transport's bound is refused. The SDK carries these words back inside
#: its own errors, so the adapter knows the refusal again by them (``too_long_words``).
TOO_LONG_WORDS = "a message of more than "


def too_long_words(size: int) -> str:
    return f"{TOO_LONG_WORDS}{size} bytes"


class UpstreamError(ToolhostError):
    """A call failed. ``detail`` is for operators only (the row, logs): it may carry the
    upstream's own text, which is attacker-controlled and never reaches the model."""

    def __init__(self, failure: UpstreamFailure, detail: str = "") -> None:
        super().__init__(failure.value)
        self.failure = failure
        self.detail = detail


class ServerState(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    UNREACHABLE = "unreachable"
    CLOSED = "closed"


@attrs.frozen(kw_only=True)
class UpstreamStatus:
    """A server's state now; ``problem`` says why it is not connected (operators' words)."""

    name: str
    state: ServerState
    problem: str = ""
    #: Its tools as last listed (empty until it is connected once).
    tools: tuple[UpstreamTool, ...] = ()


# ---------------------------------------------------------------------------- the config tables

#: ``where(table, key)`` -> ``PATH:LINE``; ``reference(where, ref)`` -> the value a
#: ``{ env = ... }`` / ``{ file = ... }`` table stands for (``config_file``'s rules).
Where = Callable[[str, str | None], str]
Reference = Callable[[str, Mapping[str, Any]], str]


def parse_servers(
    servers: object, *, where: Where, reference: Reference, world_readable: bool,
    path: str,
) -> tuple[UpstreamServer, ...]:
    """``[mcp.servers]`` as written, checked. ``world_readable``: the file is readable by
    every user, so no credential may be written in it inline (D269).

    :raises SettingError: the first problem, ``PATH:LINE: [mcp.servers.x] key: problem``.
    """
    if not isinstance(servers, Mapping):
        raise SettingError(f"{where('mcp', 'servers')}: [mcp] servers: must be a table of "
                           "servers ([mcp.servers.<name>])")
    found = []
    for name in sorted(servers):
        table = f"mcp.servers.{name}"

        def fail(key: str | None, problem: str, table: str = table) -> SettingError:
            label = f"[{table}] {key}" if key else f"[{table}]"
            return SettingError(f"{where(table, key)}: {label}: {problem}")

        if not SERVER_NAME_PATTERN.fullmatch(name) or len(name) > MAX_SERVER_NAME:
            raise fail(None, f"the server name must match {SERVER_NAME_PATTERN.pattern} and be "
                       f"at most {MAX_SERVER_NAME} characters (e.g. files, git_hub)")
        content = servers[name]
        if not isinstance(content, Mapping):
            raise fail(None, "must be a table")
        found.append(_server(name, content, table, fail, where, reference, world_readable,
                             path))
    return tuple(found)


Fail = Callable[..., SettingError]


def _server(name: str, content: Mapping[str, Any], table: str, fail: Fail, where: Where,
            reference: Reference, world_readable: bool, path: str) -> UpstreamServer:
    for key in content:
        if key not in _SERVER_KEYS:
            raise fail(key, f"not a key of a server (its keys: {', '.join(sorted(_SERVER_KEYS))})")
    command, url = content.get("command"), content.get("url")
    if (command is None) == (url is None):
        raise fail(None, "set exactly one of command (a stdio server) and url (Streamable HTTP)")
    if command is not None:
        command = _command(command, path, fail)
    if url is not None:
        url = _url(url, table, fail, where, reference, world_readable, path)
    args = content.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise fail("args", "must be a list of strings")
    if args and command is None:
        raise fail("args", "is for a stdio server (command); a url server takes none")

    def secret(at: tuple[str, str], value: object, label: str, *,
               named_secret: bool) -> Secret:
        """``value``, written at key ``at[1]`` of table ``at[0]`` (``env.NAME`` is ``NAME``
        of ``<table>.env``: its own line when ``env`` is a table of its own, else ``env``'s
        line, where ``fail(label)`` would find no key and name the header)."""
        here = f"{where(*at)}: [{table}] {label}"
        if isinstance(value, Mapping):
            return Secret(reference(here, value))
        if not isinstance(value, str):
            raise SettingError(f'{here}: must be a string or a reference ({{ env = "NAME" }} or '
                               '{ file = "PATH" })')
        if named_secret and world_readable:
            raise SettingError(f"{here}: {readable_secret(path)}")
        return Secret(value)

    env_table = content.get("env", {})
    if not isinstance(env_table, Mapping):
        raise fail("env", "must be a table of NAME = value")
    if env_table and command is None:
        raise fail("env", "is for a stdio server (command); a url server takes a token")
    env = {}
    for var, value in env_table.items():
        at = (f"{table}.env", var)  # the name's own line when the scan saw it (see secret)
        if not re.fullmatch(r"^[A-Za-z_][A-Za-z0-9_]*$", var):
            raise SettingError(f"{where(*at)}: [{table}] env: {var!r} is not an environment "
                               "variable name")
        env[var] = secret(at, value, f"env.{var}", named_secret=is_secret_name(var))
    token = None
    if "token" in content:
        if url is None:
            raise fail("token", "is for a url server; give a stdio server its credential in env")
        token = secret((table, "token"), content["token"], "token", named_secret=True)
    tools_table = content.get("tools", {})
    if not isinstance(tools_table, Mapping):
        raise fail("tools", "must be a table of tools ([mcp.servers.<name>.tools.<tool>])")
    tools = {}
    for tool, spec in tools_table.items():
        tool_table = f"{table}.tools.{tool}"

        def tool_fail(key: str | None, problem: str, tool_table: str = tool_table) -> SettingError:
            label = f"[{tool_table}] {key}" if key else f"[{tool_table}]"
            return SettingError(f"{where(tool_table, key)}: {label}: {problem}")

        if not isinstance(spec, Mapping):
            raise tool_fail(None, "must be a table")
        for key in spec:
            if key not in _TOOL_KEYS:
                raise tool_fail(key, "not a key of a tool (its keys: "
                                f"{', '.join(sorted(_TOOL_KEYS))})")
        tools[tool] = _classification(spec, tool_fail)
    enabled = content.get("enabled", True)
    if not isinstance(enabled, bool):
        raise fail("enabled", "must be true or false")
    return UpstreamServer(
        name=name, command=command, args=tuple(args), url=url, env=env, token=token,
        defaults=_classification({k: v for k, v in content.items() if k in _TOOL_KEYS
                                  and k != "enabled"}, fail),
        tools=tools, enabled=enabled,
        connect_timeout_s=_seconds(content, "connect_timeout_s", _MAX_CONNECT_TIMEOUT_S, fail,
                                   DEFAULT_CONNECT_TIMEOUT_S))


def _command(written: object, path: str, fail: Fail) -> str:
    """A server's ``command``: a bare name as written (the server's ``PATH`` finds it), an
    absolute path as written, and a relative path (``./server``, ``bin/server``, ``~/server``)
    relative to the file's directory, ``~`` expanded, as a path setting written in the file is
    (D497): one shared file starts one program whatever directory a command starts in."""
    if not isinstance(written, str) or not written.strip():
        raise fail("command", "must be a non-empty string")
    if "/" not in written or os.path.isabs(written):
        return written
    try:
        return str(referenced_file(Path(path), written).absolute())
    except RuntimeError:  # ~user of no such user
        raise fail("command", f"names {written!r}, whose home directory does not exist"
                   ) from None


def _url(value: object, table: str, fail: Fail, where: Where, reference: Reference,
         world_readable: bool, path: str) -> str:
    """A server's ``url``: a reference, or inline; one that carries a password (its userinfo's,
    or a query parameter named like a credential) is a secret, inline only in a file other
    users cannot read (D269, as ``[host] database_url``)."""
    inline = isinstance(value, str)
    if isinstance(value, Mapping):
        value = reference(f"{where(table, 'url')}: [{table}] url", value)
    if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value):
        raise fail("url", "must be an http:// or https:// URL (or a reference: "
                   '{ env = "NAME" } or { file = "PATH" })')
    if inline and world_readable and url_has_password(value):
        raise fail("url", readable_secret(path))
    return value


def _enum(kind: type[enum.Enum], value: object, key: str, fail: Fail) -> Any:
    names = [m.value for m in kind]
    if not isinstance(value, str) or value not in names:
        raise fail(key, f"must be one of {', '.join(names)}, not {value!r}")
    return kind(value)


def _seconds(table: Mapping[str, Any], key: str, most: float, fail: Fail,
             default: float = 0.0) -> float:
    """``table[key]``, a number of seconds above 0 and at most ``most`` (``default`` if
    absent)."""
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value <= most):
        raise fail(key, f"must be a number of seconds above 0, at most {int(most)}")
    return float(value)


def _classification(spec: Mapping[str, Any], fail: Fail) -> UpstreamToolClass:
    values: dict[str, Any] = {}
    for key, kind in (("side_effect", SideEffect), ("risk", Risk), ("idempotency", Idempotency)):
        if key in spec:
            values[key] = _enum(kind, spec[key], key, fail)
    if "scopes" in spec:
        scopes = spec["scopes"]
        if not isinstance(scopes, list) or not all(isinstance(s, str) and s.strip()
                                                   for s in scopes):
            raise fail("scopes", "must be a list of scope names")
        values["scopes"] = tuple(scopes)
    if "timeout_s" in spec:
        values["timeout_s"] = _seconds(spec, "timeout_s", _MAX_TIMEOUT_S, fail)
    for key in ("enabled", "close_schema"):
        if key in spec:
            if not isinstance(spec[key], bool):
                raise fail(key, "must be true or false")
            values[key] = spec[key]
    if "description" in spec:
        text = spec["description"]
        if not isinstance(text, str) or not text.strip():
            raise fail("description", "must be a non-empty string")
        values["description"] = text.strip()
    return UpstreamToolClass(**values)
