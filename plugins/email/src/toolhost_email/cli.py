"""``toolhost-email``: the operator's command for the mail cache.

``import --account ADDRESS [--owner PRINCIPAL] PATH`` imports an mbox file or a Maildir
(again: nothing is added twice), the account ``PRINCIPAL``'s when given; ``owners`` lists
every account's owner, ``owners set ADDRESS PRINCIPAL`` gives one account an owner, ``owners
set --unowned PRINCIPAL`` every account without one (and the feedback recorded before any
had one), ``owners clear ADDRESS`` takes the owner away (nobody reads it then); ``erase
--account A | --thread T | --message M | --owner PRINCIPAL`` removes exactly that source
(its line says so when another connection held back the checkpoint that overwrites the old
pages, still exit 0: the rows are gone, and a later open finishes it, D467);
``feedback undo ID`` undoes one owner feedback record. The cache lives in toolhost-email's
data directory under TOOLHOST_DATA_DIR, the one a host gives the plugin. Bad input is one line
on stderr and exit status 2, never a traceback. Ctrl-C, SIGTERM and SIGHUP stop it as they stop
the host's commands: one line and exit 128 + the signal's number (130, 143, 129), what it was
doing rolled back (an import stores all of a source or nothing of it, D153).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from toolhost import ProgressLine, Settings, not_utf8, stoppable

__all__ = ["PROG", "main"]

PROG = "toolhost-email"
#: The end of erase's line when another connection held its checkpoint back past the wait:
#: the rows are gone, their old pages are not yet (D467's record finishes it later).
_CHECKPOINT_HELD = ("; their old pages may stay in mail.sqlite3 or its write-ahead log "
                    "until a later open of the mail cache finishes the checkpoint another "
                    "connection held back (a running host's reader, an import)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The operator's command for the toolhost-email mail cache.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    imp = commands.add_parser("import", help="import an mbox file or a Maildir")
    imp.add_argument("--account", required=True, metavar="ADDRESS",
                     help="the owner's address this mail was delivered to or sent from")
    imp.add_argument("--owner", metavar="PRINCIPAL",
                     help="the principal the account is, who alone reads it from now on")
    imp.add_argument("path", metavar="PATH")
    owners = commands.add_parser("owners", help="who owns which account")
    changes = owners.add_subparsers(dest="action", metavar="ACTION")
    give = changes.add_parser("set", help="give an account, or every unowned one, an owner")
    what = give.add_mutually_exclusive_group(required=True)
    what.add_argument("account", metavar="ADDRESS", nargs="?")
    what.add_argument("--unowned", action="store_true",
                      help="every account without an owner, and feedback recorded before")
    give.add_argument("principal", metavar="PRINCIPAL")
    clear = changes.add_parser("clear", help="take an account's owner away")
    clear.add_argument("account", metavar="ADDRESS")
    erase = commands.add_parser("erase", help="remove one account, thread or message, or all "
                                "of one owner's")
    which = erase.add_mutually_exclusive_group(required=True)
    which.add_argument("--account", metavar="ADDRESS")
    which.add_argument("--thread", metavar="THREAD_ID")
    which.add_argument("--message", metavar="MESSAGE_KEY")
    which.add_argument("--owner", metavar="PRINCIPAL")
    feedback = commands.add_parser("feedback", help="owner feedback records")
    actions = feedback.add_subparsers(dest="action", required=True, metavar="ACTION")
    undo = actions.add_parser("undo", help="undo one feedback record")
    undo.add_argument("feedback_id", metavar="ID")
    return parser


def _run(args: argparse.Namespace, data_dir: Path) -> int:
    _check_values(args)
    if args.command == "import":
        from toolhost_email.importer import import_path

        # Messages read so far, as one line on stderr when it is a terminal (a script or a
        # log sees nothing of it). import_path checks the account (checked_account) first.
        with ProgressLine(f"{PROG} import", unit="messages read") as line:
            report = import_path(data_dir, args.account, Path(args.path), workers=None,
                                 owner=args.owner, on_read=line.update if line.active else None)
        skipped = ", ".join(f"{n} {reason}" for reason, n in report.skipped.items())
        owned = f" (owner {args.owner.strip()})" if args.owner is not None else ""
        print(f"imported {report.path} as {report.account}{owned}: {report.seen} read, "
              f"{report.added} added, {report.duplicates} already cached, "
              f"{report.skipped_total} skipped{f' ({skipped})' if skipped else ''}")
        return 0
    if args.command == "owners":
        return _owners(args, data_dir)
    if args.command == "erase":
        from toolhost_email.erase import EraseScope, erase_source

        scope: EraseScope
        if args.account is not None:
            scope, value = "account", args.account
        elif args.thread is not None:
            scope, value = "thread", args.thread
        elif args.message is not None:
            scope, value = "message", args.message
        else:
            scope, value = "owner", args.owner
        erased = erase_source(data_dir, scope, value)
        print(f"erased {scope} {value.strip()}: {erased.removed} messages removed"
              f"{'' if erased.settled else _CHECKPOINT_HELD}")
        return 0
    from toolhost_email.feedback import UnknownFeedback, undo_feedback

    try:
        change = undo_feedback(data_dir, args.feedback_id.strip())
    except UnknownFeedback:
        print(f"{PROG}: no feedback record {args.feedback_id.strip()!r}: give an id as "
              "email.feedback returned it", file=sys.stderr)
        return 1
    state = "undone" if change.changed else "was already undone"
    print(f"feedback {change.feedback_id} {state} (version {change.version})")
    return 0


class _Usage(Exception):
    """One line for the operator; exit status 2."""


#: The values given without an option, named as the usage line names them.
_POSITIONAL = {"principal": "PRINCIPAL", "feedback_id": "ID", "path": "PATH"}


def _check_values(args: argparse.Namespace) -> None:
    """Every value as text that names something, checked here once for every command.

    Every value but PATH (any bytes the filesystem holds) as UTF-8 text, as the host's
    commands and toolhost-people take them (D341): bytes that are not arrive as lone
    surrogates, which no row of the cache holds (erase and feedback undo raised
    UnicodeEncodeError at the database). None empty or blank: it names no account, thread,
    message, principal or record, and '' is what general and account-wide feedback is stored
    with (``erase --thread ""`` erased all of it, D566). PATH only not empty (a file may be
    named with spaces; an empty one was read as the working directory)."""
    for dest, value in vars(args).items():
        if not isinstance(value, str):  # --unowned is a flag; an option not given is None
            continue
        name = _POSITIONAL.get(dest, "ADDRESS" if args.command == "owners" else f"--{dest}")
        if dest == "path":
            if not value:
                raise _Usage(f"argument {name}: must not be empty")
            continue
        typed = not_utf8(value)
        if typed is not None:
            raise _Usage(f"argument {name}: {typed} is not UTF-8 text")
        if not value.strip():
            raise _Usage(f"argument {name}: must not be empty or blank")


def _owners(args: argparse.Namespace, data_dir: Path) -> int:
    from toolhost_email import owners
    from toolhost_email.importer import checked_account, normalize_account

    if args.action is None:
        for account, owner in owners.list_owners(data_dir):
            print(f"{account} {owner if owner is not None else '(no owner)'}")
        return 0
    if args.action == "set" and args.unowned:
        principal = args.principal.strip()
        count = owners.set_unowned(data_dir, principal)
        print(f"{count} accounts without an owner are {principal}'s")
        return 0
    if args.action == "set":
        # Only an address a From header carries (D506); ``owners clear`` below takes any
        # account already cached.
        account = checked_account(args.account, "ADDRESS")
        principal = args.principal.strip()
        owners.set_owner(data_dir, account, principal)
        print(f"{account} is {principal}'s")
        return 0
    account = normalize_account(args.account, "ADDRESS")
    if owners.clear_owner(data_dir, account):
        print(f"{account} has no owner: nobody reads it until it is given one")
    else:
        raise _Usage(f"{account} has no owner")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    # No traceback: the operator stopped it, and no change is left half made.
    return stoppable(lambda: _main(argv), lambda signum: (
        f"{PROG}: stopped by {signum.name}: nothing was left half-done (an import stores "
        "all of a source or none of it: run the command again)"), prog=PROG)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    from toolhost_email.config import SETTINGS
    from toolhost_email.importer import ImportFailed
    from toolhost_email.store import MAIL_CACHE_DISTRIBUTION, CacheUnavailable

    try:
        # Its own [plugins.toolhost-email] table too: a key or value the host would not start
        # with is not taken here either.
        settings = Settings.from_environ().with_plugin_settings(MAIL_CACHE_DISTRIBUTION,
                                                                SETTINGS)
        data_dir = settings.plugin_data_dir(MAIL_CACHE_DISTRIBUTION)
    except ValueError as exc:  # SettingError: a toolhost.toml it cannot use, as the host's
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        return _run(args, data_dir)
    except (ImportFailed, CacheUnavailable, _Usage) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
