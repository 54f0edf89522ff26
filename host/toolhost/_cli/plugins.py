"""``toolhost plugins``: each installed plugin distribution, its version, its tools and its state.

A state is one of: ``enabled`` (it registered tools), ``inactive`` (loaded, but it registered
none: the setting that activates its tools is unset or off), ``excluded``
(TOOLHOST_PLUGINS_EXCLUDE names it) or ``not selected`` (TOOLHOST_PLUGINS does not). Tools a
plugin declares it would register under a setting that is unset are named with that setting;
a loaded plugin's readiness (the ``toolhost_readiness`` hook, as ``toolhost check`` asks it) follows.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolhost._cli.common import CommandError, Parser, add_command, load, print_json
from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    from toolhost import SettingSpec
    from toolhost._composition import Host, Settings

__all__ = ["activation_hint", "add_parsers", "cmd_plugins"]


def add_parsers(sub: argparse._SubParsersAction[Parser], run: str | None) -> None:
    add_command(sub, run, "plugins", _arguments,
                help="list the installed plugins: version, tools, state and readiness")


def _arguments(plugins: argparse.ArgumentParser) -> None:
    plugins.add_argument("--json", action="store_true", help="one JSON object per plugin")


def cmd_plugins(args: argparse.Namespace) -> int:
    from toolhost._composition import PluginError, escaped, installed_distributions

    host = load()
    try:
        readiness = host.readiness()
    except PluginError as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None
    listed = [_plugin(host, dist, readiness) for dist in installed_distributions()]
    gateway = _gateway(host)
    if args.json:
        print_json(listed if gateway is None else [*listed, gateway])
        return ExitCode.OK
    for plugin in listed:
        print(f"{plugin['distribution']} {plugin['version']}: {plugin['state']}"
              + (f" ({plugin['why']})" if plugin["why"] else ""))
        if plugin["tools"]:
            print(f"  tools: {', '.join(plugin['tools'])}")
        for inactive in plugin["inactive"]:
            print(f"  inactive: {', '.join(inactive['tools'])}: {inactive['how']}")
        if plugin["readiness"] is not None:
            problems = plugin["readiness"]
            print("  ready" if not problems
                  else "\n".join(f"  not ready: {escaped(p)}" for p in problems))
    if gateway is not None:
        # The host's own contribution: one line per configured upstream server, its state.
        print("mcp gateway (toolhost.toml [mcp.servers]):")
        for server in gateway["servers"]:
            print(f"  server {server['server']} ({server['transport']}): {server['state']}"
                  + (f" ({server['problem']})" if server["problem"] else "")
                  + (f", tools: {', '.join(server['tools'])}" if server["tools"] else ""))
        for line in gateway["readiness"]:
            print(f"  not ready: {line}")
    return ExitCode.OK


def _gateway(host: Host) -> dict[str, Any] | None:
    if host.gateway is None:
        return None
    return {"distribution": "mcp gateway", "servers": host.gateway.servers_summary(),
            "readiness": host.gateway.readiness()}


def _plugin(host: Host, dist: str, readiness: Mapping[str, list[str]]) -> dict[str, Any]:
    from importlib import metadata

    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = "unknown"
    tools = [r.spec.identity for r in host.registry if r.distribution == dist]
    specs = host.declared_settings.get(dist, ())
    inactive = [{"tools": list(spec.activates), "setting": spec.name,
                 "how": _how(spec, dist)}
                for spec in _unset_activations(host.settings, specs)]
    state, why = _state(host.settings, dist, loaded=dist in host.loaded_distributions, tools=tools,
                        inactive=inactive)
    return {"distribution": dist, "version": version, "state": state, "why": why,
            "tools": tools, "inactive": inactive,
            "readiness": readiness.get(dist, []) if state in ("enabled", "inactive") else None}


def _state(settings: Settings, dist: str, *, loaded: bool, tools: Sequence[str],
           inactive: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    # Named as the operator wrote it: a file's key sent them looking for an unset variable.
    if dist in settings.plugin_exclude_list:
        return "excluded", f"{settings.written('TOOLHOST_PLUGINS_EXCLUDE')} names it"
    allow = settings.plugin_allow_list
    if allow is not None and dist not in allow:
        return "not selected", f"{settings.written('TOOLHOST_PLUGINS')} does not name it"
    if not loaded:
        return "not loaded", ""
    if tools:
        return "enabled", ""
    if inactive:
        return "inactive", "; ".join(_not_set(settings, entry["setting"]) for entry in inactive)
    return "inactive", "it registered no tools under these settings"


def _not_set(settings: Settings, name: str) -> str:
    """Why setting ``name`` activates nothing: unset, or set off or empty, where it was set (a
    flag set to a word it does not take refused the start: ``Settings.flag``). Never "unset"
    when the operator set it: they would look for a variable they already have."""
    raw = settings.get(name)
    if raw is None:
        return f"{name} is unset"
    return f"{settings.written(name)} is {'off' if raw.strip() else 'empty'}"


def _unset_activations(settings: Settings,
                       specs: Sequence[SettingSpec]) -> Iterator[SettingSpec]:
    """The declared settings that activate tools and are not set (a flag off, a value blank)."""
    for spec in specs:
        if spec.activates and not _is_set(settings, spec):
            yield spec


def _is_set(settings: Settings, spec: SettingSpec) -> bool:
    if spec.type == "flag":
        return settings.flag(spec.name)
    return bool((settings.get(spec.name) or "").strip())


def _how(spec: SettingSpec, dist: str) -> str:
    """What an operator sets to activate ``spec``'s tools, in the environment or the file."""
    if spec.type == "flag":
        return (f"set {spec.name}=1 (or {spec.file_key} = true under [plugins.{dist}] in "
                "toolhost.toml)")
    value = '{ env = "NAME" }' if spec.secret else '"..."'
    return f"set {spec.name} (or {spec.file_key} = {value} under [plugins.{dist}] in toolhost.toml)"


def activation_hint(host: Host, tool_name: str) -> str | None:
    """For a tool no plugin registered: which unset setting of a loaded plugin would register
    it, or which gateway server is not connected yet (``toolhost call`` says so; the model's
    text stays the static unknown-tool message)."""
    if host.gateway is not None:
        absent = host.gateway.unconnected_server_of(tool_name)
        if absent is not None:
            return f"no tool {tool_name!r} is registered now: {absent} (toolhost check)"
    for dist, specs in sorted(host.declared_settings.items()):
        for spec in _unset_activations(host.settings, specs):
            if tool_name in spec.activates:
                return f"{tool_name} is not active: {_how(spec, dist)}"
    return None
