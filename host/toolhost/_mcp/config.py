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
    TOOLHOST_MCP_ELICITATION_TIMEOUT_S seconds to wait for the user's answer (default 300, at
                                      most 30 days); unanswered, the call stays pending for
                                      the operator
    TOOLHOST_MCP_WORKSPACE            an existing directory every session's run uses as its
                                      workspace root (as ``toolhost call --workspace`` does),
                                      neither holding nor inside the data directory or
                                      toolhost.toml's; pinned and claimed while the server
                                      runs (``served_directory``): a session whose run would
                                      start elsewhere is refused, and no run starts on a
                                      directory holding it or inside it; unset: each session
                                      gets a fresh workspace, discarded when the server stops
    TOOLHOST_MCP_PINS                 ``name=version,name=version``: serve these versions under
                                      their names (``toolhost serve --pin`` adds to them), for a
                                      client pinned to an older contract
    TOOLHOST_MCP_RUN_TIMEOUT_S        seconds each session's run may last (its deadline; unset:
                                      none). A call approved after it does not run
    TOOLHOST_MCP_STDIO                ``auto`` (default): serve stdio on the event loop when
                                      stdin and stdout are pipes; ``sdk``: always through the
                                      SDK's own thread-backed ``stdio_server`` (the fallback,
                                      and what bench/bench_mcp.py compares against)
    TOOLHOST_MCP_STDIO_MAX_UNANSWERED requests a stdio client may have unanswered at once
                                      (default 64, at most 1024); one more is answered at
                                      once with an error (D367)

Why environment settings: a desktop client starts ``toolhost serve`` from a JSON config whose
only knobs are the command, its arguments and its environment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from toolhost import Principal, SettingSpec
from toolhost._composition import (
    MAX_DEADLINE_S,
    Registered,
    Settings,
    UsageError,
    quoted_value,
    ui_secret,
    workspace_refusal,
)

if TYPE_CHECKING:
    from toolhost._mcp.http_introspection import Post

__all__ = ["ConfigError", "HttpConfig", "ServeConfig", "http_config", "pins_setting"]

DEFAULT_PRINCIPAL = "mcp"
DEFAULT_ELICITATION_TIMEOUT_S = 300.0
#: How often a server settles rows whose process died (TOOLHOST_RECOVER_INTERVAL_S; 0: only at
#: its start). With several hosts on one database, a host that dies leaves rows another must
#: settle while it keeps serving, not only when it next restarts.
DEFAULT_RECOVER_INTERVAL_S = 60.0
#: A stdio client's requests unanswered at once (TOOLHOST_MCP_STDIO_MAX_UNANSWERED, D367), and
#: the most it may be set to: each may hold its answer until the client reads it (a resource
#: read's answer can be tens of MiB), and more than the tool workers can run only queue.
DEFAULT_MAX_UNANSWERED = 64
MOST_UNANSWERED = 1024


class ConfigError(UsageError, ValueError):
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
    #: Requests a stdio client may have unanswered at once (``transport.in_flight``).
    max_unanswered: int = DEFAULT_MAX_UNANSWERED

    @classmethod
    def from_settings(cls, settings: Settings, roster: Iterable[Registered], *,
                      pins: Mapping[str, str] | None = None,
                      also_scopes: Iterable[str] = (),
                      declared: Mapping[str, Sequence[SettingSpec]] | None = None,
                      ) -> ServeConfig:
        """``also_scopes``: granted with the roster's when TOOLHOST_MCP_SCOPES is unset (what
        the gateway's configuration names, for tools it registers while serving).
        ``declared``: the plugins' settings, whose paths no workspace may hold.

        :raises ConfigError: a malformed value (one line naming the setting)."""
        principal_id = (settings.get("TOOLHOST_MCP_PRINCIPAL") or "").strip() or DEFAULT_PRINCIPAL
        raw_scopes = settings.get("TOOLHOST_MCP_SCOPES")
        if raw_scopes is None:
            scopes = frozenset(s for r in roster for s in r.tool.scopes) | frozenset(also_scopes)
        else:
            scopes = frozenset(s.strip() for s in raw_scopes.split(",") if s.strip())
        switch = (settings.get("TOOLHOST_MCP_ELICITATION") or "on").strip().lower()
        if switch not in ("on", "off"):
            raise ConfigError(f"{settings.named('TOOLHOST_MCP_ELICITATION')} must be on or off, "
                              f"not {switch!r}")
        # Bounded as the other waits are: "inf" or 1e400 waited for an answer forever.
        timeout = (_seconds(settings, "TOOLHOST_MCP_ELICITATION_TIMEOUT_S")
                   or DEFAULT_ELICITATION_TIMEOUT_S)
        stdio = (settings.get("TOOLHOST_MCP_STDIO") or "auto").strip().lower()
        if stdio not in ("auto", "sdk"):
            raise ConfigError(f"{settings.named('TOOLHOST_MCP_STDIO')} must be auto or sdk, not "
                              f"{stdio!r}")
        raw_workspace = (settings.get("TOOLHOST_MCP_WORKSPACE") or "").strip()
        workspace = Path(raw_workspace) if raw_workspace else None
        if workspace is not None:
            named = settings.named("TOOLHOST_MCP_WORKSPACE")
            if not workspace.is_dir():
                raise ConfigError(f"{named} {raw_workspace!r} is not an existing directory")
            # Every session's tools write there: never where the host keeps what it runs.
            refusal = workspace_refusal(named, raw_workspace, settings, declared)
            if refusal is not None:
                raise ConfigError(refusal)
        run_timeout = _seconds(settings, "TOOLHOST_MCP_RUN_TIMEOUT_S")
        unanswered = _positive(settings, "TOOLHOST_MCP_STDIO_MAX_UNANSWERED",
                               DEFAULT_MAX_UNANSWERED, most=MOST_UNANSWERED)
        return cls(principal=Principal(principal_id, scopes), elicitation=switch == "on",
                   elicitation_timeout_s=timeout, loop_stdio=stdio == "auto",
                   workspace=workspace, recover_interval_s=_recover_interval(settings),
                   pins=dict(pins or {}), run_timeout_s=run_timeout,
                   max_unanswered=unanswered)


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
        raise ConfigError(f"{settings.named('TOOLHOST_RECOVER_INTERVAL_S')} must be a number of "
                          f"seconds (0: only at the start), not {raw!r}")
    return interval or None


# ---------------------------------------------------------------------------- HTTP


DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_CALLS = 16
DEFAULT_DRAIN_S = 30.0
DEFAULT_BODY_TIMEOUT_S = 30.0
#: Sessions open at once: each may hold its workspace's descriptor, and new ones are refused
#: earlier still when descriptors run short (``descriptors``).
DEFAULT_MAX_SESSIONS = 1000
#: The SDK's own default: half an hour without a request ends a session.
DEFAULT_SESSION_IDLE_S = 1800.0
#: Loopback names with any port: the Host and Origin a local client sends.
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
#: The binds that are every address, not one a client could name in its Host.
EVERY_ADDRESS = ("0.0.0.0", "::")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
#: The settings of an issuer's tokens (JWTs, and opaque ones asked of it: RFC 7662), named
#: in the refusals of the ones that need others.
_ISSUER, _AUDIENCE = "TOOLHOST_HTTP_ISSUER", "TOOLHOST_HTTP_AUDIENCE"
_JWKS_URL, _UI_CLIENT_ID = "TOOLHOST_HTTP_JWKS_URL", "TOOLHOST_HTTP_UI_CLIENT_ID"
_INTROSPECTION_URL = "TOOLHOST_HTTP_INTROSPECTION_URL"
_CLIENT_ID = "TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID"
_CLIENT_SECRET = "TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET"
_INTROSPECTION = (_INTROSPECTION_URL, _CLIENT_ID, _CLIENT_SECRET)


@attrs.frozen
class InboxOAuth:
    """The inbox's login at the issuer: the authorization-code flow with PKCE (RFC 7636, S256)
    as a public client, the token asked for this server (RFC 8707 ``resource``)."""

    client_id: str
    authorize_url: str
    token_url: str
    #: ``/ui/login/callback`` at the audience's origin: where the issuer sends the browser.
    redirect_uri: str
    resource: str


@attrs.frozen(kw_only=True)
class HttpConfig:
    """``serve --http``'s settings: the front door's policy and how long a stop may take.

        TOOLHOST_HTTP_TOKENS_FILE      static tokens (TOML [[token]]: sha256, principal, scopes)
        TOOLHOST_HTTP_ISSUER           an OAuth 2.1 issuer whose JWTs are accepted ...
        TOOLHOST_HTTP_AUDIENCE         ... issued for this server (its URL, RFC 8707)
        TOOLHOST_HTTP_JWKS_URL         the issuer's keys (default: from its RFC 8414 metadata)
        TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID      this server's credentials at the issuer's
        TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET  RFC 7662 endpoint: opaque tokens are asked
                                       of it (set both, or neither)
        TOOLHOST_HTTP_INTROSPECTION_URL  that endpoint (default: the issuer's metadata's)
        TOOLHOST_HTTP_INTROSPECTION_CACHE_S  how long an active answer is used (default 60)
        TOOLHOST_HTTP_ALLOWED_HOSTS    Host values accepted (comma-separated; ``name:*`` any port)
        TOOLHOST_HTTP_ALLOWED_ORIGINS  Origin values accepted from browsers (same form)
        TOOLHOST_HTTP_MAX_BODY_BYTES   the largest request body (default 8 MiB)
        TOOLHOST_HTTP_MAX_CALLS        tools/call requests one principal may have running here
        TOOLHOST_HTTP_DRAIN_S          on SIGTERM, how long calls in flight may take to finish
        TOOLHOST_HTTP_BODY_TIMEOUT_S   how long a request's body may take to arrive (408)
        TOOLHOST_HTTP_HEAD_TIMEOUT_S   how long a request's line and headers may take to arrive
                                       (the connection is closed; default 10)
        TOOLHOST_HTTP_MAX_CONNECTIONS  connections served at once (more: 503)
        TOOLHOST_HTTP_MAX_SESSIONS     MCP sessions open at once (a new one past it: 503)
        TOOLHOST_HTTP_MAX_SESSIONS_PER_PRINCIPAL  MCP sessions one authenticated principal
                                       may have open at once (a new one past it: 429)
        TOOLHOST_HTTP_SESSION_IDLE_S   a session with no request for this long ends: its run
                                       ends and its workspace is discarded (default 1800)
        TOOLHOST_HTTP_UI_SECRET        signs the approvals inbox's logins (/ui/; hosts that
                                       share it share logins; at least 32 bytes; default:
                                       one per process)
        TOOLHOST_HTTP_UI_CLIENT_ID     the inbox's client id at the issuer: a browser logs
                                       in there (authorization code with PKCE)
        TOOLHOST_HTTP_ADVERTISE_URL    where the other hosts of the record reach this one's MCP
                                       endpoint (several hosts on one database; default: the
                                       bound address, when it is one address)
    """

    policy: Any
    drain_s: float = DEFAULT_DRAIN_S
    #: Connections served at once (uvicorn's ``limit_concurrency``; more are answered 503).
    max_connections: int = 1000
    #: Seconds a connection may take to send a request's line and headers (D328).
    head_timeout_s: float = 10.0
    #: Sessions open at once (the SDK answers 503 past it), and the seconds after which a
    #: session with no request in flight ends.
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_s: float = DEFAULT_SESSION_IDLE_S
    #: This host's MCP endpoint as the other hosts reach it; None: the bind is every address
    #: and the operator named none.
    advertise_url: str | None = None
    #: The inbox's login through the issuer (TOOLHOST_HTTP_UI_CLIENT_ID); None: by token.
    inbox_oauth: InboxOAuth | None = None
    #: The issuer whose tokens are accepted (TOOLHOST_HTTP_ISSUER); None: a token file only.
    issuer: str | None = None
    #: What signs the inbox's logins (TOOLHOST_HTTP_UI_SECRET); None: one of the process's.
    ui_secret: bytes | None = None

    @property
    def authenticates(self) -> bool:
        return bool(self.policy.authenticates)


def http_config(settings: Settings, bind: str, port: int, roster: Iterable[Registered], *,
                fetch: Callable[[str], bytes], now: Callable[[], float],
                monotonic: Callable[[], float], post: Post | None = None) -> HttpConfig:
    """:raises ConfigError: a setting, the token file or the issuer cannot be used (one
    line naming it)."""
    from toolhost._mcp.http_auth import AuthConfigError, TokenFile
    from toolhost._mcp.http_front import HttpPolicy

    own = authority(bind, port)
    # The loopback names (a client on the host itself) and the bound address; a public name
    # is the operator's to list.
    hosts = _list(settings, "TOOLHOST_HTTP_ALLOWED_HOSTS") or (*LOOPBACK_HOSTS, own)
    origins = _list(settings, "TOOLHOST_HTTP_ALLOWED_ORIGINS") or LOOPBACK_ORIGINS
    tokens = None
    raw_tokens = (settings.get("TOOLHOST_HTTP_TOKENS_FILE") or "").strip()
    if raw_tokens:
        try:
            tokens = TokenFile(Path(raw_tokens),
                               named=settings.named("TOOLHOST_HTTP_TOKENS_FILE"))
        except AuthConfigError as exc:
            raise ConfigError(str(exc)) from None
    issuer = (settings.get(_ISSUER) or "").strip()
    audience = (settings.get(_AUDIENCE) or "").strip()
    jwt = introspection = metadata = metadata_url = None
    introspection_url = (settings.get(_INTROSPECTION_URL) or "").strip()
    inbox_oauth = None
    if not issuer and (settings.get(_UI_CLIENT_ID) or "").strip():
        raise ConfigError(f"{settings.written(_UI_CLIENT_ID)} needs "
                          f"{_issuer_and_audience(settings, _UI_CLIENT_ID)} (the issuer the "
                          "inbox's login goes through)")
    if not (issuer or audience) and (_introspects(settings) or introspection_url):
        # Named by the first one toolhost.toml set, else (the environment) all together.
        in_file = [name for name in _INTROSPECTION if (settings.get(name) or "").strip()
                   and settings.written(name) != name]
        beside = in_file[0] if in_file else _INTROSPECTION_URL
        needing = (f"{settings.written(beside)} needs" if in_file
                   else "TOOLHOST_HTTP_INTROSPECTION_* settings need")
        raise ConfigError(f"{needing} {_issuer_and_audience(settings, beside)} (whose tokens, "
                          "for which server)")
    if issuer or audience:
        if not (issuer.startswith("https://") or issuer.startswith("http://")) or not (
                audience.startswith("https://") or audience.startswith("http://")):
            raise ConfigError(f"{settings.written_beside(_ISSUER, _AUDIENCE)} and "
                              f"{settings.written_beside(_AUDIENCE, _ISSUER)} go together, each "
                              "a URL (the issuer's, and this server's as its tokens name it)")
        jwks_setting = (settings.get(_JWKS_URL) or "").strip()
        for name, url in ((_ISSUER, issuer), (_JWKS_URL, jwks_setting)):
            # Keys fetched in the clear could be swapped on the way: https, but on loopback.
            if _in_the_clear(url):
                raise ConfigError(f"{settings.named(name)} must be https:// (http:// only on "
                                  f"loopback), not {url!r}")
        asks_metadata = not jwks_setting or (_introspects(settings) and not introspection_url)
        read = _issuer_metadata(issuer, fetch) if asks_metadata else None
        discovered = read or {}
        introspection = _introspector(settings, issuer, audience, introspection_url,
                                      discovered, post, now)
        jwks_url = jwks_setting or _uri(discovered, "jwks_uri")
        if jwks_url or introspection is None or read is None:
            # An issuer of opaque tokens only, whose metadata says so by naming no keys:
            # its tokens are all asked of its introspection endpoint. Metadata that could
            # not be read says nothing: refused at the start, as without introspection.
            jwt = _jwt_verifier(settings, issuer, audience, jwks_url, fetch, now, monotonic)
        origin, _, rest = audience.partition("://")
        host_port, slash, path = rest.partition("/")
        metadata_url = f"{origin}://{host_port}/.well-known/oauth-protected-resource" + (
            f"/{path}".rstrip("/") if slash else "")
        inbox_oauth = _inbox_oauth(settings, issuer, audience, read, fetch)
        metadata = {"resource": audience, "authorization_servers": [issuer],
                    "bearer_methods_supported": ["header"],
                    "scopes_supported": sorted({s for r in roster for s in r.tool.scopes})}
    policy = HttpPolicy(
        allowed_hosts=tuple(hosts), allowed_origins=tuple(origins),
        max_body_bytes=_positive(settings, "TOOLHOST_HTTP_MAX_BODY_BYTES",
                                 DEFAULT_MAX_BODY_BYTES),
        max_calls=_positive(settings, "TOOLHOST_HTTP_MAX_CALLS", DEFAULT_MAX_CALLS),
        body_timeout_s=_seconds(settings, "TOOLHOST_HTTP_BODY_TIMEOUT_S")
        or DEFAULT_BODY_TIMEOUT_S,
        max_sessions_per_principal=_positive(
            settings, "TOOLHOST_HTTP_MAX_SESSIONS_PER_PRINCIPAL",
            # A tenth of the host's by default, so lowering the host's keeps one person from
            # taking them all (at least 1).
            max(1, _positive(settings, "TOOLHOST_HTTP_MAX_SESSIONS", DEFAULT_MAX_SESSIONS) // 10)),
        tokens=tokens, jwt=jwt, introspection=introspection, metadata_url=metadata_url,
        metadata=metadata)
    return HttpConfig(
        policy=policy, drain_s=_seconds(settings, "TOOLHOST_HTTP_DRAIN_S") or DEFAULT_DRAIN_S,
        max_connections=_positive(settings, "TOOLHOST_HTTP_MAX_CONNECTIONS", 1000),
        head_timeout_s=_seconds(settings, "TOOLHOST_HTTP_HEAD_TIMEOUT_S") or 10.0,
        max_sessions=_positive(settings, "TOOLHOST_HTTP_MAX_SESSIONS", DEFAULT_MAX_SESSIONS),
        session_idle_s=_seconds(settings, "TOOLHOST_HTTP_SESSION_IDLE_S")
        or DEFAULT_SESSION_IDLE_S,
        advertise_url=_advertise_url(settings, bind, port), inbox_oauth=inbox_oauth,
        issuer=issuer or None, ui_secret=ui_secret(settings))


def _issuer_and_audience(settings: Settings, beside: str) -> str:
    """The issuer's two settings, in a refusal of ``beside`` that needs them."""
    return (f"{settings.written_beside(_ISSUER, beside)} and "
            f"{settings.written_beside(_AUDIENCE, beside)}")


def _inbox_oauth(settings: Settings, issuer: str, audience: str,
                 read: Mapping[str, Any] | None,
                 fetch: Callable[[str], bytes]) -> InboxOAuth | None:
    """The inbox's login through the issuer, from its metadata; None without a client id."""
    client_id = (settings.get(_UI_CLIENT_ID) or "").strip()
    if not client_id:
        return None
    metadata = read if read is not None else (_issuer_metadata(issuer, fetch) or {})
    authorize, token = _uri(metadata, "authorization_endpoint"), _uri(metadata, "token_endpoint")
    if not (authorize and token):
        raise ConfigError(f"{settings.written(_UI_CLIENT_ID)}: the metadata of {issuer!r} names "
                          "no authorization_endpoint and token_endpoint")
    for url in (authorize, token):
        if _in_the_clear(url):
            raise ConfigError(f"the issuer's endpoints must be https://, not {url!r}")
    origin, _, rest = audience.partition("://")
    redirect = f"{origin}://{rest.partition('/')[0]}/ui/login/callback"
    return InboxOAuth(client_id, authorize, token, redirect, audience)


def _in_the_clear(url: str) -> bool:
    """Whether ``url`` is plain http:// to anywhere but loopback: keys, tokens and secrets
    would cross the network unprotected."""
    return url.startswith("http://") and not _loopback_url(url)


def _advertise_url(settings: Settings, bind: str, port: int) -> str | None:
    raw = (settings.get("TOOLHOST_HTTP_ADVERTISE_URL") or "").strip()
    if raw:
        scheme, _, rest = raw.partition("://")
        if scheme not in ("http", "https") or not rest.partition("/")[0]:
            raise ConfigError(f"{settings.named('TOOLHOST_HTTP_ADVERTISE_URL')} must be an "
                              f"http:// or https:// URL of this host's MCP endpoint, not {raw!r}")
        return raw
    if bind in EVERY_ADDRESS:
        return None
    return f"http://{authority(bind, port)}/mcp"


def authority(bind: str, port: int) -> str:
    """``bind:port`` as a URL and a Host header write it (an IPv6 address in brackets)."""
    return f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"


def _loopback_url(url: str) -> bool:
    """Whether ``url`` names a loopback host, as the HTTP client will read it (``?`` and
    ``#`` end the authority: ``http://evil.example?@127.0.0.1/`` is evil.example's)."""
    import httpx

    from toolhost._mcp.http_front import loopback

    try:
        host = httpx.URL(url).host
    except (httpx.InvalidURL, ValueError):
        return False
    return bool(host) and loopback(host)


def _list(settings: Settings, name: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in (settings.get(name) or "").split(",") if p.strip())


def _positive(settings: Settings, name: str, default: int, *, most: int | None = None) -> int:
    """A whole number of at least 1 (and at most ``most``, if given); ``default`` when unset.

    :raises ConfigError: anything else.
    """
    raw = (settings.get(name) or "").strip()
    if not raw:
        return default
    # ASCII digits only: str.isdigit() also says yes to "²" (int() refuses it) and to "٣".
    if (raw.isascii() and raw.isdigit() and len(raw) <= 18
            and 1 <= int(raw) <= (int(raw) if most is None else most)):
        return int(raw)
    wanted = "of at least 1" if most is None else f"from 1 to {most}"
    raise ConfigError(f"{settings.named(name)} must be a whole number {wanted}, not "
                      f"{quoted_value(raw)}")


def _seconds(settings: Settings, name: str) -> float | None:
    """A positive number of seconds (``0.5`` too), at most MAX_DEADLINE_S (30 days, as
    ``toolhost call --timeout``: 1e12 seconds overflowed a run's deadline, failing every call);
    None when unset.

    :raises ConfigError: anything else.
    """
    raw = (settings.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_DEADLINE_S:
        raise ConfigError(f"{settings.named(name)} must be a positive number of seconds, at most "
                          f"{MAX_DEADLINE_S} (30 days), not {quoted_value(raw)}")
    return value


def _issuer_metadata(issuer: str, fetch: Callable[[str], bytes]) -> dict[str, Any] | None:
    """The issuer's RFC 8414 metadata (or its OpenID discovery document); None when none
    that is its own could be read (the issuer away, or not what it says)."""
    import json

    base = issuer.rstrip("/")
    for well_known in ("/.well-known/oauth-authorization-server",
                       "/.well-known/openid-configuration"):
        try:
            data = json.loads(fetch(base + well_known))
        except Exception:
            continue
        if isinstance(data, dict) and data.get("issuer") in (issuer, base):
            return data  # RFC 8414: the metadata must be the issuer's own
    return None


def _uri(metadata: Mapping[str, Any], name: str) -> str:
    uri = metadata.get(name)
    return uri if isinstance(uri, str) and uri.startswith(("https://", "http://")) else ""


def _jwt_verifier(settings: Settings, issuer: str, audience: str, jwks_url: str,
                  fetch: Callable[[str], bytes], now: Callable[[], float],
                  monotonic: Callable[[], float]) -> Any:
    import importlib.util

    from toolhost._mcp.http_auth import JwtVerifier

    if not jwks_url:
        raise ConfigError(f"cannot find the keys of {settings.named(_ISSUER)} {issuer!r} (no "
                          "jwks_uri in its metadata): set "
                          f"{settings.written_beside(_JWKS_URL, _ISSUER)}")
    if _in_the_clear(jwks_url):
        raise ConfigError(f"the issuer's jwks_uri must be https://, not {jwks_url!r}")
    if importlib.util.find_spec("jwt") is None:  # the extra, checked at the start
        raise ConfigError(f"{settings.written(_ISSUER)} needs the JWT library: pip install "
                          "'toolhost-core[oauth]'")
    return JwtVerifier(issuer=issuer, audience=audience, jwks_url=jwks_url, fetch=fetch,
                       now=now, monotonic=monotonic)


def _introspects(settings: Settings) -> bool:
    return bool((settings.get(_CLIENT_ID) or "").strip()
                or (settings.get(_CLIENT_SECRET) or "").strip())


def _introspector(settings: Settings, issuer: str, audience: str, url: str,
                  metadata: Mapping[str, Any], post: Post | None,
                  now: Callable[[], float]) -> Any:
    """The RFC 7662 introspector the settings describe, asking ``url`` (the setting; empty:
    the issuer's ``metadata`` names it); None when the settings name none."""
    from toolhost._mcp.http_introspection import DEFAULT_CACHE_S, TokenIntrospector

    client_id = (settings.get(_CLIENT_ID) or "").strip()
    secret = (settings.get(_CLIENT_SECRET) or "").strip()
    if not (client_id or secret):
        if url:
            pair = settings.written_beside(_CLIENT_SECRET, _INTROSPECTION_URL)
            # From the environment, the second variable shortened as it always was.
            raise ConfigError(f"{settings.written(_INTROSPECTION_URL)} needs "
                              f"{settings.written_beside(_CLIENT_ID, _INTROSPECTION_URL)} and "
                              f"{'_CLIENT_SECRET' if pair == _CLIENT_SECRET else pair}")
        return None
    if not client_id or not secret:
        raise ConfigError(f"{settings.written_beside(_CLIENT_ID, _CLIENT_SECRET)} and "
                          f"{settings.written_beside(_CLIENT_SECRET, _CLIENT_ID)} go together")
    url = url or _uri(metadata, "introspection_endpoint")
    if not url:
        raise ConfigError(f"cannot find the introspection endpoint of {settings.named(_ISSUER)} "
                          f"{issuer!r} (none in its metadata): set "
                          f"{settings.written_beside(_INTROSPECTION_URL, _CLIENT_ID)}")
    if not url.startswith(("https://", "http://")) or _in_the_clear(url):
        # The token and this server's secret would cross the network in the clear.
        raise ConfigError(f"{settings.named(_INTROSPECTION_URL)} must be "
                          f"https:// (http:// only on loopback), not {url!r}")
    assert post is not None  # serve passes the host's form POST
    raw_cache = (settings.get("TOOLHOST_HTTP_INTROSPECTION_CACHE_S") or "").strip()
    try:
        cache_s = float(raw_cache) if raw_cache else DEFAULT_CACHE_S
    except ValueError:
        cache_s = -1.0
    if not 0 <= cache_s <= 3600:
        raise ConfigError(f"{settings.named('TOOLHOST_HTTP_INTROSPECTION_CACHE_S')} must be "
                          f"seconds from 0 to 3600, not {raw_cache!r}")
    return TokenIntrospector(issuer=issuer, audience=audience, url=url, client_id=client_id,
                             client_secret=secret, post=post, now=now, cache_s=cache_s)
