"""``toolhost runs``: the runs live on this host, and ending one.

A run named with ``toolhost call --run ID`` stays live after the command, so the next command
of the run (and a call of it approved with ``toolhost approve``) finds its workspace; an MCP
session's run is live while the session lasts. ``runs list`` shows them; ``runs end ID`` ends
one: its workspace is removed (an operator's directory is kept) and its attachments listed.
A command's own run (``toolhost call`` without ``--run``, ``demo``, ``artifacts upload``, and
the run an approval registers in the directory its call paused in) whose command was killed
is listed as not live until the next ``toolhost recover`` ends it, or a command naming it
registers it afresh.
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

#: Before the workspace of a run whose command was killed: it is not live.
_GONE = "not live, its command is gone (toolhost recover ends it): "


def add_parsers(sub: argparse._SubParsersAction[Parser], run: str | None) -> None:
    add_command(sub, run, "runs", _arguments, help="the runs live on this host (list, end)")


def _arguments(runs: argparse.ArgumentParser) -> None:
    commands = runs.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="every live run: its id and its workspace "
                                  "(a killed command's own run marked not live)")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    end = commands.add_parser("end", help="end a live run: remove its workspace")
    end.add_argument("id", help="the run id (toolhost call --run ID)")
    end.add_argument("--json", action="store_true", help="print its attachments as JSON")


def cmd_runs(args: argparse.Namespace) -> int:
    host = load(stores=args.runs_command == "end", tools=False)
    if args.runs_command == "list":
        try:
            listed = host.run_workspaces.listed()
        except OSError as exc:
            # The data directory's own line, as `pending` says it, where the stores say why
            # it cannot be used (a file, not writable); else the path that failed.
            load_stores()
            raise CommandError(f"cannot read the live runs: {exc.filename}: {exc.strerror}",
                               ExitCode.FAILED) from None
        # A one-shot run whose command is gone is shown as such, not as live, and left for
        # recovery to end: a listing never removes a workspace the operator may look into.
        if args.json:
            print_json([{"run_id": run.run_id,
                         "directory": str(run.directory) if run.directory else None,
                         "workspace": run.has_workspace or run.directory is not None,
                         **({"command_gone": True} if run.command_gone else {})}
                        for run in listed])
            return ExitCode.OK
        for run in listed:
            where = (str(run.directory) if run.directory is not None
                     else "a workspace" if run.has_workspace else "no workspace yet")
            print(f"{run.run_id}  {_GONE if run.command_gone else ''}{where}")
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
