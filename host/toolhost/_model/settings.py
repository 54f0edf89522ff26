"""Host settings, read from the environment once, at the composition root."""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from toolhost._model.data_layout import default_data_dir, plugin_data_dir
from toolhost._model.errors import ToolhostError, UsageError
from toolhost._model.secrets import Secret

if TYPE_CHECKING:
    from toolhost._model.config_file import ConfigFile
    from toolhost._model.setting_spec import SettingSpec

__all__ = [
    "ARTIFACT_RETENTION_DAYS",
    "CONFIG_SETTING",
    "LOG_LEVELS",
    "WORKSPACE_QUOTA_BYTES",
    "ConfigFileError",
    "SettingError",
    "Settings",
    "StoreUnavailable",
    "config_path",
    "default_config_path",
    "default_data_dir",
    "plugin_data_dir",
    "quoted_value",
    "redact_url_password",
]

_TRUE = frozenset({"1", "true", "yes", "on"})
#: The words a flag takes for off; unset or blank is off too.
_FALSE = frozenset({"0", "false", "no", "off"})

#: The values TOOLHOST_LOG_LEVEL takes (any case); unset means "warning".
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
#: The standard library's other names, accepted as they always were.
_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "notset": "debug"}
#: TOOLHOST_ARTIFACT_RETENTION_DAYS when unset: what a run stores expires 30 days later.
ARTIFACT_RETENTION_DAYS = 30
#: The most days it takes (about a century): more would overflow a datetime's year range.
_MAX_RETENTION_DAYS = 36500
#: TOOLHOST_WORKSPACE_QUOTA_BYTES when unset: the disk one run's workspace may use, 1 GiB.
WORKSPACE_QUOTA_BYTES = 1024 * 1024 * 1024
#: Its bounds: below 16 MiB ext4's own metadata is most of a workspace filesystem (D265);
#: above 1 TiB is no longer a cache.
_MIN_WORKSPACE_QUOTA = 16 * 1024 * 1024
_MAX_WORKSPACE_QUOTA = 1024 ** 4


def _whole(raw: str, maximum: int) -> int | None:
    """``raw`` as a whole number from 0 to ``maximum``, else None. Plain ASCII digits only
    (int() alone would take "1_0" and "٣"), counted before int() sees them (which raises
    past 4300 digits)."""
    digits = raw.lstrip("0") or "0"
    if not (raw.isascii() and raw.isdigit()) or len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None


def quoted_value(raw: str) -> str:
    """A setting's value quoted in its error, cut when it is long (a 5000-digit number)."""
    return repr(raw) if len(raw) <= 40 else f"{raw[:20]!r}... ({len(raw)} characters)"


class SettingError(UsageError, ValueError):
    """A setting holds a value the host cannot use. The message is one line for operators."""


class StoreUnavailable(ToolhostError):
    """The data directory (TOOLHOST_DATA_DIR) or the database in it cannot be used: it is a
    file, not writable, not a database, damaged, or of another schema. Raised where the stores
    are opened, so a command or a server stops at its start. The message is one line that
    names ``path`` and says what to do."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


#: Names the file; empty: read none (tests, a host that must ignore the user's file).
CONFIG_SETTING = "TOOLHOST_CONFIG"


class ConfigFileError(SettingError):
    """A ``toolhost.toml`` the host cannot use; the message is ``PATH:LINE: key: problem``."""


def config_path(environ: Mapping[str, str]) -> Path | None:
    """The file to read: ``TOOLHOST_CONFIG`` when set (None when set empty), else the XDG
    default when it exists. Here, not beside the reader (``toolhost._model.config_file``),
    so that a start with no file never imports the reader.

    :raises ConfigFileError: TOOLHOST_CONFIG names no file.
    """
    named = environ.get(CONFIG_SETTING)
    if named is not None:
        if not named.strip():
            return None
        try:
            path = Path(named).expanduser()
            is_file = stat.S_ISREG(os.stat(path).st_mode)
        except PermissionError:
            return path  # named, so read: the read says what is wrong in one line
        except (OSError, RuntimeError, ValueError):  # no such home (~user), a NUL byte
            is_file = False
        if not is_file:
            raise ConfigFileError(f"{CONFIG_SETTING} is {named!r}, which is not a file")
        return path
    path = default_config_path(environ)
    # The default place is read when it can be seen: a user who cannot look into it (a
    # service account with another's HOME) has no file there, as far as it can tell.
    return path if os.path.isfile(path) else None


def default_config_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/toolhost/toolhost.toml`` (``~/.config/...``): the file a start with no
    ``TOOLHOST_CONFIG`` reads, whether or not it exists yet."""
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "toolhost" / "toolhost.toml"


def _redact(env: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if is_secret_name(k) else redact_url_password(v)) for k, v in env.items()}


#: The words that mark a setting's name as a credential (TENSORSCALE_API_KEY,
#: AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, PGPASSWORD, TLS_PRIVATE_KEY); whole words, so
#: MAX_TOKENS is not one.
_SECRET_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY"})
_SECRET_PAIRS = frozenset({("API", "KEY"), ("PRIVATE", "KEY")})
#: The password of a URL's userinfo: ``postgresql://user:PASSWORD@host/db``.
_URL_PASSWORD = re.compile(r"(?<=://)([^:/?#@\s]*):([^@/?#\s]*)@")


def is_secret_name(name: str) -> bool:
    """Settings whose name has a credential word (TOKEN, SECRET, PASSWORD, API_KEY,
    PRIVATE_KEY, ...) are secrets: never logged, never returned."""
    words = name.upper().replace("-", "_").split("_")
    return (any(w in _SECRET_WORDS or w.endswith("PASSWORD") for w in words)
            or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words)))


#: A value some redaction already replaced (``***``, the log's ``[redacted]``): kept as it is.
_ALREADY_MASKED = re.compile(r"\*+|\[redacted\]")
#: A URL's query parameter (libpq's ``?password=``, ``&sslpassword=``). Its name holds no
#: ``?``: a name that could hold one was scanned from each ``?`` of a run to its end
#: (quadratic in the run).
_QUERY_PARAMETER = re.compile(r"(?<=[?&;])([^=&;#?\s]+)=([^&;#\s]*)")


#: A libpq conninfo keyword and its value (``host=db password='p w'``), the other form
#: TOOLHOST_DATABASE_URL takes: at the start or after whitespace, spaces allowed around the
#: ``=``, a value single-quoted or bare, backslash escapes in either (``abc\\ def`` is one
#: value, as libpq reads it); a quote never closed runs to the end, so a malformed value is
#: masked whole.
_CONNINFO_PAIR = re.compile(
    r"(?<!\S)([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|'.*|(?:\\.|[^\s\\])+\\?)")


def redact_url_password(value: str) -> str:
    """``value`` with the password of any URL in it shown as ``***``: its userinfo's, any
    query parameter named like a credential, and any conninfo keyword named like one
    (TOOLHOST_DATABASE_URL carries one in either form), so a setting's repr or an error that
    names the URL leaks no credential."""
    value = _URL_PASSWORD.sub(r"\1:***@", value)
    if "=" not in value:
        return value

    def masked(m: re.Match[str]) -> str:
        name = m[1]
        if "%" in name:  # a query parameter's name percent-encoded (``pass%77ord``): decoded
            from urllib.parse import unquote  # by libpq; imported only then (~1 ms)

            name = unquote(name)
        secret = m[2] and is_secret_name(name) and not _ALREADY_MASKED.fullmatch(m[2])
        return f"{m[1]}=***" if secret else m[0]

    return _CONNINFO_PAIR.sub(masked, _QUERY_PARAMETER.sub(masked, value))


@attrs.frozen
class Settings:
    """A snapshot of the environment the host was started with.

    Plugins read their flags and credentials through it (``flag``, ``get``, ``secret``)
    rather than from ``os.environ``, so a test hands a plugin exactly the settings it means.
    """

    env: Mapping[str, str] = attrs.field(repr=lambda env: repr(_redact(env)), factory=dict)
    #: The names whose value came from ``toolhost.toml``, each with its ``PATH:LINE``; every
    #: other name in ``env`` came from the environment.
    origins: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: The file read, kept for its plugins' tables (``with_plugin_settings``); None: no file.
    config: ConfigFile | None = attrs.field(default=None, repr=False, eq=False)
    #: Each name of ``origins`` as the file writes it: ``[http] drain_s``.
    keys: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The environment, over ``toolhost.toml`` when there is one (``TOOLHOST_CONFIG``, else
        the XDG config directory): a variable set in the environment wins (D268).

        :raises SettingError: the file cannot be used (one line: the file, line and key), or a
            host flag is set to a word it does not take (``flag``).
        """
        environ = dict(os.environ if environ is None else environ)
        path = config_path(environ)
        if path is None:
            settings = cls(env=environ)
        else:
            from toolhost._model.config_file import read_config

            config = read_config(path, environ)
            origins = {name: f"{path}:{config.lines[name]}"
                       for name in config.env if name not in environ}
            keys = {name: _host_key(name) for name in origins}
            settings = cls(env={**config.env, **environ}, origins=origins, config=config,
                           keys=keys)
        from toolhost._model import host_settings

        settings._check_flags(s.name for s in host_settings.HOST_SETTINGS if s.type == "flag")
        return settings

    def with_plugin_settings(self, distribution: str,
                             specs: Iterable[SettingSpec]) -> Settings:
        """These settings with what ``[plugins.<distribution>]`` of ``toolhost.toml`` sets for
        the settings ``specs`` declare (the environment still wins).

        :raises SettingError: a key the plugin does not declare, or a value of the wrong type;
            a declared flag set in the environment to a word it does not take (``flag``).
        """
        distribution, specs = normalize_dist_name(distribution), tuple(specs)
        # Checked before the plugin's hooks read them: a refusal there would be the plugin's
        # failure (exit 1, "fix and reinstall it"), not the operator's setting (exit 2).
        self._check_flags(spec.name for spec in specs if spec.type == "flag")
        if self.config is None or distribution not in self.config.plugin_tables:
            return self
        env, lines = self.config.plugin_env(distribution, specs, self.env)
        fresh = {name: value for name, value in env.items() if name not in self.env}
        if not fresh:
            return self
        origins = {name: f"{self.config.path}:{lines[name]}" for name in fresh}
        table = f"plugins.{self.config.plugin_table_names.get(distribution, distribution)}"
        keys = {spec.name: f"[{table}] {spec.file_key}" for spec in specs if spec.name in fresh}
        return attrs.evolve(self, env={**self.env, **fresh},
                            origins={**self.origins, **origins}, keys={**self.keys, **keys})

    def source_of(self, name: str) -> str:
        """Where ``name``'s value comes from: ``PATH:LINE`` of ``toolhost.toml``,
        ``environment``, or ``default`` (not set anywhere)."""
        if name in self.origins:
            return self.origins[name]
        return "environment" if name in self.env else "default"

    def named(self, name: str) -> str:
        """How a one-line refusal of ``name``'s value begins: ``PATH:LINE: [table] key:`` when
        ``toolhost.toml`` set it (as the file's own problems are named: the operator may never
        have set the variable), else the variable's name. ``f"{named} must be ..."`` reads
        right either way."""
        written = self.written(name)
        return f"{written}:" if written != name else name

    def named_value(self, name: str, shown: str) -> str:
        """How a one-line refusal that quotes ``name``'s value (``shown``, as the refusal may
        show it) begins: ``PATH:LINE: [table] key: 'VALUE'`` when ``toolhost.toml`` set it,
        else ``NAME='VALUE'``, as the environment sets it. ``f"{named} is not ..."``."""
        written = self.written(name)
        return f"{written}: {shown!r}" if written != name else f"{name}={shown!r}"

    def written(self, name: str) -> str:
        """Where ``name``'s value was written, for a sentence about it (``... names it``):
        ``PATH:LINE: [table] key`` when ``toolhost.toml`` set it, else the variable's name."""
        if name in self.origins and name in self.keys:
            return f"{self.origins[name]}: {self.keys[name]}"
        return name

    def written_beside(self, name: str, beside: str) -> str:
        """``name`` in a refusal of ``beside``'s value that asks for it too (``beside needs
        name``): where it was written when set (``written``); unset, as the operator would
        write it where ``beside`` was: its key (``[http] issuer``) when toolhost.toml set
        ``beside``, else the variable."""
        if name in self.env or beside not in self.keys:
            return self.written(name)
        from toolhost._model import host_settings

        return _host_key(name) if host_settings.by_name(name) else name

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.env.get(name, default)

    def flag(self, name: str) -> bool:
        """True for 1/true/yes/on, false for 0/false/no/off (any case), unset or blank.

        :raises SettingError: any other word (``ture``), in one line naming the variable (or
            where toolhost.toml set it), as the file refuses a flag that is not true or false.
        """
        raw = self.env.get(name, "").strip()
        word = raw.lower()
        if word and word not in _TRUE and word not in _FALSE:
            raise SettingError(f"{self.named(name)} must be on or off (1, true, yes or on; 0, "
                               f"false, no or off), not {quoted_value(raw)}")
        return word in _TRUE

    def _check_flags(self, names: Iterable[str]) -> None:
        """Read each of the flags ``names``, so a word one does not take refuses the start
        rather than leaving a feature off with no line saying why.

        :raises SettingError: the first such flag (``flag``'s line).
        """
        for name in names:
            self.flag(name)

    def secret(self, name: str) -> Secret | None:
        """The credential setting ``name`` as a redacted ``Secret``, or None when absent or blank."""
        value = self.env.get(name, "").strip()
        return Secret(value) if value else None

    @property
    def data_dir(self) -> Path:
        raw = self.env.get("TOOLHOST_DATA_DIR", "").strip()
        return Path(raw) if raw else default_data_dir()

    def plugin_data_dir(self, distribution: str) -> Path:
        """``distribution``'s own directory under TOOLHOST_DATA_DIR (not created): what its
        ``Services.data_dir`` is inside a host started with these settings."""
        return plugin_data_dir(self.data_dir, distribution)

    @property
    def log_level(self) -> str:
        """TOOLHOST_LOG_LEVEL, lower case; "warning" when unset or blank.

        :raises SettingError: for a value that is not one of ``LOG_LEVELS``.
        """
        raw = self.env.get("TOOLHOST_LOG_LEVEL", "").strip()
        if not raw:
            return "warning"
        level = _LEVEL_ALIASES.get(raw.lower(), raw.lower())
        if level not in LOG_LEVELS:
            raise SettingError(
                f"{self.named('TOOLHOST_LOG_LEVEL')} is {raw!r}, not a log level: set it to one "
                f"of {', '.join(LOG_LEVELS)} (or leave it unset for warning)"
            )
        return level

    @property
    def artifact_retention(self) -> _dt.timedelta | None:
        """TOOLHOST_ARTIFACT_RETENTION_DAYS as a lifetime; None (for 0) means never expire.

        Unset or blank: ``ARTIFACT_RETENTION_DAYS``.

        :raises SettingError: for a value that is not a whole number from 0 to 36500.
        """
        raw = self.env.get("TOOLHOST_ARTIFACT_RETENTION_DAYS", "").strip()
        if not raw:
            return _dt.timedelta(days=ARTIFACT_RETENTION_DAYS)
        days = _whole(raw, _MAX_RETENTION_DAYS)
        if days is None:
            raise SettingError(
                f"{self.named('TOOLHOST_ARTIFACT_RETENTION_DAYS')} is {quoted_value(raw)}, not a "
                f"number of days: set it to a whole number from 1 to {_MAX_RETENTION_DAYS}, 0 to "
                f"keep artifacts forever, or leave it unset for {ARTIFACT_RETENTION_DAYS}"
            )
        return _dt.timedelta(days=days) if days else None

    @property
    def workspace_quota_bytes(self) -> int:
        """TOOLHOST_WORKSPACE_QUOTA_BYTES: the disk one run's workspace may use, held by a
        filesystem of that size where the host can mount (D265) and checked by the tools
        that write (the sandbox polls it). Unset or blank: ``WORKSPACE_QUOTA_BYTES``.

        :raises SettingError: for a value that is not a whole number of bytes from 16 MiB
            to 1 TiB.
        """
        raw = self.env.get("TOOLHOST_WORKSPACE_QUOTA_BYTES", "").strip()
        if not raw:
            return WORKSPACE_QUOTA_BYTES
        quota = _whole(raw, _MAX_WORKSPACE_QUOTA)
        if quota is None or quota < _MIN_WORKSPACE_QUOTA:
            raise SettingError(
                f"{self.named('TOOLHOST_WORKSPACE_QUOTA_BYTES')} is {quoted_value(raw)}, not a "
                f"quota: set it to a whole number of bytes from {_MIN_WORKSPACE_QUOTA} (16 MiB) to "
                f"{_MAX_WORKSPACE_QUOTA} (1 TiB), or leave it unset for "
                f"{WORKSPACE_QUOTA_BYTES} (1 GiB)")
        return quota

    @property
    def plugin_allow_list(self) -> tuple[str, ...] | None:
        """TOOLHOST_PLUGINS as normalized distribution names; None means every plugin."""
        raw = self.env.get("TOOLHOST_PLUGINS")
        if raw is None:
            return None
        return tuple(normalize_dist_name(n) for n in raw.split(",") if n.strip())

    @property
    def plugin_exclude_list(self) -> tuple[str, ...]:
        """TOOLHOST_PLUGINS_EXCLUDE as normalized distribution names: left out even when
        TOOLHOST_PLUGINS (applied first) names them."""
        raw = self.env.get("TOOLHOST_PLUGINS_EXCLUDE", "")
        return tuple(normalize_dist_name(n) for n in raw.split(",") if n.strip())


def _host_key(name: str) -> str:
    """A host setting's key as toolhost.toml writes it: ``[http] drain_s`` (``[policy]``)."""
    from toolhost._model import host_settings

    if name == host_settings.POLICY_SETTING:
        return "[policy]"
    return f"[{host_settings.group_of(name)}] {host_settings.key_of(name)}"


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalization, so ``Toolhost_Math`` and ``toolhost-math`` are one name."""
    import re

    return re.sub(r"[-_.]+", "-", name.strip()).lower()
