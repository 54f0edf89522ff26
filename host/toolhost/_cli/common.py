"""What every ``toolhost`` command shares: the one-line error, loading the host, JSON output."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from toolhost._cli.exit_codes import ExitCode

if TYPE_CHECKING:
    import signal

    import pluggy

    from toolhost._composition import (
        CancellationEvent,
        Host,
        PluginSource,
        Settings,
        Stores,
        ToolhostError,
    )

__all__ = ["CommandError", "OutputFailed", "Parser", "Stopped", "add_command", "close_loaded",
           "closed_output", "flushed", "flushed_exit", "guard_output", "json_text", "load",
           "load_stores", "output_failed", "positive_int", "print_attachments",
           "print_content", "print_json", "print_outcome", "refused", "run_cancellable",
           "signals_raised", "stoppable", "stopped_code", "unguard_output", "utf8_stream"]

_T = TypeVar("_T")

#: The largest ``--limit``: what a SQLite or Postgres LIMIT takes is a signed 64-bit integer,
#: and no page of a million rows is one an operator reads.
LIMIT_MAX = 1_000_000

#: The hosts and stores this command loaded. ``close_loaded`` closes them when the command
#: ends: their connections and pools close then, not in the interpreter's teardown (where a
#: pool's threads can no longer be joined, and Python 3.13 reports every unclosed database).
_loaded: list[Host | Stores] = []


class CommandError(Exception):
    """One line for the operator; the command exits with ``code``."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def load(
    *, stores: bool = False, settings: Settings | None = None,
    sources: Sequence[PluginSource] | None = None,
    plugin_manager: pluggy.PluginManager | None = None, keep_validators: bool = False,
    tools: bool = True, record: Stores | None = None,
) -> Host:
    """The host over the installed plugins, or a CommandError with the refusal's one line.

    :param stores: open the data directory's stores now (a command that records calls), so a
        data directory or database that cannot be used stops the command before it starts.
    :param settings: the settings to load with (default: the environment).
    :param sources: plugins already discovered (default: discover them).
    :param plugin_manager: ``make_plugin_manager(sources)``, already made.
    :param keep_validators: write the validators' generated code to the data directory
        (``toolhost check``, which writes the scan's cache there too).
    :param tools: the command runs or lists tools; False (``pending``, ``show``, ...) starts
        no upstream MCP server of the gateway.
    :param record: the record's stores, opened already (``approve`` looked its row up there
        before loading a plugin): the host's pipeline is composed over them.
    """
    from toolhost._composition import ToolhostError, load_host

    try:
        host = load_host(settings, sources=sources, plugin_manager=plugin_manager,
                         keep_validators=keep_validators, gateway=tools)
    except ToolhostError as exc:  # a setting, the policy, a plugin, registration
        raise refused(exc) from None
    _loaded.append(host)
    if record is not None:
        host.adopt(record)
    if stores:
        try:
            host.open()  # the stores are opened and migrated now
        except ToolhostError as exc:
            raise refused(exc) from None
    return host


def load_stores() -> Stores:
    """The record's stores, opened, without loading a plugin (``pending``, ``show``, ``deny``,
    ``artifacts``, ``approve``'s lookup), or a CommandError with the one line ``load`` gives
    for the same setting or data directory."""
    from toolhost._composition import ToolhostError
    from toolhost._composition import load_stores as compose

    try:
        stores = compose()
    except ToolhostError as exc:
        raise refused(exc) from None
    _loaded.append(stores)
    try:
        stores.open()
    except ToolhostError as exc:
        raise refused(exc) from None
    return stores


def refused(exc: ToolhostError) -> CommandError:
    """The host's error as the command's one line: a usage error (exit 2) when a flag or a
    setting's value is wrong (``UsageError``), whichever setting and command; a failure (exit 1)
    otherwise: a plugin or registration refused, a data directory that cannot be used."""
    from toolhost._composition import UsageError

    return CommandError(str(exc), ExitCode.USAGE if isinstance(exc, UsageError)
                        else ExitCode.FAILED)


def close_loaded() -> None:
    """Close every host ``load`` and stores ``load_stores`` gave this command (their stores'
    connections, their pools)."""
    while _loaded:
        _loaded.pop().close()


def json_text(value: Any, *, indent: int | None = None, ascii_only: bool = False) -> str:
    """``value`` as JSON, keys sorted, with every character that does not print (a C1 control,
    a direction override, a lone surrogate) as its JSON escape: still JSON, read back to the
    same value, and nothing a plugin or a model wrote can move a terminal's cursor or reorder
    its line. One line unless ``indent`` (then line breaks between members are kept).
    ``ascii_only``: every character past ASCII escaped too, for a stream that is not UTF-8."""
    from toolhost._composition import escaped

    separators = (",", ": ") if indent is not None else (",", ":")
    text = json.dumps(value, ensure_ascii=ascii_only, sort_keys=True, indent=indent,
                      separators=separators, default=str)
    return text if ascii_only else escaped(text, one_line=indent is None)


def utf8_stream(stream: Any) -> bool:
    """Whether ``stream`` writes UTF-8: on any other (PYTHONIOENCODING=ascii, a latin-1
    terminal) JSON is written ASCII-only, or its characters would come out as Python's
    backslash escapes or one byte of latin-1, which no JSON reader takes (D532)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    return encoding in ("utf8", "utf8sig")


def print_json(data: Any) -> None:
    """Every ``--json`` output: ``data`` as ``json_text``, indented, on standard output."""
    sys.stdout.write(json_text(data, indent=2, ascii_only=not utf8_stream(sys.stdout)) + "\n")


def print_attachments(refs: Sequence[Any]) -> None:
    """A run's attachments for a person, on stderr (stdout stays what the model read). A name
    is the model's: what does not print (a C1 control, a direction override) is shown as its
    JSON escape, never sent to the terminal."""
    from toolhost._composition import escaped

    for ref in refs:
        print(f"toolhost: attached {ref.id} {escaped(json.dumps(ref.name, ensure_ascii=False))} "
              f"({ref.byte_count} bytes, {ref.media_type})", file=sys.stderr)


def print_outcome(outcome: Any, as_json: bool) -> int:
    if as_json:
        print_json(outcome.to_json())
    else:
        print_content(outcome.content)
    return ExitCode.OK if outcome.ok or outcome.status.value == "denied" else ExitCode.FAILED


def print_content(content: str) -> None:
    """A call's content on standard output; on a terminal, with every character that does not
    print but a line break or a tab escaped (``\u009b``, ``\u202e``), as ``show`` shows it: a
    command's output could otherwise move the cursor or reorder the line (C1 controls and
    direction marks passed). A pipe or a file gets the content as it is."""
    from toolhost._composition import escaped, prints

    if sys.stdout.isatty() and not prints(content):

        content = "\n".join("\t".join(escaped(part) for part in line.split("\t"))
                            for line in content.split("\n"))
    print(content)


class Parser(argparse.ArgumentParser):
    """The parser of the command line and of its commands (``add_subparsers``'s
    ``parser_class``). One made ``listed`` is a command another run parses: it is listed (its
    name, its help) and never built, as an ArgumentParser's construction costs ~0.13 ms."""

    def __init__(self, *args: Any, listed: bool = False, **kwargs: Any) -> None:
        if listed:
            self.prog = kwargs.get("prog") or ""
            return
        super().__init__(*args, **kwargs)

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # Bytes that are not UTF-8 arrive as lone surrogates (PEP 383): no row, id or name
        # holds them, and the stores raised as they encoded one. A path is any bytes.
        # A command's words are its own parser's to check (``action`` is the subcommands').
        if action.dest not in _PATHS and not isinstance(action, argparse._SubParsersAction):
            from toolhost import not_utf8

            typed = not_utf8(arg_string)
            if typed is not None:
                raise argparse.ArgumentError(action, f"{typed} is not UTF-8 text")
        return super()._get_value(action, arg_string)


#: The arguments that name a file or directory, which may be any bytes (the filesystem's):
#: ``call --workspace``, ``artifacts get -o``, ``artifacts upload FILE``.
_PATHS = frozenset({"workspace", "output", "file"})


def add_command(sub: argparse._SubParsersAction[Parser], run: str | None, name: str,
                arguments: Callable[[argparse.ArgumentParser], object], **kwargs: Any) -> None:
    """Command ``name``, with its arguments only when it is the command this run parses
    (``run``): a run parses one command, and building every command's parser was ~7 ms of
    each start. Another command is listed, with its help, and never parsed."""
    if name != run:
        sub.add_parser(name, help=kwargs.get("help"), listed=True)
        return
    arguments(sub.add_parser(name, **kwargs))


def positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 to ``LIMIT_MAX`` (``--limit``), else a usage
    error."""
    try:
        value = int(text)
    except ValueError:  # not a number, or more digits than int() converts (4300)
        value = LIMIT_MAX + 1 if text.strip().isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    if value > LIMIT_MAX:
        from toolhost._composition import quoted_value

        raise argparse.ArgumentTypeError(
            f"expected a whole number of at most {LIMIT_MAX}, not {quoted_value(text)}")
    return value


#: Seconds after a signal in which the same signal again is the same request, not a second.
SAME_REQUEST_S = 0.5


def run_cancellable(work: Callable[[], Coroutine[Any, Any, _T]],
                    cancellation: CancellationEvent) -> tuple[_T, int | None]:
    """``run_sync(work())`` (the host's ``asyncio.run``), with Ctrl-C (SIGINT), SIGTERM and SIGHUP setting
    ``cancellation`` instead of stopping the process: the call in flight then ends as
    ``serve`` ends a cancelled one, its row ``failed`` (``tool.cancelled.run_cancelled``),
    rather than ``running`` for ``recover`` to settle (or run again). Returns the work's
    result and the signal that cancelled it (None: none did). The same signal again within
    ``SAME_REQUEST_S`` is the same request (``timeout(1)`` signals its child, then the
    child's group, microseconds apart); a later one, or another signal, restores every
    handler as it was and goes to it, so an operator's second one stops at once. A signal
    the process was started ignoring (``nohup``, a background job) stays ignored."""
    from toolhost._composition import run_sync

    return run_sync(_cancellable(work, cancellation))


async def _cancellable(work: Callable[[], Coroutine[Any, Any, _T]],
                       cancellation: CancellationEvent) -> tuple[_T, int | None]:
    import asyncio
    import signal
    import threading

    loop = asyncio.get_running_loop()
    received: list[int] = []
    handled: dict[int, Any] = {}  # signal -> its handler before this

    def restore() -> None:
        for signum, before in handled.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, before)
        handled.clear()

    def on_signal(signum: int) -> None:
        if received:
            return  # queued before ``repeated`` took over, so it came at once: the same request
        received.append(signum)
        # The next ones go to Python's own handler, not the loop's: it runs at once in the main
        # thread, even while the loop is busy ending the call, so the time is the signal's own.
        _after_the_first(signum, handled, restore)
        cancellation.cancel()

    if threading.current_thread() is threading.main_thread():  # else no signal reaches it
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            before = signal.getsignal(signum)
            if before is signal.SIG_IGN:
                continue
            handled[signum] = before if before is not None else signal.SIG_DFL
            loop.add_signal_handler(signum, on_signal, signum)
    try:
        result = await work()
    finally:
        restore()
    return result, (received[0] if received else None)


class OutputFailed(OSError):
    """Writing standard output failed: its reader went away, its disk is full. Not a bug of
    the command, nor the data directory's problem: ``main`` answers it (D338)."""


class _OutputLost(BaseException):
    """Writing standard output failed under a console script ``stoppable`` runs. A
    BaseException, as ``Stopped`` is: the script's own ``except OSError`` (its data
    directory's) must not take it for its own failure; ``stoppable`` answers it (D338)."""

    def __init__(self, failed: OSError) -> None:
        super().__init__(failed.errno, failed.strerror)
        self.failed = failed


class _Output(io.TextIOWrapper):
    """Standard output, saying when it is the stream that failed (``OutputFailed``, or
    ``_OutputLost`` for a console script's), and remembering it (argparse's --help swallows
    the error of its write)."""

    failed: OSError | None = None
    #: Raise ``_OutputLost`` past the command's own handlers (``stoppable``'s scripts).
    past_handlers: bool = False

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except OSError as exc:
            raise self._failed(exc) from exc

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> BaseException:
        if self.failed is None:
            self.failed = exc
        if self.past_handlers:
            return _OutputLost(exc)
        return OutputFailed(exc.errno, exc.strerror)


def guard_output(*, past_handlers: bool = False) -> io.TextIOWrapper | None:
    """The process's stdout as ``_Output``, over the same buffer, with characters its
    encoding cannot carry written as escapes (PYTHONIOENCODING=ascii, a latin-1 terminal)
    rather than raising after the call was recorded; the stream it stands in for (None: none
    replaced). A test's captured stream is left be. ``past_handlers``: its failure is raised
    as ``_OutputLost`` (``stoppable``)."""
    stdout = sys.stdout
    if stdout is not sys.__stdout__ or not isinstance(stdout, io.TextIOWrapper) or isinstance(
            stdout, _Output):
        return None
    stdout.flush()
    guarded = _Output(
        stdout.buffer, encoding=stdout.encoding,
        errors="backslashreplace" if stdout.errors == "strict" else stdout.errors,
        line_buffering=stdout.line_buffering, write_through=stdout.write_through)
    guarded.past_handlers = past_handlers
    sys.stdout = guarded
    return stdout


def unguard_output(original: io.TextIOWrapper | None) -> None:
    """The stream ``guard_output`` replaced, back in place, the wrapper let go of without
    closing the buffer they share: a program calling ``main(argv)`` keeps its stdout (the
    wrapper's collection closed fd 1 under it)."""
    wrapper = sys.stdout
    if original is None or not isinstance(wrapper, _Output):
        return
    with contextlib.suppress(OSError, ValueError, _OutputLost):
        wrapper.flush()
    sys.stdout = original
    with contextlib.suppress(ValueError):
        wrapper.detach()


def closed_output(prog: str) -> int:
    """A command started with no standard output (``>&-``: Python leaves no stream): refused
    at once, not half-way with a traceback, nor silently with 0 as ``toolhost tools`` was."""
    if sys.stderr is not None:
        print(f"{prog}: cannot write standard output: it is closed", file=sys.stderr)
    return ExitCode.FAILED


def flushed(code: int, prog: str) -> int:
    """``code``, once stdout is flushed; or the output's failure's (``output_failed``)."""
    stdout = sys.stdout
    failed = stdout.failed if isinstance(stdout, _Output) else None
    if failed is None:
        try:
            stdout.flush()
        except OSError as exc:
            failed = exc
        except _OutputLost as exc:
            failed = exc.failed
    return code if failed is None else output_failed(failed, prog)


def flushed_exit(exc: SystemExit, prog: str) -> NoReturn:
    """argparse's own exit (``--help``, ``--version``, a usage error) raised again, once what
    it wrote is flushed: a failure to flush it is the exit's code, not 0."""
    code = exc.code if isinstance(exc.code, int) else ExitCode.USAGE
    failed = flushed(code, prog)
    if failed != exc.code:
        raise SystemExit(failed) from None
    raise exc


def output_failed(exc: OSError, prog: str) -> int:
    """A command whose output could not be written: quiet, 141, for a reader that went away
    (``toolhost tools | head -1`` is not an error); else one line and 1. What the command did
    is done: only its answer is lost, and the line says only that. Whatever is still buffered
    goes to /dev/null, so the interpreter's own flush at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    if isinstance(sys.stdout, _Output):
        sys.stdout.failed = None  # said once, here
    if exc.errno == errno.EPIPE:
        return ExitCode.BROKEN_PIPE
    print(f"{prog}: cannot write standard output: {exc.strerror}", file=sys.stderr)
    return ExitCode.FAILED


class Stopped(BaseException):
    """SIGTERM or SIGHUP, raised where the command was (``signals_raised``), so what it was
    doing is undone as Ctrl-C's KeyboardInterrupt undoes it; the command exits
    ``stopped_code(signum)``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _after_the_first(first: int, handled: Mapping[int, Any],
                     restore: Callable[[], None]) -> None:
    """Every signal in ``handled`` handled, once ``first`` arrived, as ``run_cancellable`` and
    ``signals_raised`` say: ``first`` again within ``SAME_REQUEST_S`` is the same request and
    does nothing; a later one, or another signal, calls ``restore`` (every handler as it was)
    and goes to the handler before, so an operator's second one stops at once."""
    import signal

    from toolhost._composition import Host

    at = Host.instant()

    def repeated(signum: int, frame: Any) -> None:
        if signum == first and Host.instant() - at < SAME_REQUEST_S:
            return
        restore()
        signal.raise_signal(signum)  # to the handler before this: it stops at once

    for each in handled:
        signal.signal(each, repeated)


@contextlib.contextmanager
def signals_raised() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``Stopped`` rather than end the process
    where it stands (``artifacts get -o FILE`` then removes its partial temp file). The same
    signal again within ``SAME_REQUEST_S`` is the same request (``timeout(1)``'s second, to
    the group), so it cannot cut that cleanup short; a later one, or another signal, restores
    every handler as it was and goes to it, so an operator's second one stops at once. A
    signal the process was started ignoring stays ignored."""
    import signal
    import threading

    handled: dict[int, Any] = {}  # signal -> its handler before this

    def restore() -> None:
        for signum, before in handled.items():
            signal.signal(signum, before)
        handled.clear()

    def on_signal(signum: int, frame: Any) -> None:
        _after_the_first(signum, handled, restore)
        raise Stopped(signum)

    if threading.current_thread() is threading.main_thread():  # else no signal reaches it
        for signum in (signal.SIGTERM, signal.SIGHUP):
            before = signal.getsignal(signum)
            if before is signal.SIG_IGN or before is None:  # None: not Python's to restore
                continue
            handled[signum] = before
            signal.signal(signum, on_signal)
    try:
        yield
    finally:
        restore()


def stoppable(command: Callable[[], int], stopped: Callable[[signal.Signals], str], *,
              prog: str | None = None) -> int:
    """Run a console script's ``command`` as the host runs its own commands: Ctrl-C, SIGTERM
    and SIGHUP stop it where it stands (raised there, so what it was doing is undone as a
    KeyboardInterrupt undoes it), ``stopped(signal)`` is printed on stderr, one line and no
    traceback, and the exit code is ``stopped_code``; a signal the process was started
    ignoring stays ignored. Standard output is answered as the host's commands answer it
    (D338): closed when it starts, refused at once in one line, exit 1; a write that fails
    (a full disk) is one line and exit 1, past the command's own handlers, what it did left
    done; a reader that went away, quiet 141. ``prog`` begins those lines (default: the
    program's file name, as argparse names it). Public as ``toolhost.stoppable`` (plugin API
    1.8)."""
    import signal

    name = prog if prog is not None else os.path.basename(sys.argv[0] if sys.argv else "")
    if sys.stdout is None:
        return closed_output(name)
    original = guard_output(past_handlers=True)
    try:
        try:
            with signals_raised():
                code = command()
        except SystemExit as exc:  # argparse's --help or usage error: its output flushed first
            flushed_exit(exc, name)
        except _OutputLost as exc:  # what the command did is done: only its answer is lost
            return output_failed(exc.failed, name)
        except KeyboardInterrupt:
            signum = signal.SIGINT
        except Stopped as exc:
            signum = signal.Signals(exc.signum)
        else:
            return flushed(code, name)
        print(stopped(signum), file=sys.stderr)
        return stopped_code(signum)
    finally:
        unguard_output(original)


def stopped_code(signum: int) -> int:
    """The exit code of a command a signal stopped: 128 + its number, as a shell reports a
    process the signal killed (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + signum
