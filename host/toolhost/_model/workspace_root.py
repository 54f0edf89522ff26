"""Which directory an operator may give as a run's workspace (``toolhost call --workspace``,
``TOOLHOST_MCP_WORKSPACE``).

The workspace tools write there, some without an approval under the default policy, and read
there. So it must hold none of what the host runs or trusts: the data directory (the
validators' cache is code every start runs, D256; the database is the record), the directory
of ``toolhost.toml``, the paths the gateway's stdio servers are started with, the token file
(read again when it changes), the extra trust roots, the files the database and the artifact
store are reached with (libpq's password file, keys and certificates; AWS's credentials), and
every file a ``{ file = "PATH" }`` reference names (a secret a read would show the model), and
what a plugin's ``path`` setting names (the sandbox's bubblewrap: the isolation itself). A
directory that holds one of them, or is inside one of the directories, is refused (D411,
D428, D436, D464). Paths are compared as the kernel resolves them (realpath), and a link on the way
to one of them counts too: a tool that replaced the link would move it.

Nor may it nest with another live run's operator directory (inside it, or holding it; the same
directory is shared, as a server's sessions share theirs): one run's tools (an approved
sandboxed command) could replace the inner directory, or one on its way, with a link to any
directory on the host, which the other run would then open as its workspace. Compared as
given (made absolute, links kept: a link on the way inside the other counts), resolved, and as
places in their filesystems (a bind mount shows a directory at a path no realpath leads back
from; D469). A server's directory (``TOOLHOST_MCP_WORKSPACE``) counts as live for as long as
the server runs, with or without a session: it opens that directory again for each session,
so a run on its parent could otherwise swap it between two sessions (its claim:
``_adapters/served_claims.py``).

Its path, as given and resolved, is UTF-8 text: a call that pauses for approval records the
resolved path on its row, which holds text only, and its approval runs the call there (D509);
a path it could not record had the approved call run in an empty workspace instead.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from toolhost._model.printable import not_utf8
from toolhost._model.setting_spec import SettingSpec
from toolhost._model.settings import CONFIG_SETTING, Settings, default_config_path

__all__ = ["workspace_refusal"]

#: What a tool of either run could do where two runs' directories nest.
_NESTED = ("where either run's tools could replace the inner directory, or one on its way, "
           "with a link to any directory on the host")

#: What a write to each kind of place could do.
_RUNS = "where a tool's write could change what the host runs at its next start"
_TRUSTS = "where a tool's write could change whom the host trusts"
_READS = "where a tool could read or change the setting the host reads from it"
_PLUGIN = "where a tool's write could change what the plugin runs or reads"

#: Why a path that is not UTF-8 is refused (D341 for paths, amended).
_NOT_TEXT = ("which the record cannot keep for a call paused for approval (its approval would "
             "run elsewhere): name a directory whose path is UTF-8 text")


def workspace_refusal(option: str, given: str, settings: Settings,
                      declared: Mapping[str, Sequence[SettingSpec]] | None = None,
                      live: Sequence[tuple[str, Path]] = (),
                      served: Sequence[tuple[int, Path]] = ()) -> str | None:
    """The one line that refuses ``given`` (named ``option`` in it) as a workspace root under
    ``settings``; None when it may be one. ``declared``: each loaded plugin's settings
    (``Host.declared_settings``), whose ``path`` ones name places of its own. ``live``: (run
    id, directory) of each run live on this host in an operator's directory; ``served``:
    (pid, directory) of each server serving one (``served_directories``)."""
    root = Path(os.path.realpath(given))
    untyped = _not_text(option, given, root)
    if untyped is not None:
        return untyped
    for what, place, risk in [*_host_places(settings), *_plugin_places(settings, declared)]:
        real = Path(os.path.realpath(place))
        if root == real:
            relation = "is"
        elif real.is_relative_to(root) or any(link.is_relative_to(root)
                                              for link in _links_to(place)):
            relation = "holds"
        elif root.is_relative_to(real):
            relation = "is inside"
        else:
            continue
        return (f"{option} {given!r} {relation} {what} ({str(place)!r}), {risk}: name a "
                "directory that neither holds it nor is inside it")
    # Each live directory: whose it is, and how the operator makes it not live.
    holders = [(f"the workspace of run {run_id!r}", directory,
                f"end that run (toolhost runs end {run_id})") for run_id, directory in live]
    holders += [(f"the directory a toolhost serve (pid {pid}) serves", directory,
                 "stop that server") for pid, directory in served]
    nested = _nested_run(given, root, holders)
    if nested is not None:
        relation, (whose, directory, remedy) = nested
        return (f"{option} {given!r} {relation} {whose} ({str(directory)!r}), live on this "
                f"host, {_NESTED}: name a directory that neither holds it nor is inside it, or "
                f"{remedy}")
    return None


def _not_text(option: str, given: str, root: Path) -> str | None:
    """The line refusing ``given`` (``root`` resolved) when either path is not UTF-8 text,
    shown as the bytes the operator typed or the link led to; None when both are text."""
    typed = not_utf8(given)
    if typed is not None:
        return f"{option} {typed} is not UTF-8 text, {_NOT_TEXT}"
    resolved = not_utf8(str(root))
    if resolved is not None:
        return f"{option} {given!r} resolves to {resolved}, not UTF-8 text, {_NOT_TEXT}"
    return None


_Holder = tuple[str, Path, str]


def _nested_run(given: str, root: Path, live: Sequence[_Holder],
                ) -> tuple[str, _Holder] | None:
    """(relation, holder) of a live directory (a run's, a server's: ``(whose, directory,
    remedy)``) that ``given`` (``root`` resolved) is inside, is reached through a link inside,
    or holds; None when none does. The same directory is not nesting: no tool of either run can
    move the other's root. Compared as places in their filesystems: a bind mount shows a
    directory (or one below it) at a second path no realpath leads back from (D469)."""
    places = _Places()
    mine = places.of(root)
    ways = [places.of(link.parent) for link in _links_to(_absolute(given))]
    for holder in live:
        theirs = places.of(Path(os.path.realpath(holder[1])))
        if (mine != theirs and mine.is_relative_to(theirs)) or any(
                way.is_relative_to(theirs) for way in ways):
            return "is inside", holder
        if mine != theirs and theirs.is_relative_to(mine):
            return "holds", holder
    return None


class _Places:
    """Where a directory is in its filesystem, whatever path it is reached by: the mount that
    holds it (the longest mount point on its path, the last one mounted there on top), its
    device, and its path from that filesystem's root (``/proc/self/mountinfo``); its resolved
    path when the mount table cannot be read."""

    def __init__(self) -> None:
        self._mounts: list[tuple[PurePosixPath, str, PurePosixPath]] | None = None

    def of(self, resolved: Path) -> PurePosixPath:
        """``resolved`` (a realpath) as ``/<device>/<path in its filesystem>``."""
        path = PurePosixPath(resolved)
        found: tuple[PurePosixPath, str, PurePosixPath] | None = None
        for point, device, fs_root in self._table():
            if (path == point or path.is_relative_to(point)) and (
                    found is None or len(point.parts) >= len(found[0].parts)):
                found = (point, device, fs_root)
        if found is None:
            return path
        point, device, fs_root = found
        return PurePosixPath("/", device) / fs_root.relative_to("/") / path.relative_to(point)

    def _table(self) -> list[tuple[PurePosixPath, str, PurePosixPath]]:
        if self._mounts is None:
            self._mounts = []
            with contextlib.suppress(OSError):
                for line in Path("/proc/self/mountinfo").read_text().splitlines():
                    fields = line.split()
                    if len(fields) >= 5:  # id, parent, major:minor, root, mount point, ...
                        self._mounts.append((PurePosixPath(_unescaped(fields[4])), fields[2],
                                             PurePosixPath(_unescaped(fields[3]))))
        return self._mounts


def _unescaped(field: str) -> str:
    """A mountinfo path: the kernel writes space, tab, newline and backslash as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _host_places(settings: Settings) -> list[tuple[str, Path, str]]:
    """What no workspace may overlap, each with what a tool could do there: the data
    directory, the directory of each ``toolhost.toml`` a start may read (the one named, and
    the XDG default, which a start without TOOLHOST_CONFIG reads even if it does not exist
    yet), then the files the host runs or reads its trust and secrets from."""
    places = [("the data directory", _absolute(settings.data_dir), _RUNS)]
    files = [default_config_path(settings.env)]
    named = (settings.env.get(CONFIG_SETTING) or "").strip()
    if named:
        with contextlib.suppress(RuntimeError):  # ~user of no such user: no file is read
            files.insert(0, Path(named).expanduser())
    for file in files:
        # Its name's directory, and the real file's (TOOLHOST_CONFIG may be a link).
        for directory in (_absolute(file).parent, Path(os.path.realpath(file)).parent):
            if all(directory != known for _, known, _ in places):
                places.append(("the directory of toolhost.toml", directory, _RUNS))
    for setting, what, risk in (("TOOLHOST_HTTP_TOKENS_FILE", "the token file", _TRUSTS),
                                ("TOOLHOST_CA_BUNDLE", "the trust roots", _TRUSTS)):
        if value := (settings.env.get(setting) or "").strip():
            places.append((f"{what} {setting}", _absolute(value), risk))
    places.extend(_store_credentials(settings))
    config = settings.config
    if config is not None:
        for server in config.mcp_servers:
            places.extend((f"a path the gateway's server {server.name!r} is started with",
                           path, _RUNS)
                          for path in _gateway_paths(server.command, server.args, config.path))
        places.extend(("a file toolhost.toml refers to", _absolute(f), _READS)
                      for f in config.file_references)
    return places


def _plugin_places(settings: Settings, declared: Mapping[str, Sequence[SettingSpec]] | None,
                   ) -> list[tuple[str, Path, str]]:
    """What the plugins' ``path`` settings name: a plugin runs or reads it (the sandbox runs
    its bubblewrap outside any namespace, so a model's write there escapes the sandbox)."""
    return [(f"the path {dist}'s {spec.name} names", _absolute(value), _PLUGIN)
            for dist, specs in sorted((declared or {}).items()) for spec in specs
            if spec.type == "path"
            and (value := (settings.env.get(spec.name) or "").strip()) and "\x00" not in value]


def _absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute without normalizing it: ``link/..`` is left for realpath to
    resolve as the kernel does (through the link), not dropped as text."""
    return Path(os.path.join(os.getcwd(), path))


def _gateway_paths(command: str | None, args: tuple[str, ...], config_path: Path) -> list[Path]:
    """What a stdio server's command line names on disk: its command when given by a path,
    and each argument that names an existing file or directory (``python server.py``, ``uv
    --directory PROJECT run server.py``), a relative one looked up both where the host starts
    and beside toolhost.toml (a host started elsewhere later would run what is there). A bare
    command name is PATH's to find; a name holding a NUL names nothing."""
    found = []
    if command and os.sep in command and "\x00" not in command:
        found.append(_absolute(command))
    for arg in args:
        if arg.startswith("-"):  # an option; ``--directory=PROJECT`` names PROJECT
            arg = arg.partition("=")[2]
        if "\x00" in arg or not arg:
            continue
        bases = [Path(os.getcwd())] if os.path.isabs(arg) else [Path(os.getcwd()),
                                                                   config_path.parent]
        found.extend(_absolute(base / arg) for base in bases if os.path.exists(base / arg))
    return found


def _store_credentials(settings: Settings) -> list[tuple[str, Path, str]]:
    """The files the record's and the artifacts' servers are reached with: libpq's password
    file, client key and certificates and trust roots (named in TOOLHOST_DATABASE_URL, its
    PG* variables, or at their defaults under the home directory), and the AWS credentials
    and configuration (the variables naming them, or ``~/.aws``)."""
    env = settings.env
    homes = {Path(h) for h in (env.get("HOME"), os.path.expanduser("~")) if h}
    places: list[tuple[str, Path, str]] = []
    if (env.get("TOOLHOST_DATABASE_URL") or "").strip():
        named = [env.get(v) for v in ("PGPASSFILE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY",
                                      "PGSSLCRL", "PGSSLCRLDIR", "PGSERVICEFILE")]
        named += _conninfo_files(env["TOOLHOST_DATABASE_URL"])
        for home in homes:
            named += [str(home / ".pgpass"), str(home / ".postgresql"),
                      str(home / ".pg_service.conf")]
        places += [("a file the database is reached with", _absolute(f), _READS)
                   for f in named if f and "\x00" not in f]
    if (env.get("TOOLHOST_ARTIFACT_STORE") or "").strip():
        aws = [env.get("AWS_SHARED_CREDENTIALS_FILE"), env.get("AWS_CONFIG_FILE"),
               *(str(home / ".aws") for home in homes)]
        places += [("a file the artifact store is reached with", _absolute(f), _READS)
                   for f in aws if f and "\x00" not in f]
    return places


def _conninfo_files(url: str) -> list[str]:
    """The files a database URL (or libpq conninfo) names: its password file, SSL key,
    certificates and revocation lists. One libpq cannot parse names none (the host refuses it
    at start, D413)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # no PostgreSQL extra: no such database is reached
        return []
    try:
        parts = conninfo_to_dict(url)
    except Exception:  # psycopg's ProgrammingError for what libpq refuses
        return []
    keys = ("passfile", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir")
    return [str(parts[k]) for k in keys if isinstance(parts.get(k), str)]


def _links_to(place: Path) -> list[Path]:
    """Where each symbolic link on ``place``'s path lives (its directory resolved, its own
    name kept): a workspace holding one could replace it."""
    found = []
    for step in (place, *place.parents):
        if os.path.islink(step):
            found.append(Path(os.path.realpath(step.parent)) / step.name)
    return found
