"""``ProgressLine``: one line of progress on a terminal, rewritten in place, cleared at the end.

The one renderer of every command that shows progress: ``toolhost call`` (what the tool
reports), ``toolhost artifacts get`` and ``upload`` (bytes), and a plugin's console script
(``toolhost-email import``: messages read), which imports it from ``toolhost``.

It writes only when its stream is a terminal. In a pipe, a file or a test's capture it writes
nothing, so what scripts read on stderr is exactly what it was before progress existed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TextIO

__all__ = ["ProgressLine", "progress_shown"]

#: Control characters (C0, DEL, C1) shown as spaces: a message may carry a name someone else
#: chose, and must not move the cursor, colour the terminal or end the line.
_CONTROLS = {c: " " for c in (*range(32), *range(127, 160))}
#: Back to the start of the line, then erase to its end (ECMA-48 EL).
_REWRITE = "\r\x1b[K"
_UNITS = ("KiB", "MiB", "GiB", "TiB")


def _size(n: float) -> str:
    if n < 1024:
        return f"{int(n)} B"
    for unit in _UNITS:
        n /= 1024
        if n < 1024 or unit == _UNITS[-1]:
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def _count(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else f"{n:.1f}"


class ProgressLine:
    """One updating line on a terminal::

        with ProgressLine("reading mail", unit="messages") as line:
            for n, message in enumerate(messages, 1):
                line.update(n)

    ``update(done, total=None, message=None)`` shows ``label: done of total unit (pct%) -
    message``; with ``unit="bytes"`` the numbers are sizes (``3.4 MiB of 12.0 MiB``). The
    line is rewritten only when its text changes, cut to the terminal's width (a wrapped line
    cannot be rewritten in place), and cleared when the block ends (or on ``clear``).

    ``stream`` is ``sys.stderr`` unless given; nothing is written unless it is a terminal
    (``isatty``). Safe to update from several threads. A stream that fails to take a write
    (closed, a broken pipe) ends the line quietly: progress never fails the work it shows.
    """

    def __init__(self, label: str = "", *, unit: str = "", stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._label = label.translate(_CONTROLS)
        self._unit = unit.translate(_CONTROLS)
        self._lock = threading.Lock()
        self._shown: str | None = None
        try:
            self._active = self._stream is not None and self._stream.isatty()
        except (AttributeError, OSError, ValueError):  # no stream (fd 2 closed), a closed one
            self._active = False

    @property
    def active(self) -> bool:
        """Whether this line writes at all (its stream is a terminal)."""
        return self._active

    def text(self, done: float, total: float | None = None, message: str | None = None) -> str:
        """The line ``update`` shows for these values (uncut)."""
        bytes_ = self._unit == "bytes"
        shown = _size(done) if bytes_ else _count(done)
        if total is not None:
            shown += f" of {_size(total) if bytes_ else _count(total)}"
        if self._unit and not bytes_:
            shown += f" {self._unit}"
        if total:
            shown += f" ({min(100, int(100 * done / total))}%)"
        if message:
            shown += f" - {message.translate(_CONTROLS)}"
        return f"{self._label}: {shown}" if self._label else shown

    def update(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Show how far the work has got (see the class)."""
        if not self._active:
            return
        line = self.text(done, total, message)[:self._width()]
        with self._lock:
            if line != self._shown:
                self._write(_REWRITE + line)
                self._shown = line

    def clear(self) -> None:
        """Erase the line (the cursor back at its start); later updates draw it again."""
        with self._lock:
            if self._active and self._shown is not None:
                self._write(_REWRITE)
            self._shown = None

    def _width(self) -> int:
        # One column short of the edge: a line that fills the last column wraps on some
        # terminals, and a wrapped line cannot be rewritten in place.
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 80
        return max(columns - 1, 10)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            self._active = False

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        # Closed for good: a body the caller stopped waiting for (past its deadline) may
        # still report from its thread, and must not draw over what the command prints next.
        with self._lock:
            if self._active and self._shown is not None:
                self._write(_REWRITE)
            self._shown = None
            self._active = False


@contextlib.contextmanager
def progress_shown(label: str, stream: TextIO | None = None) -> Iterator[None]:
    """The tool calls made inside this block show their progress on one ``ProgressLine``
    (``toolhost call``), if ``stream`` (stderr) is a terminal; otherwise nobody listens and
    the calls pay nothing for it."""
    line = ProgressLine(label, stream=stream)
    if not line.active:
        yield
        return
    from toolhost._composition import reporting

    with line, reporting(lambda update: line.update(update.done, update.total, update.message)):
        yield
