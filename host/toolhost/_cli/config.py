"""``toolhost config``: every setting's effective value and where it comes from.

Printed as ``toolhost.toml`` would hold it, so an operator can copy a line into the file: a set
setting is ``key = value  # source`` (``PATH:LINE`` of the file, or ``environment NAME``), an
unset one a comment with its default. Secrets show ``***``; a URL's password too.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolhost._cli.common import Parser, add_command, print_json, refused
from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    from toolhost import SettingSpec
    from toolhost._composition import Settings

__all__ = ["LazyEpilogHelp", "add_parsers", "cmd_config", "settings_epilog"]

_COLUMN = 44


def add_parsers(sub: argparse._SubParsersAction[Parser], run: str | None) -> None:
    add_command(
        sub, run, "config", _arguments, add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="print the effective settings and where each comes from",
        description="Print every setting's effective value and its source: toolhost.toml "
                    "(TOOLHOST_CONFIG, else $XDG_CONFIG_HOME/toolhost/toolhost.toml), the "
                    "environment (which wins), or the default. Secrets show ***.")


def _arguments(config: argparse.ArgumentParser) -> None:
    config.add_argument("-h", "--help", action=LazyEpilogHelp, epilog=_with_plugins,
                        help="show this help, with every installed plugin's settings, and exit")
    config.add_argument("--json", action="store_true", help="one JSON object per setting")


class LazyEpilogHelp(argparse.Action):
    """``-h``/``--help`` whose epilog is made only when help is asked for: the settings it
    lists cost an import of their declarations (and, for ``config``, of the plugins), which no
    other use of the parser should pay."""

    def __init__(self, option_strings: Sequence[str], dest: str, *,
                 epilog: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         help=kwargs.get("help", "show this help message and exit"))
        self._epilog = epilog

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        parser.epilog = self._epilog()
        parser.print_help()
        parser.exit()


def _with_plugins() -> str:
    """Every setting, the installed plugins' included (``toolhost config --help``)."""
    from toolhost._composition import declared_settings

    try:
        _, declared = declared_settings()
    except Exception as exc:
        return settings_epilog(("host", "mcp", "http")) + f"\n(plugin settings not shown: {exc})\n"
    return settings_epilog(("host", "mcp", "http"), declared)


def settings_epilog(groups: Sequence[str],
                    declared: Mapping[str, Sequence[SettingSpec]] | None = None) -> str:
    """The settings of ``groups`` (and of each plugin ``declared``), for a ``--help``: the
    environment name, its toolhost.toml key, what it is for and its default."""
    import attrs

    from toolhost._composition import default_data_dir, host_settings

    out = []
    for group in groups:
        out.append(f"[{group}] settings (environment, or toolhost.toml's [{group}]):")
        for spec in host_settings.in_group(group):
            key = "[policy] table" if spec.name == host_settings.POLICY_SETTING else \
                host_settings.key_of(spec.name)
            if spec.name == "TOOLHOST_DATA_DIR":  # this machine's, not the rule's
                spec = attrs.evolve(spec, default=str(default_data_dir()))
            out.extend(_help_lines(spec, key))
    for dist, specs in sorted((declared or {}).items()):
        if specs:
            out.append(f"[plugins.{dist}] settings:")
            for spec in specs:
                out.extend(_help_lines(spec, spec.file_key))
    return "\n".join(out) + "\n"


def _help_lines(spec: SettingSpec, key: str) -> list[str]:
    import textwrap

    default = f" (default: {spec.default})" if spec.default is not None else ""
    return [f"  {spec.name}  [{key}, {spec.type}]",
            *textwrap.wrap(f"{spec.description}{default}", width=78, initial_indent=" " * 6,
                           subsequent_indent=" " * 6)]


def cmd_config(args: argparse.Namespace) -> int:
    from toolhost._composition import ToolhostError, declared_settings, redact_url_password

    try:
        settings, declared = declared_settings()
    except ToolhostError as exc:  # a setting (exit 2), a plugin that failed to load (1)
        raise refused(exc) from None
    entries = list(_entries(settings, declared))
    if args.json:
        print_json([{k: v for k, v in entry.items() if k != "spec"} for entry in entries])
        return ExitCode.OK
    path = settings.config.path if settings.config is not None else None
    print(f"# toolhost.toml: {path if path is not None else 'none'}")
    table = None
    for entry in entries:
        if entry["table"] != table:
            table = entry["table"]
            print(f"\n[{table}]")
        print(_line(entry))
    if settings.config is not None:
        for server in settings.config.mcp_servers:
            # The gateway's servers (docs/gateway.md): where each is, not its secrets.
            what = (f"stdio {server.command}" if server.command is not None
                    else f"http {redact_url_password(server.url or '')}")
            state = "" if server.enabled else ", disabled"
            print(f"\n# [mcp.servers.{server.name}] in "
                  f"{settings.config.where(f'mcp.servers.{server.name}')}: {what}{state} "
                  "(toolhost plugins shows its state and tools)")
        for dist in sorted(set(settings.config.plugin_tables) - set(declared)):
            written = settings.config.plugin_table_names.get(dist, dist)
            print(f"\n# [plugins.{written}] in {settings.config.where(f'plugins.{written}')}: "
                  "no such plugin is loaded (not installed, or left out)")
    return ExitCode.OK


def _entries(settings: Settings,
             declared: Mapping[str, Sequence[SettingSpec]]) -> Iterator[dict[str, Any]]:
    from toolhost._composition import host_settings

    for group in host_settings.GROUPS:
        for spec in host_settings.in_group(group):
            if spec.name != host_settings.POLICY_SETTING:
                yield _entry(settings, spec, group, host_settings.key_of(spec.name))
    yield from _policy_entries(settings)
    for dist, specs in sorted(declared.items()):
        for spec in specs:
            yield _entry(settings, spec, f"plugins.{dist}", spec.file_key)


def _entry(settings: Settings, spec: SettingSpec, table: str, key: str) -> dict[str, Any]:
    raw = settings.get(spec.name)
    # Set empty, a number is its default to every reader; shown as "" it would not read back
    # (the file takes no "" for a number), so it is shown as the default, with its source.
    empty = raw is not None and not raw.strip() and spec.type in ("integer", "number")
    return {"table": table, "key": key, "name": spec.name,
            "value": None if raw is None or empty else _shown(spec, raw),
            "source": settings.source_of(spec.name), "default": spec.default, "spec": spec}


def _policy_entries(settings: Settings) -> Iterator[dict[str, Any]]:
    """TOOLHOST_POLICY's cells, one per line under ``[policy]`` (its JSON is checked at every
    start, so a value that is not an object is shown whole)."""
    raw = settings.get("TOOLHOST_POLICY")
    source = settings.source_of("TOOLHOST_POLICY")
    try:
        cells = json.loads(raw) if raw and raw.strip() else {}
    except json.JSONDecodeError:
        cells = None
    if not isinstance(cells, dict):
        yield {"table": "policy", "key": None, "name": "TOOLHOST_POLICY", "value": raw,
               "source": source, "default": None}
        return
    config = settings.config if source not in ("environment", "default") else None
    for cell, action in sorted(cells.items()):
        # Each cell's own line: the setting's origin is its table's header.
        where = source if config is None else config.where("policy", cell)
        yield {"table": "policy", "key": cell, "name": "TOOLHOST_POLICY", "value": action,
               "source": where, "default": None}
    if not cells:
        yield {"table": "policy", "key": None, "name": "TOOLHOST_POLICY", "value": None,
               "source": "default", "default": "the seed's matrix"}


def _shown(spec: SettingSpec, raw: str) -> Any:
    """The value as its type in toolhost.toml; a secret as ``***``."""
    from toolhost._composition import MASK, is_secret_name, redact_url_password

    if spec.secret or is_secret_name(spec.name):
        return MASK if raw.strip() else ""
    if spec.type == "flag":
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if spec.type == "list":
        return [item.strip() for item in raw.split(",") if item.strip()]
    if spec.type in ("integer", "number"):
        try:
            return json.loads(raw.strip())
        except ValueError:
            return raw  # shown as written: the start refuses it, with its own line
    return redact_url_password(raw)


def _line(entry: Mapping[str, Any]) -> str:
    key = entry["key"]
    if key is not None and not key.replace("_", "").isalnum():
        key = json.dumps(key)  # a policy cell: "CODE_EXECUTION/HIGH"
    source = entry["source"]
    if source == "environment":
        source = f"environment {entry['name']}"
    if entry["value"] is None:
        default = f"default: {entry['default']}" if entry["default"] is not None else "unset"
        text = f"# {key or '(cells)'}: {default}" if key is not None else f"# {default}"
        # Set, but empty: the default, and which variable made it so.
        return text if source == "default" else f"{text.ljust(_COLUMN - 1)} # {source} (empty)"
    value = json.dumps(entry["value"], ensure_ascii=False)
    if isinstance(entry["value"], bool):
        value = "true" if entry["value"] else "false"
    text = f"{key} = {value}" if key is not None else f"# TOOLHOST_POLICY = {value}"
    return f"{text.ljust(_COLUMN - 1)} # {source}"
