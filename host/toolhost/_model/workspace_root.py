"""Which directory an operator may give as a run's workspace (``toolhost call --workspace``,
``TOOLHOST_MCP_WORKSPACE``).

The workspace tools write there, some without an approval under the default policy. So it
must hold none of what the host runs or trusts at its next start: the data directory (the
validators' cache is code every start runs, D256; the database is the record) and the
directory of ``toolhost.toml`` (the gateway's commands). A directory that holds one of them,
or is inside one, is refused. Paths are compared as the kernel resolves them (realpath), and
a link on the way to one of them counts too: a tool that replaced the link would move it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from toolhost._model.settings import CONFIG_SETTING, Settings, default_config_path

__all__ = ["workspace_refusal"]


def workspace_refusal(option: str, given: str, settings: Settings) -> str | None:
    """The one line that refuses ``given`` (named ``option`` in it) as a workspace root under
    ``settings``; None when it may be one."""
    root = Path(os.path.realpath(given))
    for what, place in _host_places(settings):
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
        return (f"{option} {given!r} {relation} {what} ({str(place)!r}), where a tool's write "
                "could change what the host runs at its next start: name a directory that "
                "neither holds it nor is inside it")
    return None


def _host_places(settings: Settings) -> list[tuple[str, Path]]:
    """The directories no workspace may overlap: the data directory, and the directory of
    each ``toolhost.toml`` a start may read (the one named, and the XDG default, which a start
    without TOOLHOST_CONFIG reads even if it does not exist yet)."""
    places = [("the data directory", Path(os.path.abspath(settings.data_dir)))]
    files = [default_config_path(settings.env)]
    named = (settings.env.get(CONFIG_SETTING) or "").strip()
    if named:
        with contextlib.suppress(RuntimeError):  # ~user of no such user: no file is read
            files.insert(0, Path(named).expanduser())
    for file in files:
        # Its name's directory, and the real file's (TOOLHOST_CONFIG may be a link).
        for directory in (Path(os.path.abspath(file)).parent,
                          Path(os.path.realpath(file)).parent):
            if all(directory != known for _, known in places):
                places.append(("the directory of toolhost.toml", directory))
    return places


def _links_to(place: Path) -> list[Path]:
    """Where each symbolic link on ``place``'s path lives (its directory resolved, its own
    name kept): a workspace holding one could replace it."""
    found = []
    for step in (place, *place.parents):
        if os.path.islink(step):
            found.append(Path(os.path.realpath(step.parent)) / step.name)
    return found
