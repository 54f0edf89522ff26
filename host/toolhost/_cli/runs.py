"""``toolhost runs``: the runs live on this host, and ending one.

A run named with ``toolhost call --run ID`` stays live after the command, so the next command
of the run (and a call of it approved with ``toolhost approve``) finds its workspace; an MCP
session's run is live while the session lasts. ``runs list`` shows them; ``runs end ID`` ends
one: its workspace is removed (an operator's directory is kept) and its attachments listed.
"""

from __future__ import annotations

import argparse

from toolhost._cli.common import (
    CommandError,
    Parser,
    add_command,
    load,
    load_stores,
    print_attachments,
    print_json,
)
from toolhost._cli.exit_codes import ExitCode

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: argparse._SubParsersAction[Parser], run: str | None) -> None:
    add_command(sub, run, "runs", _arguments, help="the runs live on this host (list, end)")


def _arguments(runs: argparse.ArgumentParser) -> None:
    commands = runs.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="every live run: its id and its workspace")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    end = commands.add_parser("end", help="end a live run: remove its workspace")
    end.add_argument("id", help="the run id (toolhost call --run ID)")
    end.add_argument("--json", action="store_true", help="print its attachments as JSON")


def cmd_runs(args: argparse.Namespace) -> int:
    host = load(stores=args.runs_command == "end", tools=False)
    if args.runs_command == "list":
        try:
            live = host.run_workspaces.live()
        except OSError as exc:
            # The data directory's own line, as `pending` says it, where the stores say why
            # it cannot be used (a file, not writable); else the path that failed.
            load_stores()
            raise CommandError(f"cannot read the live runs: {exc.filename}: {exc.strerror}",
                               ExitCode.FAILED) from None
        if args.json:
            print_json([{"run_id": run_id, "directory": str(d) if d else None,
                         "workspace": has or d is not None} for run_id, d, has in live])
            return ExitCode.OK
        for run_id, directory, has in live:
            where = (str(directory) if directory is not None
                     else "a workspace" if has else "no workspace yet")
            print(f"{run_id}  {where}")
        return ExitCode.OK
    from toolhost._composition import valid_run_id

    if not valid_run_id(args.id):
        raise CommandError("a run id is 1 to 128 letters, digits, '.', '_' or '-', starting "
                           "with a letter or digit")
    if not host.run_workspaces.end(args.id):
        raise CommandError(f"no run {args.id!r} is live on this host (toolhost runs list)",
                           ExitCode.FAILED)
    from toolhost._composition import RunOutcome

    outcome = RunOutcome(run_id=args.id, attachments=host.attachments_of(args.id))
    if args.json:
        print_json(outcome.to_json())
    else:
        print(f"ended {args.id}")
        print_attachments(outcome.attachments)
    return ExitCode.OK


COMMANDS = {"runs": cmd_runs}
