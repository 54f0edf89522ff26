"""``toolhost-email``: the operator's command for the mail cache.

``import --account ADDRESS PATH`` imports an mbox file or a Maildir (again: nothing is added
twice); ``erase --account A | --thread T | --message M`` removes exactly that source;
``feedback undo ID`` undoes one owner feedback record. The cache lives in toolhost-email's
data directory under TOOLHOST_DATA_DIR, the one a host gives the plugin. Bad input is one line
on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from toolhost import Settings

__all__ = ["PROG", "main"]

PROG = "toolhost-email"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The operator's command for the toolhost-email mail cache.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    imp = commands.add_parser("import", help="import an mbox file or a Maildir")
    imp.add_argument("--account", required=True, metavar="ADDRESS",
                     help="the owner's address this mail was delivered to or sent from")
    imp.add_argument("path", metavar="PATH", type=Path)
    erase = commands.add_parser("erase", help="remove one account, thread or message")
    which = erase.add_mutually_exclusive_group(required=True)
    which.add_argument("--account", metavar="ADDRESS")
    which.add_argument("--thread", metavar="THREAD_ID")
    which.add_argument("--message", metavar="MESSAGE_KEY")
    feedback = commands.add_parser("feedback", help="owner feedback records")
    actions = feedback.add_subparsers(dest="action", required=True, metavar="ACTION")
    undo = actions.add_parser("undo", help="undo one feedback record")
    undo.add_argument("feedback_id", metavar="ID")
    return parser


def _run(args: argparse.Namespace, data_dir: Path) -> int:
    if args.command == "import":
        from toolhost_email.importer import import_path

        report = import_path(data_dir, args.account, args.path, workers=None)
        skipped = ", ".join(f"{n} {reason}" for reason, n in report.skipped.items())
        print(f"imported {report.path} as {report.account}: {report.seen} read, "
              f"{report.added} added, {report.duplicates} already cached, "
              f"{report.skipped_total} skipped{f' ({skipped})' if skipped else ''}")
        return 0
    if args.command == "erase":
        from toolhost_email.erase import EraseScope, erase

        scope: EraseScope
        if args.account is not None:
            scope, value = "account", args.account
        elif args.thread is not None:
            scope, value = "thread", args.thread
        else:
            scope, value = "message", args.message
        removed = erase(data_dir, scope, value)
        print(f"erased {scope} {value.strip()}: {removed} messages removed")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from toolhost_email.importer import ImportFailed
    from toolhost_email.store import MAIL_CACHE_DISTRIBUTION, CacheUnavailable

    data_dir = Settings.from_environ().plugin_data_dir(MAIL_CACHE_DISTRIBUTION)
    try:
        return _run(args, data_dir)
    except (ImportFailed, CacheUnavailable) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
