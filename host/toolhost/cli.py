"""The ``toolhost`` command.

Nothing heavy is imported at module import: ``toolhost --help`` loads no plugin, and each
command imports what it needs when it runs. Bad input is one line on stderr and a non-zero
exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolhost.host import Host

EXIT_OK = 0
EXIT_FAILED = 1  # the tool call failed, or registration refused
EXIT_USAGE = 2  # the command line itself is wrong


class CommandError(Exception):
    """One line for the operator; the command exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolhost",
        description="A plugin-based tool host for LLM agents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    tools = sub.add_parser("tools", help="list the registered tools")
    tools.add_argument("--json", action="store_true", help="print every ToolSpec as JSON")

    sub.add_parser("check", help="run registration; exit non-zero with the refusal")

    call = sub.add_parser("call", help="invoke one tool through the pipeline")
    call.add_argument("name", help="tool name, e.g. math.calculate")
    call.add_argument("--args", default="{}", help="arguments as a JSON object")
    call.add_argument("--version", default=None, help="pin an exact version, e.g. 1.0.0")
    call.add_argument("--json", action="store_true", help="print the whole outcome as JSON")

    sub.add_parser("demo", help="the Milestone 1 run with a scripted fake model")
    return parser


def _load() -> Host:
    from toolhost.host import load_host
    from toolhost.plugins import PluginError
    from toolhost.registration import RegistrationRefused

    try:
        return load_host()
    except (PluginError, RegistrationRefused) as exc:
        raise CommandError(str(exc), EXIT_FAILED) from None


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def cmd_tools(args: argparse.Namespace) -> int:
    host = _load()
    if args.json:
        from toolhost.convert import spec_to_json

        _print_json(
            [{**spec_to_json(r.spec), "distribution": r.distribution} for r in host.registry]
        )
        return EXIT_OK
    for r in host.registry:
        s = r.spec
        flags = " deprecated" if s.deprecated else ""
        print(
            f"{s.identity:36} {s.side_effect.value}/{s.risk.value}/{s.idempotency.value} "
            f"{s.output_trust.value} ({r.distribution}){flags}"
        )
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    host = _load()
    dists = sorted({r.distribution for r in host.registry})
    print(f"ok: {len(host.registry)} tools registered from {', '.join(dists) or 'no plugins'}")
    return EXIT_OK


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--args is not valid JSON ({exc.msg} at position {exc.pos})") from None
    host = _load()
    from toolhost import core_messages

    outcome = host.invoke_sync(args.name, arguments, version=args.version)
    if args.json:
        _print_json(outcome.to_json())
    else:
        print(outcome.content)
    if outcome.failure is not None:
        code = outcome.failure.reason_code
        if code == core_messages.UNKNOWN_TOOL:
            print(f"toolhost: no tool {args.name!r} is registered (toolhost tools lists them)",
                  file=sys.stderr)
        elif code == core_messages.UNKNOWN_VERSION:
            known = ", ".join(host.registry.versions(args.name))
            print(f"toolhost: {args.name} has no version {args.version!r} (registered: {known})",
                  file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    host = _load()
    if "math.calculate" not in host.registry.names():
        raise CommandError("the demo needs toolhost-math installed (pip install plugins/math)",
                           EXIT_FAILED)
    from toolhost.demo import milestone_1_provider, run_demo

    def emit(line: str) -> None:
        print(line, flush=True)

    outcomes = run_demo(host, milestone_1_provider(), emit)
    return EXIT_OK if outcomes and all(o.ok for o in outcomes) else EXIT_FAILED


_COMMANDS = {"tools": cmd_tools, "check": cmd_check, "call": cmd_call, "demo": cmd_demo}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except CommandError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
