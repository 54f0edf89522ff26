"""What every ``toolhost`` command shares: the one-line error, loading the host, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    import pluggy

    from toolhost._composition import Host, PluginSource, Settings, Stores, ToolhostError

__all__ = ["CommandError", "Parser", "add_command", "close_loaded", "load", "load_stores",
           "positive_int", "print_attachments", "print_json", "print_outcome", "refused"]

#: The hosts and stores this command loaded. ``close_loaded`` closes them when the command
#: ends: their connections and pools close then, not in the interpreter's teardown (where a
#: pool's threads can no longer be joined, and Python 3.13 reports every unclosed database).
_loaded: list[Host | Stores] = []


class CommandError(Exception):
    """One line for the operator; the command exits with ``code``."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def load(
    *, stores: bool = False, settings: Settings | None = None,
    sources: Sequence[PluginSource] | None = None,
    plugin_manager: pluggy.PluginManager | None = None, keep_validators: bool = False,
    tools: bool = True, record: Stores | None = None,
) -> Host:
    """The host over the installed plugins, or a CommandError with the refusal's one line.

    :param stores: open the data directory's stores now (a command that records calls), so a
        data directory or database that cannot be used stops the command before it starts.
    :param settings: the settings to load with (default: the environment).
    :param sources: plugins already discovered (default: discover them).
    :param plugin_manager: ``make_plugin_manager(sources)``, already made.
    :param keep_validators: write the validators' generated code to the data directory
        (``toolhost check``, which writes the scan's cache there too).
    :param tools: the command runs or lists tools; False (``pending``, ``show``, ...) starts
        no upstream MCP server of the gateway.
    :param record: the record's stores, opened already (``approve`` looked its row up there
        before loading a plugin): the host's pipeline is composed over them.
    """
    from toolhost._composition import ToolhostError, load_host

    try:
        host = load_host(settings, sources=sources, plugin_manager=plugin_manager,
                         keep_validators=keep_validators, gateway=tools)
    except ToolhostError as exc:  # a setting, the policy, a plugin, registration
        raise refused(exc) from None
    _loaded.append(host)
    if record is not None:
        host.adopt(record)
    if stores:
        try:
            host.open()  # the stores are opened and migrated now
        except ToolhostError as exc:
            raise refused(exc) from None
    return host


def load_stores() -> Stores:
    """The record's stores, opened, without loading a plugin (``pending``, ``show``, ``deny``,
    ``artifacts``, ``approve``'s lookup), or a CommandError with the one line ``load`` gives
    for the same setting or data directory."""
    from toolhost._composition import ToolhostError
    from toolhost._composition import load_stores as compose

    try:
        stores = compose()
    except ToolhostError as exc:
        raise refused(exc) from None
    _loaded.append(stores)
    try:
        stores.open()
    except ToolhostError as exc:
        raise refused(exc) from None
    return stores


def refused(exc: ToolhostError) -> CommandError:
    """The host's error as the command's one line: a usage error (exit 2) when a flag or a
    setting's value is wrong (``UsageError``), whichever setting and command; a failure (exit 1)
    otherwise: a plugin or registration refused, a data directory that cannot be used."""
    from toolhost._composition import UsageError

    return CommandError(str(exc), ExitCode.USAGE if isinstance(exc, UsageError)
                        else ExitCode.FAILED)


def close_loaded() -> None:
    """Close every host ``load`` and stores ``load_stores`` gave this command (their stores'
    connections, their pools)."""
    while _loaded:
        _loaded.pop().close()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def print_attachments(refs: Sequence[Any]) -> None:
    """A run's attachments for a person, on stderr (stdout stays what the model read)."""
    for ref in refs:
        print(f"toolhost: attached {ref.id} {json.dumps(ref.name, ensure_ascii=False)} "
              f"({ref.byte_count} bytes, {ref.media_type})", file=sys.stderr)


def print_outcome(outcome: Any, as_json: bool) -> int:
    if as_json:
        print_json(outcome.to_json())
    else:
        print(outcome.content)
    return ExitCode.OK if outcome.ok or outcome.status.value == "denied" else ExitCode.FAILED


class Parser(argparse.ArgumentParser):
    """The parser of the command line and of its commands (``add_subparsers``'s
    ``parser_class``). One made ``listed`` is a command another run parses: it is listed (its
    name, its help) and never built, as an ArgumentParser's construction costs ~0.13 ms."""

    def __init__(self, *args: Any, listed: bool = False, **kwargs: Any) -> None:
        if listed:
            self.prog = kwargs.get("prog") or ""
            return
        super().__init__(*args, **kwargs)


def add_command(sub: argparse._SubParsersAction[Parser], run: str | None, name: str,
                arguments: Callable[[argparse.ArgumentParser], object], **kwargs: Any) -> None:
    """Command ``name``, with its arguments only when it is the command this run parses
    (``run``): a run parses one command, and building every command's parser was ~7 ms of
    each start. Another command is listed, with its help, and never parsed."""
    if name != run:
        sub.add_parser(name, help=kwargs.get("help"), listed=True)
        return
    arguments(sub.add_parser(name, **kwargs))


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--limit``), else a usage error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return value
