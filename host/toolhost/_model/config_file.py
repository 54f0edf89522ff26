"""``toolhost.toml``: the settings an operator writes down once, read into the environment's form.

Where: ``TOOLHOST_CONFIG`` (empty: no file), else ``$XDG_CONFIG_HOME/toolhost/toolhost.toml``
(``~/.config/...``) when it exists. What: the tables ``[host]``, ``[mcp]`` and ``[http]`` hold the
host's ``TOOLHOST_*`` settings under their keys (``toolhost._model.host_settings``); ``[policy]``
the policy's cells (``"CODE_EXECUTION/HIGH" = "approval"``); ``[plugins.<distribution>]`` what
that plugin declares through ``toolhost_settings``. Each value becomes the text its environment
variable would hold, so every reader of ``Settings`` (host and plugins) works unchanged, and a
variable set in the environment overrides the file's value (D268). A path setting written
relative is relative to the file's directory, as a ``{ file = "PATH" }`` reference is: one
shared file names one data directory from any working directory.

A secret is a reference, ``{ env = "NAME" }`` or ``{ file = "PATH" }``; written inline it is
accepted only from a file no other user can read (D269). Every problem is one line naming the
file, the line and the key.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from toolhost._model import host_settings
from toolhost._model.setting_spec import SettingSpec
from toolhost._model.settings import (
    CONFIG_SETTING,
    ConfigFileError,
    SettingError,
    config_path,
    is_secret_name,
    normalize_dist_name,
    redact_url_password,
)
from toolhost._model.small_file import UnreadableFile, read_small_file

if TYPE_CHECKING:
    from toolhost._model.upstream import UpstreamServer

__all__ = ["CONFIG_SETTING", "ConfigFile", "ConfigFileError", "config_path", "read_config"]

_URL_PASSWORD = re.compile(r"://[^:/?#@\s]*:[^@/?#\s]+@")


@attrs.frozen(kw_only=True)
class ConfigFile:
    """One ``toolhost.toml``, read: the host's settings in environment form, and the plugins'
    tables kept as written until their declarations are known."""

    path: Path
    #: TOOLHOST_* name -> the value its environment variable would hold (secrets among them:
    #: never in a repr).
    env: Mapping[str, str] = attrs.field(repr=False)
    #: Each name's line in the file (for ``toolhost config`` and errors).
    lines: Mapping[str, int]
    #: distribution (normalized, PEP 503) -> its table as written.
    plugin_tables: Mapping[str, Mapping[str, Any]] = attrs.field(repr=False)
    #: distribution (normalized) -> the table's name as written, for its lines.
    plugin_table_names: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: Every ``(table, key)``'s line: ``("plugins.toolhost-email", "mode_enabled")``,
    #: ``("policy", "CODE_EXECUTION/HIGH")``.
    key_lines: Mapping[tuple[str, str], int]
    #: Readable by users other than its owner and group: no inline secret is taken from it.
    world_readable: bool
    #: ``[mcp.servers.<name>]``: the MCP gateway's upstream servers, checked (``_model.upstream``).
    mcp_servers: tuple[UpstreamServer, ...] = ()
    #: The file each ``{ file = "PATH" }`` reference anywhere in it names (the plugins' tables
    #: included, read or not yet), resolved as ``_reference`` resolves it.
    file_references: tuple[Path, ...] = ()

    def where(self, table: str, key: str | None = None) -> str:
        """``PATH:LINE`` of ``key`` in ``table`` (of the table's header without a key). A key
        the scan did not see (in an inline table, a value's later lines) is named at the
        nearest line it did: its table's header, else the key that holds the table in its
        parent (``env = {...}``, ``env.X = 3``)."""
        return f"{self.path}:{self.line_of(table, key)}"

    def line_of(self, table: str, key: str | None = None) -> int:
        for place in (table, key or ""), (table, ""):
            if place in self.key_lines:
                return self.key_lines[place]
        parent, _, last = table.rpartition(".")
        return self.line_of(parent, last) if table else 1

    def plugin_env(self, distribution: str, specs: Iterable[SettingSpec],
                   environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, int]]:
        """What ``[plugins.<distribution>]`` sets, in environment form, and each name's line.

        :raises ConfigFileError: a key ``specs`` do not declare, or a value of the wrong type.
        """
        table = self.plugin_tables.get(distribution)
        if not table:
            return {}, {}
        by_key = {spec.file_key: spec for spec in specs}
        name = f"plugins.{self.plugin_table_names.get(distribution, distribution)}"
        env: dict[str, str] = {}
        lines: dict[str, int] = {}
        for key, value in table.items():
            spec = by_key.get(key)
            if spec is None:
                known = ", ".join(sorted(by_key)) or "none: it declares no settings"
                raise ConfigFileError(f"{self.where(name, key)}: [{name}] {key}: not a setting "
                                      f"of {distribution} (its keys: {known})")
            env[spec.name] = _as_env(self, name, key, spec, value, environ)
            lines[spec.name] = self.line_of(name, key)
        return env, lines


def read_config(path: Path, environ: Mapping[str, str]) -> ConfigFile:
    """Read and check ``path``. ``environ`` resolves ``{ env = "NAME" }`` references.

    :raises ConfigFileError: unreadable, not TOML, an unknown table or key, a value of the
        wrong type, an unresolvable reference, or an inline secret in a world-readable file.
    """
    import tomllib

    try:
        raw = read_small_file(path, MAX_CONFIG_BYTES)
        st = os.stat(path)
    except UnreadableFile as exc:
        problem = (exc.error.strerror if exc.error is not None else
                   f"more than {MAX_CONFIG_BYTES} bytes" if exc.too_large else
                   "not a regular file")
        raise ConfigFileError(f"{path}: cannot be read ({problem})") from None
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot be read ({exc.strerror})") from None
    if (open_to := _writable_by_others(path, st)) is not None:
        what, fix = open_to
        raise ConfigFileError(
            f"{path}: {what}, and the file sets the policy, the plugins and the commands "
            f"the gateway starts: {fix}")
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path}:1: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"at line (\d+)", str(exc))
        raise ConfigFileError(f"{path}:{found.group(1) if found else 1}: not TOML: {exc}"
                              ) from None
    except RecursionError:  # tomllib recurses once a level: it gives up near 1000
        raise ConfigFileError(f"{path}: not a configuration: a value is nested too deeply"
                              ) from None
    except ValueError:  # the one other: an integer longer than int() converts
        raise ConfigFileError(f"{path}: not a configuration: an integer has more than "
                              f"{sys.get_int_max_str_digits()} digits") from None
    config = ConfigFile(path=path, env={}, lines={}, plugin_tables={},
                        key_lines=_key_lines(text),
                        world_readable=bool(st.st_mode & stat.S_IROTH))
    env: dict[str, str] = {}
    lines: dict[str, int] = {}
    plugins: dict[str, Mapping[str, Any]] = {}
    plugin_names: dict[str, str] = {}
    servers: tuple[UpstreamServer, ...] = ()
    for table, content in data.items():
        if table in host_settings.GROUPS:
            group = dict(_table(config, table, content))
            if table == "mcp" and "servers" in group:
                # The gateway's servers are tables of their own, not a TOOLHOST_* setting.
                servers = _servers(config, group.pop("servers"), environ)
            _read_group(config, table, group, environ, env, lines)
        elif table == "policy":
            policy = _table(config, table, content)
            env[host_settings.POLICY_SETTING] = _policy_json(config, policy)
            lines[host_settings.POLICY_SETTING] = config.line_of("policy")
        elif table == "plugins":
            for distribution, section in _table(config, table, content).items():
                # Spelt as TOOLHOST_PLUGINS may spell it: toolhost_people is toolhost-people.
                normalized = normalize_dist_name(distribution)
                if normalized in plugins:
                    raise ConfigFileError(
                        f"{config.where(f'plugins.{distribution}')}: [plugins.{distribution}]: "
                        f"a second table for {normalized} (also [plugins."
                        f"{plugin_names[normalized]}])")
                plugins[normalized] = _table(config, f"plugins.{distribution}", section)
                plugin_names[normalized] = distribution
        else:
            raise ConfigFileError(f"{config.where(table)}: [{table}]: not a table of "
                                  "toolhost.toml (host, mcp, http, policy, plugins.<name>)")
    return attrs.evolve(config, env=env, lines=lines, plugin_tables=plugins,
                        plugin_table_names=plugin_names, mcp_servers=servers,
                        file_references=tuple(_file_references(path, data)))


def _file_references(path: Path, data: Mapping[str, Any]) -> list[Path]:
    """The file each ``{ file = "PATH" }`` table in ``data`` names, relative to ``path``'s
    directory. Walked with a list, not by recursion: tomllib reads nesting nearly as deep as
    the interpreter's recursion bound."""
    found: list[Path] = []
    pending: list[object] = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, Mapping):
            if set(value) == {"file"} and isinstance(value["file"], str):
                named = value["file"]
                # A NUL is refused where the reference is read: no file has such a name.
                if "\x00" not in named:
                    with contextlib.suppress(RuntimeError):  # ~user of no such user
                        found.append(referenced_file(path, named))
                continue
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return found


def referenced_file(config_path: Path, named: str) -> Path:
    """The file ``{ file = named }`` in ``config_path`` reads: a relative path is relative to
    the file that names it, not to where the host started.

    :raises RuntimeError: ``~user`` of no such user."""
    return config_path.parent / Path(named).expanduser()


def _writable_by_others(path: Path, st: os.stat_result) -> tuple[str, str] | None:
    """What lets another user of the machine change the file, and what to do about it; None
    when nothing does. Every name the path resolves through is looked at as the kernel walks
    it, link by link: the directory holding it must not let others replace it (writable by
    others, not sticky), and in a sticky one everyone can write (``/tmp``) it must be ours or
    root's (another user's file there is theirs to rewrite, or a link they pointed). The file
    itself must not be writable by others. Group-writable is left to the operator, who chose
    the group; a file of another owner elsewhere too (a file bind-mounted into a container is
    owned by a uid the container may not know)."""
    if st.st_mode & stat.S_IWOTH:
        return f"any user can change {path}", f"chmod o-w {path}"
    named = path if path.is_absolute() else Path(os.getcwd(), path)
    parts, current, hops = list(named.parts[1:]), Path(named.anchor or "/"), 0
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        entry = current / name
        try:
            mode = os.stat(current).st_mode
            found = os.lstat(entry)
        except OSError:
            break  # gone from this view of the tree: judged below, by what was reached
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            return f"any user can change {current}", f"chmod o-w {current}"
        # A mount point (another device than its directory: a file bind-mounted in) cannot be
        # replaced or rewritten by whoever owns the name: its owner's uid is the mount's.
        if (mode & stat.S_IWOTH and found.st_uid not in (os.geteuid(), 0)
                and not _mount_point(entry, found, current)):
            return (f"{entry} belongs to another user in {current}, which any user can write",
                    "keep it in a directory only you can write")
        if stat.S_ISLNK(found.st_mode):
            hops += 1
            if hops > 40:  # the kernel's own bound: the read above would have failed
                return None
            try:
                target = Path(os.readlink(entry))
            except OSError:  # no longer a link: changed under the walk
                return (f"{entry} changed while it was looked at", "run it again")
            if target.is_absolute():
                current = Path(target.anchor)
            parts[:0] = [p for p in target.parts if p != target.anchor]
            continue
        current = entry
    # What the walk reached must be the file read: a link whose text names another place than
    # it leads (``/proc/<pid>/root`` into another mount namespace) was judged on the wrong tree.
    try:
        reached: os.stat_result | None = os.stat(current)
    except OSError:
        reached = None
    if reached is None or (reached.st_dev, reached.st_ino) != (st.st_dev, st.st_ino):
        return (f"{path} goes through a link that leads elsewhere than it says",
                "name the file by its own path")
    return None


def _mount_point(entry: Path, found: os.stat_result, directory: Path) -> bool:
    """Whether ``entry`` is a mount point: on another device than its directory, or listed as
    one in ``/proc/self/mountinfo`` (a file bind-mounted from the same filesystem)."""
    try:
        if found.st_dev != os.stat(directory).st_dev:
            return True
        with open("/proc/self/mountinfo", "rb") as mounts:
            listed = {line.split(b" ")[4] for line in mounts if line.count(b" ") >= 4}
    except OSError:
        return False
    # mountinfo escapes space, tab, newline and backslash in octal.
    escaped = os.fsencode(entry)
    for char in b"\\ \t\n":
        escaped = escaped.replace(bytes([char]), b"\\%03o" % char)
    return escaped in listed


def _servers(config: ConfigFile, tables: object,
             environ: Mapping[str, str]) -> tuple[UpstreamServer, ...]:
    from toolhost._model.upstream import parse_servers

    try:
        return parse_servers(
            tables, where=config.where, world_readable=config.world_readable,
            path=str(config.path),
            reference=lambda where, ref: _reference(config, where, ref, environ))
    except ConfigFileError:
        raise
    except SettingError as exc:
        raise ConfigFileError(str(exc)) from None


def _table(config: ConfigFile, name: str, content: object) -> Mapping[str, Any]:
    if not isinstance(content, dict):
        raise ConfigFileError(f"{config.where(name)}: {name}: must be a table ([{name}])")
    return content


def _read_group(config: ConfigFile, group: str, table: Mapping[str, Any],
                environ: Mapping[str, str], env: dict[str, str], lines: dict[str, int]) -> None:
    specs = {host_settings.key_of(s.name): s for s in host_settings.in_group(group)
             if s.name != host_settings.POLICY_SETTING}
    for key, value in table.items():
        spec = specs.get(key)
        if spec is None:
            hint = " (the policy is the [policy] table)" if key == "policy" else ""
            tables = "; and the [mcp.servers.<name>] tables" if group == "mcp" else ""
            raise ConfigFileError(f"{config.where(group, key)}: [{group}] {key}: not a setting"
                                  f"{hint} (its keys: {', '.join(sorted(specs))}{tables})")
        env[spec.name] = _as_env(config, group, key, spec, value, environ)
        lines[spec.name] = config.line_of(group, key)


def _as_env(config: ConfigFile, table: str, key: str, spec: SettingSpec, value: object,
            environ: Mapping[str, str]) -> str:
    """``value`` as the text the setting's environment variable would hold."""
    where = f"{config.where(table, key)}: [{table}] {key}"
    # A credential's value is never quoted back, even when it is of the wrong type.
    secret = spec.secret or is_secret_name(spec.name)

    def shown(value: object) -> str:
        return _kind(value) if secret else _shown(value)

    if isinstance(value, dict):
        if spec.type not in ("secret", "url", "text", "path"):
            raise ConfigFileError(f"{where}: a reference table is only for a secret, a URL or "
                                  "text")
        return _text(where, _reference(config, where, value, environ))
    if spec.type == "flag":
        if not isinstance(value, bool):
            raise ConfigFileError(f"{where}: must be true or false, not {shown(value)}")
        return "1" if value else "0"
    if spec.type == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigFileError(f"{where}: must be a whole number, not {shown(value)}")
        return str(value)
    if spec.type == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not math.isfinite(value)):
            raise ConfigFileError(f"{where}: must be a finite number, not {shown(value)}")
        return repr(value)
    if spec.type == "list":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return _text(where, ",".join(value))
        if isinstance(value, str):
            return _text(where, value)
        raise ConfigFileError(f"{where}: must be a list of strings, not {shown(value)}")
    if not isinstance(value, str):
        raise ConfigFileError(f"{where}: must be a string, not {shown(value)}")
    _text(where, value)
    inline_secret = secret or (spec.type == "url" and url_has_password(value))
    if inline_secret and config.world_readable:
        raise ConfigFileError(f"{where}: {readable_secret(config.path)}")
    return _written_path(config, where, value) if spec.type == "path" else value


def _written_path(config: ConfigFile, where: str, value: str) -> str:
    """A path setting written in the file, as the file's ``{ file = "PATH" }`` references are
    read: relative to the file's directory, ``~`` expanded, so one shared file names one
    place whatever directory a command starts in (D268's rule for the environment's form
    stays: a variable's relative path is the process's)."""
    named = value.strip()  # as every reader of a path setting takes it
    if not named or Path(named).is_absolute():
        return value  # empty: the default, as from the environment
    try:
        return str(referenced_file(config.path, named).absolute())
    except RuntimeError:  # ~user of no such user
        raise ConfigFileError(f"{where}: names {value!r}, whose home directory does not exist"
                              ) from None


def _reference(config: ConfigFile, where: str, ref: Mapping[str, Any],
               environ: Mapping[str, str]) -> str:
    """The value a ``{ env = "NAME" }`` or ``{ file = "PATH" }`` reference stands for."""
    if set(ref) == {"env"} and isinstance(ref["env"], str):
        value = environ.get(ref["env"])
        if value is None:
            raise ConfigFileError(f"{where}: refers to the environment variable {ref['env']}, "
                                  "which is not set")
        return value
    if set(ref) == {"file"} and isinstance(ref["file"], str):
        try:
            target = referenced_file(config.path, _text(where, ref["file"]))
        except RuntimeError:  # ~user of no such user
            raise ConfigFileError(f"{where}: refers to the file {ref['file']!r}, whose home "
                                  "directory does not exist") from None
        return _small_file(where, target)
    raise ConfigFileError(f'{where}: a reference is {{ env = "NAME" }} or {{ file = "PATH" }}')


#: The most of ``toolhost.toml`` read: far more than any configuration, far less than memory.
MAX_CONFIG_BYTES = 1024 * 1024
#: The most a ``{ file = "PATH" }`` reference reads: a secret, not a document.
MAX_REFERENCED_BYTES = 64 * 1024


def _small_file(where: str, target: Path) -> str:
    """The text of the regular file ``target``, at most MAX_REFERENCED_BYTES, without its
    final newline. A FIFO or a device is refused, never read (it could block, or not end)."""
    def refused(problem: str) -> ConfigFileError:
        return ConfigFileError(f"{where}: refers to the file {target}, which cannot be read "
                               f"({problem})")

    try:
        data = read_small_file(target, MAX_REFERENCED_BYTES)
    except UnreadableFile as exc:
        if exc.error is not None:
            raise refused(exc.error.strerror or type(exc.error).__name__) from None
        raise refused(f"more than {MAX_REFERENCED_BYTES} bytes" if exc.too_large
                      else "not a regular file") from None
    try:
        return _text(where, data.decode("utf-8").rstrip("\r\n"))
    except UnicodeDecodeError:
        raise refused("not UTF-8 text") from None


def _text(where: str, value: str) -> str:
    """``value``, which must be able to be an environment variable's: no NUL character."""
    if "\x00" in value:
        raise ConfigFileError(f"{where}: holds a NUL character, which no setting can")
    return value


def readable_secret(path: object) -> str:
    """What a secret written inline in ``path``, a file every user can read, is told (D269):
    the host's settings and a gateway server's token or url alike."""
    return ("a secret written in a file every user can read: reference it "
            f'({{ env = "NAME" }} or {{ file = "PATH" }}) or chmod o-r {path}')


def url_has_password(value: str) -> bool:
    """Whether a URL carries a password: in its userinfo (``user:PW@``) or as a query
    parameter named like a credential (libpq's ``?password=``)."""
    return _URL_PASSWORD.search(value) is not None or redact_url_password(value) != value


def _policy_json(config: ConfigFile, table: Mapping[str, Any]) -> str:
    """The ``[policy]`` table as TOOLHOST_POLICY's JSON; the cells are checked where the policy
    is built, which names this file's line for a bad one (``policy_from_settings``)."""
    for key, value in table.items():
        if not isinstance(value, str):
            raise ConfigFileError(f"{config.where('policy', key)}: [policy] {key}: must be "
                                  f"\"allow\", \"approval\" or \"deny\", not {_shown(value)}")
    return json.dumps(dict(table), sort_keys=True)


def _kind(value: object) -> str:
    """What a value is, without it: for a credential of the wrong type."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "an array"
    return "a string" if isinstance(value, str) else type(value).__name__


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "an array"
    return json.dumps(value) if isinstance(value, str) else str(value)


#: A table's header: its name is stripped after the match, not by the pattern (whitespace
#: on both sides of a lazy group backtracked cubically on a "[" and a run of spaces).
_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
#: One part of a key: quoted, literal or bare.
_KEY_PART = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)"""
_KEY_LINE = re.compile(rf"^\s*({_KEY_PART})\s*=")
#: ``env.X = 3``: a key of parts joined by dots (spaces allowed around each dot).
_DOTTED_KEY_LINE = re.compile(rf"^\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})+)\s*=")


def _key_lines(text: str) -> dict[tuple[str, str], int]:
    """Where each table header and each key of a table is, by line. TOML's parser keeps no
    positions; this scan reads only headers and ``key =`` lines, enough to name the line of a
    key the host refuses (a multi-line value is found at its table)."""
    found: dict[tuple[str, str], int] = {}
    table = ""
    for number, line in _lines_outside_strings(text):
        header = _HEADER.match(line)
        if header:
            table = ".".join(_unquote(part.strip()) for part in _split_dotted(header[1]))
            found.setdefault((table, ""), number)
            continue
        _note_keys(found, table, line, number)
    return found


def _lines_outside_strings(text: str) -> Iterator[tuple[int, str]]:
    """(number, line) of each line that does not begin inside a multi-line string: a
    ``[host]`` or ``key =`` line of a value's text is no header and no key."""
    inside = ""  # the delimiter of the multi-line string a line begins in
    for number, line in enumerate(text.splitlines(), start=1):
        rest = line
        if inside:
            end = line.find(inside)
            if end < 0:
                continue
            rest, inside = line[end + 3:], ""
        else:
            yield number, line
        inside = _left_open(rest)


#: What a line holds outside a multi-line string, in order: a comment (to its end), a
#: multi-line string's delimiter, a one-line string (one left open runs to the line's end, so
#: a search never starts again inside it: linear on any line).
_TOKEN = re.compile(r"""#.*|\"\"\"|'''|"(?:[^"\\]|\\.?)*"?|'[^']*'?""")
_DELIMITERS = ('"""', "'''")


def _left_open(line: str) -> str:
    """The delimiter of the multi-line string ``line`` (outside one) opens and leaves open,
    else "": a delimiter in a comment or in a one-line string opens nothing."""
    if not any(delimiter in line for delimiter in _DELIMITERS):
        return ""  # nearly every line: no pattern at all
    position = 0
    while (token := _TOKEN.search(line, position)) is not None:
        if token.group() not in _DELIMITERS:
            position = token.end()
            continue
        end = line.find(token.group(), token.end())
        if end < 0:
            return token.group()
        position = end + 3
    return ""


def _note_keys(found: dict[tuple[str, str], int], table: str, line: str, number: int) -> None:
    """The key ``line`` (of ``table``) begins, at ``number`` unless found before: a dotted
    one part by part (``env.X = 3`` in ``[t]`` is ``X`` of ``t.env`` and ``env`` of ``t``),
    so a refusal of ``X`` names its own line, not its table's header."""
    key = _KEY_LINE.match(line)
    if key:
        found.setdefault((table, _unquote(key.group(1))), number)
    elif key := _DOTTED_KEY_LINE.match(line):
        tables = [table] if table else []
        for part in _split_dotted(key.group(1)):
            found.setdefault((".".join(tables), _unquote(part.strip())), number)
            tables.append(_unquote(part.strip()))


def _split_dotted(header: str) -> list[str]:
    parts, current, quote = [], "", ""
    for char in header:
        if quote:
            current += char
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
            current += char
        elif char == ".":
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key
