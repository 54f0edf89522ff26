"""The ``toolhost`` command.

Nothing heavy is imported at module import: ``toolhost --help`` loads no plugin, and each
command imports what it needs when it runs. Bad input is one line on stderr and a non-zero
exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    from toolhost._composition import Host


class CommandError(Exception):
    """One line for the operator; the command exits with ``code``."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
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
    tools.add_argument(
        "--format", choices=("canonical", "openai", "anthropic"), default=None,
        help="print the catalog a model is shown (the default roster, or --enable)",
    )
    tools.add_argument("--enable", action="append", metavar="NAME",
                       help="with --format: these tools instead of the default roster")

    sub.add_parser("check", help="run registration; exit non-zero with the refusal")

    call = sub.add_parser("call", help="invoke one tool through the pipeline")
    call.add_argument("name", help="tool name, e.g. math.calculate")
    call.add_argument("--args", default="{}", help="arguments as a JSON object")
    call.add_argument("--version", default=None, help="pin an exact version, e.g. 1.0.0")
    call.add_argument("--json", action="store_true", help="print the whole outcome as JSON")
    call.add_argument("--workspace", metavar="DIR", default=None,
                      help="an existing directory to use as the run's workspace root "
                           "(default: a fresh workspace, discarded after the call)")

    sub.add_parser("demo", help="the Milestone 1 run with a scripted fake model")

    pending = sub.add_parser("pending", help="list invocations awaiting approval")
    pending.add_argument("--json", action="store_true", help="print them as JSON")

    approve = sub.add_parser("approve", help="approve a paused invocation and run it")
    approve.add_argument("id", help="the invocation id `call` or `pending` printed")
    approve.add_argument("--approver", default="operator", help="who approves (recorded)")
    approve.add_argument("--json", action="store_true", help="print the whole outcome as JSON")

    deny = sub.add_parser("deny", help="deny a paused invocation")
    deny.add_argument("id", help="the invocation id")
    deny.add_argument("--reason", required=True, help="why (recorded, never shown the model)")
    deny.add_argument("--approver", default="operator", help="who denies (recorded)")
    deny.add_argument("--json", action="store_true", help="print the whole outcome as JSON")

    serve = sub.add_parser("serve", help="serve the tools over the Model Context Protocol")
    serve.add_argument("--http", metavar="HOST:PORT", default=None,
                       help="streamable HTTP on this address instead of stdio, e.g. "
                            "127.0.0.1:8765")
    serve.add_argument("--enable", action="append", metavar="NAME",
                       help="serve these tools instead of the default roster (repeatable)")
    return parser


def _load() -> Host:
    from toolhost._composition import load_host
    from toolhost._pipeline.policy import PolicyConfigError
    from toolhost._registration.discovery import PluginError
    from toolhost._registration.refusals import RegistrationRefused

    try:
        return load_host()
    except (PluginError, RegistrationRefused, PolicyConfigError) as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def cmd_tools(args: argparse.Namespace) -> int:
    host = _load()
    if args.format is not None:
        from toolhost._cli.catalog import export

        names = args.enable if args.enable else host.registry.default_roster()
        specs = []
        for name in names:
            try:
                specs.append(host.registry.resolve(name).spec)
            except LookupError:
                raise CommandError(f"no tool {name!r} is registered") from None
        sys.stdout.write(export(specs, args.format).decode("utf-8") + "\n")
        return ExitCode.OK
    if args.json:
        from toolhost._model.convert import spec_to_json

        _print_json(
            [{**spec_to_json(r.spec), "distribution": r.distribution} for r in host.registry]
        )
        return ExitCode.OK
    for r in host.registry:
        s = r.spec
        flags = " deprecated" if s.deprecated else ""
        print(
            f"{s.identity:36} {s.side_effect.value}/{s.risk.value}/{s.idempotency.value} "
            f"{s.output_trust.value} ({r.distribution}){flags}"
        )
    return ExitCode.OK


def cmd_check(args: argparse.Namespace) -> int:
    host = _load()
    dists = sorted({r.distribution for r in host.registry})
    print(f"ok: {len(host.registry)} tools registered from {', '.join(dists) or 'no plugins'}")
    return ExitCode.OK


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--args is not valid JSON ({exc.msg} at position {exc.pos})") from None
    host = _load()
    from toolhost._model import host_reasons as core_messages

    workspace = args.workspace
    if workspace is not None and not os.path.isdir(workspace):
        raise CommandError(f"--workspace {workspace!r} is not an existing directory")
    run = host.local_run(workspace=workspace)
    try:
        outcome = host.invoke_sync(args.name, arguments, version=args.version, run=run)
    finally:
        host.end_run(run)
    if outcome.paused:
        # stdout carries the id alone, so a script can approve what it just paused.
        if args.json:
            _print_json(outcome.to_json())
        else:
            print(outcome.invocation_id)
        print(f"toolhost: {args.name} awaits approval: toolhost approve {outcome.invocation_id}",
              file=sys.stderr)
        return ExitCode.PAUSED
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
    # A denial (a policy cell set to deny) is not a success either.
    return ExitCode.OK if outcome.ok else ExitCode.FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    host = _load()
    if "math.calculate" not in host.registry.names():
        raise CommandError("the demo needs toolhost-math installed (pip install plugins/math)",
                           ExitCode.FAILED)
    from toolhost._cli.demo import milestone_1_provider, run_demo

    def emit(line: str) -> None:
        print(line, flush=True)

    outcomes = run_demo(host, milestone_1_provider(), emit)
    return ExitCode.OK if outcomes and all(o.ok for o in outcomes) else ExitCode.FAILED


def _print_outcome(outcome: Any, as_json: bool) -> int:
    if as_json:
        _print_json(outcome.to_json())
    else:
        print(outcome.content)
    return ExitCode.OK if outcome.ok or outcome.status.value == "denied" else ExitCode.FAILED


def _decide(args: argparse.Namespace, action: str) -> int:
    from toolhost._model.invocations import InvocationNotFound
    from toolhost._pipeline.pipeline import InvocationStateError

    host = _load()
    try:
        if action == "approve":
            outcome = host.approve_sync(args.id, args.approver)
        else:
            outcome = host.pipeline.deny(args.id, args.approver, args.reason)
    except InvocationNotFound:
        raise CommandError(f"no invocation {args.id!r} (toolhost pending lists them)",
                           ExitCode.FAILED) from None
    except InvocationStateError as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None
    return _print_outcome(outcome, args.json)


def cmd_approve(args: argparse.Namespace) -> int:
    return _decide(args, "approve")


def cmd_deny(args: argparse.Namespace) -> int:
    return _decide(args, "deny")


def cmd_pending(args: argparse.Namespace) -> int:
    from toolhost._model.invocations import InvocationState

    host = _load()
    rows = [
        {
            "id": r.id,
            "tool": r.tool_name,
            "version": r.tool_version,
            "argument_digest": r.argument_digest,
            "created": r.created_at.isoformat(timespec="microseconds"),
            "run_id": r.run_id,
        }
        for r in host.pipeline.invocations.list(state=InvocationState.AWAITING_APPROVAL)
    ]
    if args.json:
        _print_json(rows)
    else:
        for row in rows:
            print(f"{row['id']}  {row['tool']}@{row['version']}  {row['created']}  "
                  f"{row['argument_digest']}")
    return ExitCode.OK


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from toolhost._mcp import serve
    except ImportError as exc:
        raise CommandError(
            f"serve needs the MCP extra: pip install 'toolhost-core[mcp]' ({exc})", ExitCode.FAILED
        ) from None
    host = _load()
    return serve(host, http=args.http, enable=args.enable)


_COMMANDS = {
    "tools": cmd_tools,
    "check": cmd_check,
    "call": cmd_call,
    "demo": cmd_demo,
    "pending": cmd_pending,
    "approve": cmd_approve,
    "deny": cmd_deny,
    "serve": cmd_serve,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except CommandError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
