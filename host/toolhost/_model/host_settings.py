"""Every setting the host itself reads: one declaration each, the source of ``toolhost --help``,
``toolhost serve --help``, ``toolhost config``, docs/configuration.md and ``toolhost.toml``'s keys.

A setting's group is in its name (``TOOLHOST_MCP_*`` is ``[mcp]``, ``TOOLHOST_HTTP_*`` is
``[http]``, the other ``TOOLHOST_*`` are ``[host]``); its key in that table is the rest of the
name, lower-cased (D268): ``TOOLHOST_HTTP_MAX_SESSIONS`` is ``max_sessions`` under
``[http]``. ``TOOLHOST_POLICY`` is the one exception: the ``[policy]`` table, one key per cell.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolhost._model.setting_spec import SettingSpec

__all__ = ["GROUPS", "HOST_SETTINGS", "POLICY_SETTING", "by_name", "group_of", "key_of"]

#: The tables of ``toolhost.toml`` the host's own settings live in, in the order shown.
GROUPS = ("host", "mcp", "http")
#: The policy's cells, JSON in the environment and the ``[policy]`` table in the file.
POLICY_SETTING = "TOOLHOST_POLICY"

_S = SettingSpec

HOST_SETTINGS: tuple[SettingSpec, ...] = (
    # [host]
    _S(name="TOOLHOST_DATA_DIR", type="path", default="$XDG_DATA_HOME/toolhost",
       description="the invocation records, artifacts and run workspaces"),
    _S(name="TOOLHOST_PLUGINS", type="list", default="every installed plugin",
       description="only these distributions' plugins load"),
    _S(name="TOOLHOST_PLUGINS_EXCLUDE", type="list",
       description="these distributions' plugins do not load"),
    _S(name=POLICY_SETTING, type="text",
       description="tighten cells of the policy matrix (JSON; in toolhost.toml the [policy] "
                   "table)"),
    _S(name="TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE", type="flag", default="off",
       description="let the policy loosen an EXTERNAL_WRITE cell"),
    _S(name="TOOLHOST_LOG_LEVEL", type="text", default="warning",
       description="debug, info, warning, error or critical"),
    _S(name="TOOLHOST_ARTIFACT_RETENTION_DAYS", type="integer", default="30",
       description="days until what a run stores expires (0: never)"),
    _S(name="TOOLHOST_WORKSPACE_QUOTA_BYTES", type="integer", default="1073741824",
       description="the disk one run's workspace may use (16 MiB to 1 TiB)"),
    _S(name="TOOLHOST_CA_BUNDLE", type="path",
       description="extra trust roots (PEM file) for every outbound HTTPS client"),
    _S(name="TOOLHOST_DATABASE_URL", type="url",
       description="keep the invocation record on PostgreSQL (postgresql://...)"),
    _S(name="TOOLHOST_ARTIFACT_STORE", type="url",
       description="keep artifacts on S3-compatible storage (s3://bucket/prefix)"),
    _S(name="TOOLHOST_S3_ENDPOINT_URL", type="url",
       description="that storage's endpoint (credentials: the AWS_* variables)"),
    _S(name="TOOLHOST_TRACE_ARGUMENTS", type="flag", default="off",
       description="put each call's arguments (secrets redacted) on its OpenTelemetry span"),
    _S(name="TOOLHOST_RECOVER_INTERVAL_S", type="number", default="60",
       description="seconds between a server's settling of rows whose process died (0: only "
                   "at its start)"),
    # [mcp]
    _S(name="TOOLHOST_MCP_PRINCIPAL", type="text", default="mcp",
       description="the principal an MCP client acts as (stdio, and HTTP without tokens)"),
    _S(name="TOOLHOST_MCP_SCOPES", type="list", default="every scope a served tool requires",
       description="the scopes granted to that principal"),
    _S(name="TOOLHOST_MCP_ELICITATION", type="text", default="on",
       description="on or off: whether a client's user may approve a paused call"),
    _S(name="TOOLHOST_MCP_ELICITATION_TIMEOUT_S", type="number", default="300",
       description="seconds to wait for the user's answer (at most 30 days)"),
    _S(name="TOOLHOST_MCP_WORKSPACE", type="path", default="a fresh workspace per session",
       description="an existing directory every session's run uses as its workspace, neither "
                   "holding nor inside the data directory or toolhost.toml's directory, and "
                   "holding no file the host trusts, runs or reads a secret from; not with "
                   "a token file or an issuer, where each person's files are theirs alone"),
    _S(name="TOOLHOST_MCP_PINS", type="list",
       description="NAME=VERSION items: serve that version under the tool's name"),
    _S(name="TOOLHOST_MCP_RUN_TIMEOUT_S", type="number", default="none",
       description="seconds each session's run may last"),
    _S(name="TOOLHOST_MCP_STDIO", type="text", default="auto",
       description="auto or sdk: serve stdio on the event loop, or through the SDK's thread"),
    _S(name="TOOLHOST_MCP_STDIO_MAX_UNANSWERED", type="integer", default="64",
       description="requests a stdio client may have unanswered at once, 1 to 1024 (one more "
                   "is answered at once with an error)"),
    # [http]
    _S(name="TOOLHOST_HTTP_TOKENS_FILE", type="path",
       description="static bearer tokens (TOML [[token]]: sha256, principal, scopes)"),
    _S(name="TOOLHOST_HTTP_ISSUER", type="url",
       description="an OAuth 2.1 issuer whose JWTs are accepted"),
    _S(name="TOOLHOST_HTTP_AUDIENCE", type="text",
       description="the audience those tokens must be issued for (this server's URL)"),
    _S(name="TOOLHOST_HTTP_JWKS_URL", type="url", default="from the issuer's metadata",
       description="the issuer's signing keys"),
    _S(name="TOOLHOST_HTTP_INTROSPECTION_URL", type="url", default="from the issuer's metadata",
       description="the issuer's RFC 7662 endpoint, asked about opaque tokens"),
    _S(name="TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID", type="text",
       description="this server's client id at that endpoint"),
    _S(name="TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET", type="secret",
       description="this server's client secret at that endpoint"),
    _S(name="TOOLHOST_HTTP_INTROSPECTION_CACHE_S", type="number", default="60",
       description="how long an active introspection answer is used"),
    _S(name="TOOLHOST_HTTP_ALLOWED_HOSTS", type="list", default="loopback names",
       description="Host values accepted (name:* for any port)"),
    _S(name="TOOLHOST_HTTP_ALLOWED_ORIGINS", type="list", default="loopback origins",
       description="Origin values accepted from browsers"),
    _S(name="TOOLHOST_HTTP_UI_SECRET", type="secret", default="one of the process's own",
       description="signs the approvals inbox's logins, at least 32 bytes of a random string "
                   "(hosts that share it share logins)"),
    _S(name="TOOLHOST_HTTP_UI_CLIENT_ID", type="text",
       description="the inbox's client id at the issuer: its login then goes through the "
                   "issuer (authorization code with PKCE)"),
    _S(name="TOOLHOST_HTTP_ADVERTISE_URL", type="url", default="the bound address",
       description="where the other hosts of the record reach this one's MCP endpoint"),
    _S(name="TOOLHOST_HTTP_MAX_BODY_BYTES", type="integer", default="8388608",
       description="the largest request body"),
    _S(name="TOOLHOST_HTTP_MAX_CALLS", type="integer", default="16",
       description="tools/call requests one principal may have running on this host (each "
                   "until the call ends, whether or not its POST is still open)"),
    _S(name="TOOLHOST_HTTP_MAX_CONNECTIONS", type="integer", default="1000",
       description="connections served at once (more: 503)"),
    _S(name="TOOLHOST_HTTP_MAX_SESSIONS", type="integer", default="1000",
       description="MCP sessions open at once (a new one past it: 503)"),
    _S(name="TOOLHOST_HTTP_MAX_SESSIONS_PER_PRINCIPAL", type="integer",
       default="a tenth of TOOLHOST_HTTP_MAX_SESSIONS (100)",
       description="MCP sessions one authenticated principal may have open at once "
       "(a new one past it: 429)"),
    _S(name="TOOLHOST_HTTP_SESSION_IDLE_S", type="number", default="1800",
       description="a session with no request for this long ends"),
    _S(name="TOOLHOST_HTTP_BODY_TIMEOUT_S", type="number", default="30",
       description="how long a request's body may take to arrive (408)"),
    _S(name="TOOLHOST_HTTP_HEAD_TIMEOUT_S", type="number", default="10",
       description="how long a request's line and headers may take to arrive (the "
       "connection is closed)"),
    _S(name="TOOLHOST_HTTP_DRAIN_S", type="number", default="30",
       description="on SIGTERM, how long calls in flight may take to finish"),
)

_BY_NAME = {spec.name: spec for spec in HOST_SETTINGS}


def by_name(name: str) -> SettingSpec | None:
    return _BY_NAME.get(name)


def group_of(name: str) -> str:
    """The table of ``toolhost.toml`` a host setting is in."""
    for group in ("mcp", "http"):
        if name.startswith(f"TOOLHOST_{group.upper()}_"):
            return group
    return "host"


def key_of(name: str) -> str:
    """A host setting's key in its table: the name without ``TOOLHOST_`` and its group."""
    group = group_of(name)
    prefix = "TOOLHOST_" if group == "host" else f"TOOLHOST_{group.upper()}_"
    return name.removeprefix(prefix).lower()


def in_group(group: str) -> Iterator[SettingSpec]:
    return (spec for spec in HOST_SETTINGS if group_of(spec.name) == group)
