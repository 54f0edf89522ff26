"""The approval commands: ``pending``, ``approve``, ``deny``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from toolhost._cli.common import CommandError, load, print_json, print_outcome
from toolhost._cli.exit_codes import ExitCode

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _decide(args: argparse.Namespace, action: str) -> int:
    from toolhost._model.invocations import InvocationNotFound
    from toolhost._pipeline.pipeline import InvocationStateError

    host = load()
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
    return print_outcome(outcome, args.json)


def cmd_approve(args: argparse.Namespace) -> int:
    return _decide(args, "approve")


def cmd_deny(args: argparse.Namespace) -> int:
    return _decide(args, "deny")


def cmd_pending(args: argparse.Namespace) -> int:
    from toolhost._model.invocations import InvocationState

    host = load()
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
        print_json(rows)
    else:
        for row in rows:
            print(f"{row['id']}  {row['tool']}@{row['version']}  {row['created']}  "
                  f"{row['argument_digest']}")
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "pending": cmd_pending,
    "approve": cmd_approve,
    "deny": cmd_deny,
}
