"""The one base of every error the host raises on purpose.

Each error the host defines (a setting, a plugin refused, a store unreachable, a row or an
artifact not found, a tool's failure) is a ``ToolhostError``, and keeps its other base too
(``LookupError``, ``ValueError``), so code that caught those still does. A front end catches
``ToolhostError`` once where it gives a person one line rather than a traceback; a
``UsageError`` is one whose cause is how the host was asked or set up (a flag, a setting's
value), which the CLI exits 2 for, against 1 for anything that failed. Exceptions that only
carry control inside one module (a private ``_Terminated``, a lease taken, a write cancelled)
are not errors to report and stay outside, as do the CLI's own ``CommandError`` (already the
one line and its exit code) and the test kit's.
"""

from __future__ import annotations

__all__ = ["ToolhostError", "UsageError"]


class ToolhostError(Exception):
    """An error the host raises on purpose, whose message is one line for a person."""


class UsageError(ToolhostError):
    """The caller's flag or the operator's setting is wrong, rather than something failed."""
