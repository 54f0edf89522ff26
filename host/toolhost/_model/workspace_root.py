"""Which directory an operator may give as a run's workspace (``toolhost call --workspace``,
``TOOLHOST_MCP_WORKSPACE``).

The workspace tools write there, some without an approval under the default policy, and read
there. So it must hold none of what the host runs or trusts: the data directory (the
validators' cache is code every start runs, D256; the database is the record), the directory
of ``toolhost.toml``, the files of the gateway's stdio commands, the token file (read again
when it changes), the extra trust roots, and every file a ``{ file = "PATH" }`` reference
names (a secret a read would show the model). A directory that holds one of them, or is
inside one of the directories, is refused (D411, D428). Paths are compared as the kernel
resolves them (realpath), and a link on the way to one of them counts too: a tool that
replaced the link would move it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from toolhost._model.settings import CONFIG_SETTING, Settings, default_config_path

__all__ = ["workspace_refusal"]

#: What a write to each kind of place could do.
_RUNS = "where a tool's write could change what the host runs at its next start"
_TRUSTS = "where a tool's write could change whom the host trusts"
_READS = "where a tool could read or change the setting the host reads from it"


def workspace_refusal(option: str, given: str, settings: Settings) -> str | None:
    """The one line that refuses ``given`` (named ``option`` in it) as a workspace root under
    ``settings``; None when it may be one."""
    root = Path(os.path.realpath(given))
    for what, place, risk in _host_places(settings):
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
    return None


def _host_places(settings: Settings) -> list[tuple[str, Path, str]]:
    """What no workspace may overlap, each with what a tool could do there: the data
    directory, the directory of each ``toolhost.toml`` a start may read (the one named, and
    the XDG default, which a start without TOOLHOST_CONFIG reads even if it does not exist
    yet), then the files the host runs or reads its trust and secrets from."""
    places = [("the data directory", Path(os.path.abspath(settings.data_dir)), _RUNS)]
    files = [default_config_path(settings.env)]
    named = (settings.env.get(CONFIG_SETTING) or "").strip()
    if named:
        with contextlib.suppress(RuntimeError):  # ~user of no such user: no file is read
            files.insert(0, Path(named).expanduser())
    for file in files:
        # Its name's directory, and the real file's (TOOLHOST_CONFIG may be a link).
        for directory in (Path(os.path.abspath(file)).parent,
                          Path(os.path.realpath(file)).parent):
            if all(directory != known for _, known, _ in places):
                places.append(("the directory of toolhost.toml", directory, _RUNS))
    for setting, what, risk in (("TOOLHOST_HTTP_TOKENS_FILE", "the token file", _TRUSTS),
                                ("TOOLHOST_CA_BUNDLE", "the trust roots", _TRUSTS)):
        if value := (settings.env.get(setting) or "").strip():
            places.append((f"{what} {setting}", Path(os.path.abspath(value)), risk))
    config = settings.config
    if config is not None:
        for server in config.mcp_servers:
            # A stdio command named by its path, and an argument naming a file (``python
            # server.py``): the gateway runs them. A bare command name is PATH's to find; a
            # name holding a NUL names no file.
            named_files = [a for a in server.args if os.path.isfile(a)]
            command = server.command or ""
            if os.sep in command and "\x00" not in command:
                named_files.insert(0, command)
            places.extend((f"a file the gateway's server {server.name!r} runs",
                           Path(os.path.abspath(f)), _RUNS) for f in named_files)
        places.extend(("a file toolhost.toml refers to", Path(os.path.abspath(f)), _READS)
                      for f in config.file_references)
    return places


def _links_to(place: Path) -> list[Path]:
    """Where each symbolic link on ``place``'s path lives (its directory resolved, its own
    name kept): a workspace holding one could replace it."""
    found = []
    for step in (place, *place.parents):
        if os.path.islink(step):
            found.append(Path(os.path.realpath(step.parent)) / step.name)
    return found
