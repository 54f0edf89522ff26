"""The exit codes of ``toolhost`` and ``toolhost serve``, defined once."""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1  # the tool call failed, registration refused, or a transport did not start
    USAGE = 2  # the command line (or a setting it reads) is wrong
    PAUSED = 3  # the call is awaiting an operator's approval
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
    BROKEN_PIPE = 141  # stdout's reader went away (`| head`): 128 + SIGPIPE, as for cat
