"""``toolhost-people``: the operator's command for what people cannot derive from mail.

``link ADDRESS ADDRESS`` makes two addresses (and everything already linked to either) one
person; ``unlink ADDRESS`` undoes it for one address; ``links`` lists the groups; ``me
ADDRESS`` names an address of the owner's that is no imported account (an alias), so it is
nobody's person (``me`` alone lists the owner's addresses people know); ``refresh``
brings the derived index up to date with the mail cache now (the tools do it on their next
call anyway: after ``toolhost-email erase``, this removes the erased mail from people's own
files at once). Once toolhost-email's accounts have owners, ``me --principal P`` names one
principal's alias, and ``refresh`` brings every principal's index up to date (deleting those of
principals that own no account any more, with what people kept of their addresses), each
file on its own: one it cannot refresh is a line on stderr, the others are still refreshed,
and the exit status is 1. ``refresh`` ranks dates as the tools do (D160): a Date more than a
day past the wall clock ranks below every real one, so the next call finds the index current.
State lives in toolhost-people's data directory under
TOOLHOST_DATA_DIR, the one a host gives the plugin. Bad input (a value that is not UTF-8
text, a toolhost.toml the host could not use either) is one line on stderr and exit status 2,
never a traceback. Ctrl-C, SIGTERM and SIGHUP stop it as they stop the host's commands: one
line and exit 128 + the signal's number (130, 143, 129), the change under way rolled back
(each is one transaction; ``refresh``, one for each index file).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

from toolhost import Settings, make_private_dirs, not_utf8, stoppable

__all__ = ["DISTRIBUTION", "main"]

DISTRIBUTION = "toolhost-people"
PROG = "toolhost-people"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


class _Usage(Exception):
    """One line for the operator; exit status 2."""


def _address(text: str) -> str:
    from toolhost_people.links import normalize_address

    address = normalize_address(text)
    if address is None:
        raise _Usage(f"{text!r} is not an email address (local-part@domain, no spaces, at "
                     f"most 320 characters)")
    return address


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    link = commands.add_parser("link", help="make two addresses one person")
    link.add_argument("addresses", nargs=2, metavar="ADDRESS")
    unlink = commands.add_parser("unlink", help="make an address a person of its own again")
    unlink.add_argument("address", metavar="ADDRESS")
    commands.add_parser("links", help="list the linked addresses, one group a line")
    me = commands.add_parser("me", help="an address of the owner's (never a person)")
    me.add_argument("address", metavar="ADDRESS", nargs="?")
    me.add_argument("--principal", metavar="PRINCIPAL",
                    help="whose (in a mail cache whose accounts have owners)")
    commands.add_parser("refresh", help="bring the people index up to date with the mail cache")
    return parser


def _text(value: str, name: str) -> str:
    """``value`` when it is UTF-8 text (as the host's commands take every value, D341): bytes
    that are not arrive as lone surrogates, which no stored row can hold."""
    typed = not_utf8(value)
    if typed is not None:
        raise _Usage(f"argument {name}: {typed} is not UTF-8 text")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    # No traceback: the operator stopped it, and no change is left half made.
    return stoppable(lambda: _main(argv), lambda signum: (
        f"{PROG}: stopped by {signum.name}: nothing was left half-done (each change is one "
        "transaction: run the command again)"), prog=PROG)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    from toolhost_people.plugin import toolhost_settings

    try:
        # Its own [plugins.toolhost-people] table too: a key or value the host would not start
        # with is not taken here either.
        settings = Settings.from_environ().with_plugin_settings(DISTRIBUTION,
                                                                toolhost_settings())
        own_dir = settings.plugin_data_dir(DISTRIBUTION)
    except ValueError as exc:  # SettingError: a toolhost.toml it cannot use, as the host's
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        return _run(args, settings, own_dir)
    except _Usage as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:
        print(f"{PROG}: cannot use the data directory {own_dir}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, settings: Settings, own_dir: Path) -> int:
    from toolhost_people import links

    # Made (or found) first, as the host's commands do: a listing of a data directory that
    # cannot be used was empty and exit 0, indistinguishable from "nothing recorded yet".
    # Private (0700) as the host makes them: this may be a fresh data directory's first command.
    make_private_dirs(own_dir)
    if args.command == "link":
        first, second = (_address(a) for a in args.addresses)
        if first == second:
            raise _Usage("give two different addresses")
        group = links.link(own_dir, first, second)
        print(f"linked: {' '.join(group)}")
    elif args.command == "unlink":
        address = _address(args.address)
        if not links.unlink(own_dir, address):
            raise _Usage(f"{address} is not linked to another address")
        print(f"unlinked: {address}")
    elif args.command == "links":
        groups: dict[str, list[str]] = {}
        for address, person in sorted(links.read_links(own_dir).items()):
            groups.setdefault(person, []).append(address)
        for person in sorted(groups):
            print(" ".join(groups[person]))
    elif args.command == "me":
        principal = None
        if args.principal is not None:
            principal = _text(args.principal, "--principal").strip()
            if not principal:
                raise _Usage("a principal is a non-empty id, as its token or its issuer names it")
        if args.address is None:
            for address in sorted(links.read_state(own_dir, principal)[1]):
                print(address)
        else:
            address = _address(args.address)
            added = links.add_owner(own_dir, address, principal)
            print(f"{'added' if added else 'already the owner'}: {address}")
    else:
        return _refresh(settings, own_dir)
    return 0


def _refresh(settings: Settings, own_dir: Path) -> int:
    from toolhost_email import MAIL_CACHE_DISTRIBUTION, CacheUnavailable, open_mail_cache

    from toolhost_people.index import PRINCIPALS_DIR, remove_index

    make_private_dirs(own_dir)
    cache_dir = settings.plugin_data_dir(MAIL_CACHE_DISTRIBUTION)
    try:
        with open_mail_cache(cache_dir) as probe:
            shared = probe.shared()
    except CacheUnavailable as exc:
        print(f"{PROG}: cannot read the mail cache in {cache_dir}: {exc}", file=sys.stderr)
        return 1
    now = _wall_clock(own_dir)  # one instant for every index this command brings up to date
    if not shared:
        print(_refresh_one(own_dir, cache_dir, None, now))
        return 0
    remove_index(own_dir)  # the one-person index: nobody reads it once accounts have owners
    failed = False
    for file in sorted((own_dir / PRINCIPALS_DIR).glob("*.sqlite3")):
        # Each file on its own (D245): one that cannot be refreshed stops none of the others.
        try:
            done = _refresh_principal(own_dir, cache_dir, file, now)
        except (OSError, sqlite3.Error, CacheUnavailable) as exc:
            if not os.path.lexists(file):
                continue  # deleted since the listing (a host's call of a principal owning none)
            print(f"{PROG}: cannot refresh {file}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            failed = True
            continue
        print(done)
    return 1 if failed else 0


def _wall_clock(own_dir: Path) -> _dt.datetime:
    """Now, as the file system stamps a file made in ``own_dir`` (D445's clock): this command
    runs outside a host, so no Clock is handed to it, and a plugin reads no ambient time
    (D13). The file has no name (or loses it at once): nothing is left behind."""
    with tempfile.TemporaryFile(dir=own_dir) as probe:
        made = os.fstat(probe.fileno()).st_mtime_ns
    return _EPOCH + _dt.timedelta(microseconds=made // 1000)


def _refresh_principal(own_dir: Path, cache_dir: Path, file: Path, now: _dt.datetime) -> str:
    """Bring one principal's index up to date, or delete it (and what people kept for the
    principal) when it owns nothing any more; a file that is no index of a principal is
    deleted too (derived data, as the tools would), but for a database with no tables of
    people's yet: a host is making that index this moment (its tables come a transaction
    after the file), and deleting the file under it failed that call."""
    from toolhost_email import open_mail_cache

    from toolhost_people.index import indexed_principal, is_damage, remove_index_file
    from toolhost_people.links import forget_principal

    try:
        with closing(sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            principal = indexed_principal(conn)
    except sqlite3.DatabaseError as exc:
        if "no such table" in str(exc):
            return f"{file.name}: no index in it yet, left alone"
        if not is_damage(exc):
            raise
        principal = None
    if principal is None:
        remove_index_file(file)
        return f"{file.name}: not an index of a principal, deleted"
    with open_mail_cache(cache_dir, principal) as reader:
        owns = reader.accounts()
    if not owns:
        remove_index_file(file)
        forget_principal(own_dir, principal)
        return f"{principal}: owns no account, index and addresses deleted"
    return f"{principal}: {_refresh_one(own_dir, cache_dir, principal, now)}"


def _refresh_one(own_dir: Path, cache_dir: Path, principal: str | None,
                 now: _dt.datetime) -> str:
    """Bring one index up to date: the one-person cache's, or ``principal``'s, its dates
    ranked at ``now`` as a tool's call ranks them at its clock's."""
    from toolhost_email import open_mail_cache

    from toolhost_people.index import open_index, refresh
    from toolhost_people.links import read_state, record_accounts

    with open_mail_cache(cache_dir, principal) as reader, \
            closing(open_index(own_dir, principal)) as index:
        links, owners = read_state(own_dir, principal)
        rebuilt = refresh(index, reader, links, owners | (reader.accounts() or frozenset()),
                          record=lambda found: record_accounts(own_dir, found, principal),
                          now=now)
        (count,) = index.execute("SELECT count(*) FROM person").fetchone()
    return f"{'rebuilt' if rebuilt else 'already current'}: {count} people"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
