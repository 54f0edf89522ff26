"""``toolhost-conformance DIST [DIST...] [-- PYTEST-ARGS...]``: run the suite from the shell.

Loads the named distributions alone (not the other installed plugins) and runs every check on
them with ``pytest.main``, printing pytest's own output. The exit code is pytest's: 0 when every
check passes (known failures included), non-zero otherwise; 2, with one line and no traceback,
when a name is not an installed toolhost plugin. Arguments after ``--`` go to pytest as they
are, e.g. ``toolhost-conformance toolhost-math -- -k property_run --toolhost-examples 500``.
``--setting NAME=VALUE`` (repeatable) is a setting the plugins see, for a conditional tool:
``toolhost-conformance toolhost-people --setting AGENT_PEOPLE_ENABLED=1``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

__all__ = ["main"]

_SUITE_MODULE = "toolhost_conformance.cli_suite"
_INI = Path(__file__).with_name("_cli_pytest.ini")
_GROUP = "toolhost.plugins"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolhost-conformance",
        description="Run the toolhost conformance suite on installed plugin distributions.",
        epilog="Arguments after -- are passed to pytest, e.g. -- -k registration. "
        "Checks: registration, reasons, messages_static, schemas_closed, "
        "parallel_only_read_only, forced_trust, property_run, no_ambient_reads.",
    )
    parser.add_argument(
        "distributions", nargs="+", metavar="DIST", help="an installed distribution name"
    )
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=VALUE",
        help="a setting toolhost_tools(settings) sees (repeatable), e.g. "
        "AGENT_PEOPLE_ENABLED=1 for a conditional tool",
    )
    return parser


def _not_a_plugin(name: str) -> str | None:
    """Why ``name`` cannot be tested, in one line, or None. Reads metadata; imports nothing."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return f"distribution {name!r} is not installed; install it (pip install {name}) first"
    if not any(ep.group == _GROUP for ep in dist.entry_points):
        return f"distribution {name!r} is installed but declares no {_GROUP} entry point"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite; return pytest's exit code (2 for a name that is not a plugin)."""
    args = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, passthrough = args[:cut], args[cut + 1 :]
    options = _parser().parse_args(args)
    for name in options.distributions:
        problem = _not_a_plugin(name)
        if problem is not None:
            print(f"toolhost-conformance: {problem}", file=sys.stderr)
            return 2

    import pytest  # imported here: `toolhost-conformance --help` stays fast

    pytest_args = [
        # The suite's own configuration and rootdir, not the calling project's; no cache
        # directory is written beside the installed package.
        "-c", str(_INI),
        "--rootdir", str(_INI.parent),
        "-p", "no:cacheprovider",
        # Loads the suite's pytest11 plugin even where plugin autoload is disabled (a no-op
        # when it is already loaded).
        "-p", "toolhost_conformance",
        *(arg for name in options.distributions for arg in ("--toolhost-dist", name)),
        *(arg for setting in options.setting for arg in ("--toolhost-setting", setting)),
        *passthrough,
        "--pyargs", _SUITE_MODULE,
    ]
    return int(pytest.main(pytest_args))


if __name__ == "__main__":
    sys.exit(main())
