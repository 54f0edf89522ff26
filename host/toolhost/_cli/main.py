"""The ``toolhost`` command.

Nothing heavy is imported at module import: ``toolhost --help`` loads no plugin, and each
command imports what it needs when it runs. Bad input is one line on stderr and a non-zero
exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import Any

from toolhost._cli import approvals, artifacts, config, plugins, runs
from toolhost._cli.check import cmd_check
from toolhost._cli.common import (
    CommandError,
    OutputFailed,
    Parser,
    Stopped,
    add_command,
    close_loaded,
    closed_output,
    flushed,
    flushed_exit,
    guard_output,
    load,
    output_failed,
    print_attachments,
    print_content,
    print_json,
    refused,
    run_cancellable,
    stopped_code,
    unguard_output,
)
from toolhost._cli.exit_codes import ExitCode

#: How the command names itself: in its usage lines, and where its output failed.
PROG = "toolhost"


class _Version(argparse.Action):
    """``--version``: the installed toolhost-core's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help=kwargs.get("help"))

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib import metadata

        try:
            version = metadata.version("toolhost-core")
        except metadata.PackageNotFoundError:  # run from a source tree that is not installed
            version = "unknown (not installed)"
        sys.stdout.write(f"toolhost-core {version}\n")
        parser.exit()


def _epilog() -> str:
    from toolhost._cli.config import settings_epilog

    return (settings_epilog(("host",)) +
            "\nEvery setting may also be written in toolhost.toml (TOOLHOST_CONFIG, else\n"
            "$XDG_CONFIG_HOME/toolhost/toolhost.toml); the environment overrides the file.\n"
            "toolhost serve --help lists the [mcp] and [http] settings, toolhost config --help\n"
            "every plugin's too, and toolhost config shows the value of each and its source.\n")


def _serve_epilog() -> str:
    from toolhost._cli.config import settings_epilog

    return settings_epilog(("mcp", "http"))


def _parser(run: str | None = None) -> Parser:
    """The command line's parser, with the arguments of command ``run`` only (``_run_named``):
    every other command is listed with its help (``add_command``)."""
    from toolhost._cli.config import LazyEpilogHelp

    parser = Parser(
        prog=PROG,
        description="A plugin-based tool host for LLM agents.",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
    )
    parser.add_argument("-h", "--help", action=LazyEpilogHelp, epilog=_epilog)
    parser.add_argument("--version", action=_Version, help="print the toolhost-core version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_command(sub, run, "tools", _tools_arguments, help="list the registered tools")
    add_command(sub, run, "check", _no_arguments,
                help="run registration and the determinism scan over the plugins' files; "
                     "exit non-zero with the refusal")
    add_command(sub, run, "call", _call_arguments, help="invoke one tool through the pipeline")
    add_command(sub, run, "demo", _no_arguments,
                help='ask "What is 17 multiplied by 23?" and answer it through '
                     'math.calculate, with a scripted fake model')
    approvals.add_parsers(sub, run)
    artifacts.add_parsers(sub, run)
    config.add_parsers(sub, run)
    plugins.add_parsers(sub, run)
    add_command(sub, run, "serve", _serve_arguments,
                help="serve the tools over the Model Context Protocol",
                formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    runs.add_parsers(sub, run)
    return parser


def _run_named(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the
    top-level options, ``--help`` and ``--version``, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """``check`` and ``demo`` take none."""


def _tools_arguments(tools: argparse.ArgumentParser) -> None:
    tools.add_argument("--json", action="store_true", help="print every ToolSpec as JSON")
    tools.add_argument(
        "--format", choices=("canonical", "openai", "anthropic"), default=None,
        help="print the catalog a model is shown (the default roster, or --enable)",
    )
    tools.add_argument("--enable", action="append", metavar="NAME",
                       help="with --format: these tools instead of the default roster")
    tools.add_argument("--pin", action="append", metavar="NAME=VERSION", default=[],
                       help="with --format: that version of the tool under its name "
                            "(repeatable), as toolhost serve --pin serves it")


def _call_arguments(call: argparse.ArgumentParser) -> None:
    call.add_argument("name", help="tool name, e.g. math.calculate")
    call.add_argument("--args", default="{}", help="arguments as a JSON object")
    call.add_argument("--version", default=None, help="pin an exact version, e.g. 1.0.0")
    call.add_argument("--json", action="store_true", help="print the whole outcome as JSON")
    call.add_argument("--workspace", metavar="DIR", default=None,
                      help="an existing directory to use as the run's workspace root, neither "
                           "holding nor inside the data directory or toolhost.toml's, nor "
                           "holding a file the host trusts, runs or reads a secret from "
                           "(default: a fresh workspace, discarded after the call)")
    call.add_argument("--run", metavar="ID", default=None,
                      help="the run to call in (default: a new one, ended with the command). A "
                           "named run stays live after the command: calls given the same run "
                           "share its workspace and artifacts, until it pauses for an approval "
                           "(its workspace is then discarded) or toolhost runs end ID")
    call.add_argument("--user-turn", metavar="TEXT", default=None,
                      help="the user's own message for this call: the one input at USER trust "
                           "(email.feedback's quote must come from it)")
    call.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                      help="the run's deadline, from now (at most 30 days): no call of the "
                           "run runs after it, nor one approved after it")
    call.add_argument("--conversation", metavar="ID", default=None,
                      help="the conversation the run belongs to (what its artifacts, and the "
                           "uploads a tool may read, are scoped to)")


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    from toolhost._cli.config import LazyEpilogHelp

    serve.add_argument("-h", "--help", action=LazyEpilogHelp, epilog=_serve_epilog)
    serve.add_argument("--http", metavar="HOST:PORT", default=None,
                       help="streamable HTTP on this address instead of stdio, e.g. "
                            "127.0.0.1:8765")
    serve.add_argument("--enable", action="append", metavar="NAME",
                       help="serve these tools instead of the default roster (repeatable)")
    serve.add_argument("--pin", action="append", metavar="NAME=VERSION", default=[],
                       help="serve that version of the tool under its name, for a client "
                            "pinned to an older contract (repeatable; adds to "
                            "TOOLHOST_MCP_PINS)")


def cmd_tools(args: argparse.Namespace) -> int:
    host = load()
    if args.format is not None:
        from toolhost._cli.catalog import export
        from toolhost._composition import PinError, UnknownTool, parse_pins

        try:
            roster = host.registry.roster(args.enable, parse_pins(args.pin, source="--pin"))
        except UnknownTool as exc:
            raise CommandError(f"no tool {exc.args[0]!r} is registered") from None
        except PinError as exc:
            raise CommandError(str(exc)) from None
        sys.stdout.write(export([r.spec for r in roster], args.format).decode("utf-8") + "\n")
        return ExitCode.OK
    if args.pin:
        raise CommandError("--pin goes with --format (the catalog a model is shown)")
    if args.json:
        from toolhost._composition import spec_to_json

        print_json(
            [{**spec_to_json(r.spec), "distribution": r.distribution} for r in host.registry]
        )
        return ExitCode.OK
    for r in host.registry:
        s = r.spec
        flags = " deprecated" if s.deprecated else ""
        print(
            f"{s.identity:36} {s.side_effect.value}/{s.risk.value}/{s.idempotency.value} "
            f"{s.output_trust.value} ({r.distribution}){flags}"
        )
    return ExitCode.OK


def _arguments(text: str) -> Any:
    """``--args`` parsed, or the one line that says why it cannot be: not JSON, nested
    deeper than the pipeline takes (MAX_ARGUMENT_DEPTH), or a number of more digits than
    Python converts."""
    from toolhost._composition import MAX_ARGUMENT_DEPTH, nests_deeper

    deep = f"--args is nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        # Some of json's messages end "... at", which the position completes once.
        raise CommandError(f"--args is not valid JSON ({exc.msg.removesuffix(' at')} at "
                           f"position {exc.pos})") from None
    except RecursionError:  # json's parser gives up at the interpreter's recursion limit
        raise CommandError(deep) from None
    except ValueError:  # the one other: an integer longer than int() converts
        raise CommandError(f"--args holds an integer of more than "
                           f"{sys.get_int_max_str_digits()} digits") from None
    if nests_deeper(arguments):
        raise CommandError(deep)
    return arguments


def cmd_call(args: argparse.Namespace) -> int:
    from toolhost._composition import MAX_DEADLINE_S, Host

    # --timeout is "from now": from the command's start, before loading the host (a gateway
    # server's connect may take minutes) spends any of it.
    began = Host.instant()
    arguments = _arguments(args.args)
    if args.timeout is not None and not 0 < args.timeout <= MAX_DEADLINE_S:
        raise CommandError(f"--timeout must be a positive number of seconds, at most "
                           f"{MAX_DEADLINE_S} (30 days)")
    host = load(stores=True)
    from toolhost._composition import host_reasons as core_messages
    from toolhost._composition import valid_run_id, workspace_refusal

    workspace = args.workspace
    if workspace is not None:
        if not os.path.isdir(workspace):
            raise CommandError(f"--workspace {workspace!r} is not an existing directory")
        # Its tools write there: never where the host keeps what it runs at a start.
        refusal = workspace_refusal("--workspace", workspace, host.settings,
                                    host.declared_settings)
        if refusal is not None:
            raise CommandError(refusal)
    for option, value in (("--run", args.run), ("--conversation", args.conversation)):
        if value is not None and not valid_run_id(value):
            raise CommandError(f"{option} must be 1 to 128 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
    run_id = args.run
    # A named run live before this command is the operator's: never ended here (below).
    existed = (run_id is not None and workspace is not None
               and host.run_workspaces.registered(run_id))
    if run_id is None:
        # This command's own run (D221), registered as held by it before anything runs: one
        # a SIGKILL left is then ended by the next recovery, never re-run into and left live.
        run_id = host.new_id()
        host.run_workspaces.own(run_id)
    from toolhost import WorkspaceUnavailable

    try:
        run = host.local_run(workspace=workspace, run_id=run_id,
                             conversation_id=args.conversation, user_turn=args.user_turn,
                             timeout_s=args.timeout, timeout_from=began)
    except WorkspaceUnavailable as exc:  # a live run given another directory: nothing ran
        raise CommandError(f"--workspace: {exc}") from None
    if workspace is not None:
        # Again now that the run is registered: a server claiming (or a run registering) a
        # directory nested with it after the check above checked before this run was there,
        # and found nothing. Each registers, then checks: one of the two sees the other.
        refusal = workspace_refusal("--workspace", workspace, host.settings,
                                    host.declared_settings)
        if refusal is not None:
            if not existed:  # registered by this command alone
                host.end_run(run)
            raise CommandError(refusal)
    from toolhost._cli.progress_line import progress_shown
    from toolhost._composition import continued_trace

    try:
        # The call's span is a new trace, or continues TRACEPARENT's (a script's own).
        with continued_trace(host.settings), progress_shown(args.name):  # on a terminal
            # Ctrl-C (or SIGTERM, SIGHUP) cancels the call, as approve's does: its row ends
            # failed, not running for recover to run again.
            outcome, stopped = run_cancellable(
                lambda: host.invoke(args.name, arguments, version=args.version, run=run),
                run.cancellation)
    finally:
        # A named run goes on (the next --run ID call, an approval, finds its workspace); an
        # unnamed one is this command's alone.
        ended = host.run_outcome(run) if args.run is not None else host.end_run(run)
    # The run's attachments (D90): in the JSON beside the outcome, and for a person on
    # stderr, so stdout stays exactly what the model read.
    attached = ended.to_json()["attachments"]
    if outcome.paused:
        # stdout carries the id alone, so a script can approve what it just paused.
        if args.json:
            print_json({**outcome.to_json(), "run_id": run.id, "attachments": attached})
        else:
            print(outcome.invocation_id)
        print(f"toolhost: {args.name} awaits approval: toolhost approve {outcome.invocation_id}",
              file=sys.stderr)
        return ExitCode.PAUSED if stopped is None else stopped_code(stopped)
    if args.json:
        print_json({**outcome.to_json(), "run_id": run.id, "attachments": attached})
    else:
        print_content(outcome.content)
        print_attachments(ended.attachments)
    said = False  # one line of its own for a call that named no tool the host has
    if outcome.failure is not None:
        code = outcome.failure.reason_code
        said = code in (core_messages.UNKNOWN_TOOL, core_messages.UNKNOWN_VERSION,
                        core_messages.NEEDS_USER)
        if code == core_messages.UNKNOWN_TOOL:
            hint = plugins.activation_hint(host, args.name)
            print(f"toolhost: {hint}" if hint is not None else
                  f"toolhost: no tool {args.name!r} is registered (toolhost tools lists them)",
                  file=sys.stderr)
        elif code == core_messages.UNKNOWN_VERSION:
            known = ", ".join(host.registry.versions(args.name))
            print(f"toolhost: {args.name} has no version {args.version!r} (registered: {known})",
                  file=sys.stderr)
        elif code == core_messages.NEEDS_USER:
            print(f"toolhost: {args.name} needs the user's own words: pass them with "
                  "--user-turn TEXT", file=sys.stderr)
        elif code == core_messages.INVALID_SCHEMA and outcome.failure.detail:
            # Which rule failed is for the operator; the model's text above stays static.
            detail = json.dumps(dict(outcome.failure.detail), sort_keys=True, ensure_ascii=False,
                                default=str)
            print(f"toolhost: detail: {detail}", file=sys.stderr)
    if not outcome.ok and not args.json and outcome.invocation_id and not said:
        # The model's text above names no row; the operator's line names the one to look up.
        reason = f" ({outcome.failure.reason_code})" if outcome.failure is not None else ""
        print(f"toolhost: invocation {outcome.invocation_id} {outcome.status.value}{reason}: "
              f"toolhost show {outcome.invocation_id}", file=sys.stderr)
    if stopped is not None:
        return stopped_code(stopped)
    # A denial (a policy cell set to deny) is not a success either.
    return ExitCode.OK if outcome.ok else ExitCode.FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    host = load(stores=True)
    if "math.calculate" not in host.registry.names():
        raise CommandError("the demo needs toolhost-math installed (pip install plugins/math)",
                           ExitCode.FAILED)
    from toolhost._cli.demo import demo_provider, run_demo

    def emit(line: str) -> None:
        print(line, flush=True)

    outcomes = run_demo(host, demo_provider(), emit)
    return ExitCode.OK if outcomes and all(o.ok for o in outcomes) else ExitCode.FAILED


def cmd_serve(args: argparse.Namespace) -> int:
    from toolhost._composition import mcp_server

    try:
        serve = mcp_server()
    except ImportError as exc:
        raise CommandError(
            f"serve needs the MCP extra: pip install 'toolhost-core[mcp]' ({exc})", ExitCode.FAILED
        ) from None
    except ValueError as exc:
        # OpenTelemetry's API, which the SDK imports, loads OTEL_PROPAGATORS' propagators as
        # it is imported and raises for one no installed package provides: a setting, not a bug.
        propagators = os.environ.get("OTEL_PROPAGATORS")
        if not propagators or not _raised_in(exc, "opentelemetry.propagate"):
            raise
        raise CommandError(f"OTEL_PROPAGATORS={propagators!r}: {exc} Install it, or unset "
                           "OTEL_PROPAGATORS.", ExitCode.USAGE) from None
    # The stores are opened before serving: a bad data directory stops the start in one line.
    host = load(stores=True)
    from toolhost._composition import apply_logging

    # Configured now, not at the first event: stdout is the transport, and a library the
    # server loads may log through structlog before toolhost does.
    apply_logging()
    # A flag or setting it cannot serve with, or a transport that did not start, is a
    # ToolhostError (``_command``'s one line); Ctrl-C a KeyboardInterrupt (130).
    return serve(host, http=args.http, enable=args.enable, pins=args.pin)


def _raised_in(exc: BaseException, module: str) -> bool:
    """Whether ``exc`` was raised by code of ``module`` (its traceback's last frame)."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    return bool(frames) and frames[-1][0].f_globals.get("__name__") == module


_COMMANDS = {
    "tools": cmd_tools,
    "check": cmd_check,
    "call": cmd_call,
    "demo": cmd_demo,
    **approvals.COMMANDS,
    **artifacts.COMMANDS,
    **runs.COMMANDS,
    "config": config.cmd_config,
    "plugins": plugins.cmd_plugins,
    "serve": cmd_serve,
}


#: The commands that run no tool's body: their process ends at once when they are done
#: (``_exit_now``). A tool's body (call, approve, demo, recover, serve) may hold a file it
#: never closed, which only the interpreter's teardown flushes.
_ENDS_AT_ONCE = frozenset({"tools", "check", "pending", "show", "deny", "artifacts", "runs",
                           "config", "plugins"})


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stderr is None:  # started as `toolhost ... 2>&-`: Python leaves no stream
        _no_stderr()
    if sys.stdout is None:  # started as `toolhost ... >&-`: Python leaves no stream
        # Every command answers there (serve speaks MCP there).
        return closed_output(PROG)
    original = guard_output()
    try:
        return _main(argv)
    finally:
        unguard_output(original)


def _no_stderr() -> None:
    """A process started with descriptor 2 closed: ``sys.stderr`` becomes the log's stand-in
    (its lines dropped and counted, ``log.stderr``), read by every later writer, ``print()``
    too (``file=None`` is stdout). The null device takes the descriptor, unless something
    took it meanwhile, so that what inherits or duplicates it writes nowhere: a tool's child,
    and stdio ``serve``'s fd 1 while serving, which was SQLite's read-only filler there."""
    from toolhost._composition import log_stderr

    sys.stderr = log_stderr()
    try:
        os.fstat(2)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)  # the lowest free descriptor: 2, with 0 and 1
        if null != 2:
            os.dup2(null, 2)
            os.close(null)


def _main(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    try:
        args = _parser(_run_named(words)).parse_args(words)
    except SystemExit as exc:  # --help, --version, a usage error: argparse's own exit
        flushed_exit(exc, PROG)
    except OutputFailed as exc:  # --version's own write
        return output_failed(exc, PROG)
    code = flushed(_run(args), PROG)
    if argv is None and args.command in _ENDS_AT_ONCE:
        _exit_now(code)  # the process is the command: nothing runs after it
    return code


def _run(args: argparse.Namespace) -> int:
    try:
        return _command(args)
    finally:
        close_loaded()


def _command(args: argparse.Namespace) -> int:
    try:
        return _COMMANDS[args.command](args)
    except CommandError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Stopped as exc:  # SIGTERM or SIGHUP, once what the command did was undone
        return stopped_code(exc.signum)
    except OutputFailed as exc:  # what the command did is done: only its answer is lost
        return output_failed(exc, PROG)
    except Exception as exc:
        # Any error the host raises on purpose ends a command in its one line (a data
        # directory a command that opens the stores itself cannot use, a setting it cannot
        # read, ``serve``'s flags and transport); anything else is a bug, and its traceback.
        from toolhost._composition import ToolhostError

        if isinstance(exc, ToolhostError):
            failed = refused(exc)
            print(f"toolhost: {failed}", file=sys.stderr)
            return failed.code
        raise


def _exit_now(code: int) -> None:
    """End a command that ran no tool without the interpreter's teardown: freeing every module
    and object it loaded took 10-25 ms after the command was done (the plugins, attrs' classes,
    the stores' modules). What an exit must still do is done first: the atexit handlers run (a
    plugin may have registered one) and the output is flushed. Only with no other thread alive
    (check's readiness probes are joined), else the interpreter's own exit waits for it as
    usual."""
    import atexit

    if threading.active_count() > 1:
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the descriptor was closed when Python started
                stream.flush()
    except (OSError, ValueError):  # a closed pipe or file: the interpreter's own exit says so
        return
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
