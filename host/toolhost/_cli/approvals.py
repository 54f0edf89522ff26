"""The approval commands: ``pending``, ``show``, ``approve``, ``deny``, and ``recover``.

What an operator reads is the row itself, rendered so a crafted value cannot pass for
something else: every character that does not print (controls, bidirectional overrides,
zero-width characters) is shown as its JSON escape, and one-line fields stay on one line.
A row changed outside toolhost so that it holds no record is one line naming it (the store's
``InvocationRecordDamaged``), never a traceback, and a listing goes on past it.

``approve`` on a row that is already decided runs nothing and says so on stderr; its exit code
is the recorded outcome's, as the first ``approve`` had (0 for a success), so a retried script
neither runs the call twice nor fails for having asked twice.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from toolhost._cli.common import (
    CommandError,
    Parser,
    add_command,
    json_text,
    load,
    load_stores,
    positive_int,
    print_json,
    print_outcome,
    run_cancellable,
    stopped_code,
    utf8_stream,
)
from toolhost._cli.exit_codes import ExitCode
from toolhost._composition import escaped, prints, rows_in

if TYPE_CHECKING:
    import datetime as dt
    from pathlib import Path

    from toolhost._composition import (
        Host,
        InvocationRecord,
        InvocationRecordDamaged,
        InvocationStore,
        Stores,
    )

__all__ = ["COMMANDS", "add_parsers"]

#: How many paused invocations ``pending`` lists unless told (oldest first).
PENDING_LIMIT = 50
#: How many characters of the arguments one ``pending`` line shows (``show`` has them all).
ARGUMENTS_SHOWN = 80
#: How many characters of a result ``show`` prints (``show --json`` has it whole).
RESULT_SHOWN = 2000
#: How ``pending`` ends the line of a call whose run's deadline has passed (D222).
PAST_RUN_DEADLINE = "  (its run's deadline passed: approving runs nothing)"


def add_parsers(sub: argparse._SubParsersAction[Parser], run: str | None) -> None:
    add_command(sub, run, "pending", _pending_arguments,
                help="list invocations awaiting approval, oldest first")
    add_command(sub, run, "show", _show_arguments,
                help="print one invocation: its arguments and state")
    add_command(sub, run, "approve", _approve_arguments,
                help="approve a paused invocation and run it")
    add_command(sub, run, "deny", _deny_arguments, help="deny a paused invocation")
    add_command(sub, run, "recover", _recover_arguments,
                help="settle invocations left running by a process that is gone, and end "
                     "the runs of killed commands")


def _pending_arguments(pending: argparse.ArgumentParser) -> None:
    pending.add_argument("--json", action="store_true", help="print them as JSON")
    pending.add_argument("--limit", type=positive_int, default=PENDING_LIMIT, metavar="N",
                         help=f"list at most N of them (default {PENDING_LIMIT})")
    pending.add_argument("--after", metavar="ID",
                         help="list the ones after this invocation (the next page: the last "
                              "id the previous page printed)")
    pending.add_argument("--principal", metavar="ID",
                         help="only the calls of this principal (the person a token names)")


def _show_arguments(show: argparse.ArgumentParser) -> None:
    show.add_argument("id", help="the invocation id `call` or `pending` printed")
    show.add_argument("--json", action="store_true", help="print the whole row as JSON")


def _approve_arguments(approve: argparse.ArgumentParser) -> None:
    approve.add_argument("id", help="the invocation id `call` or `pending` printed")
    approve.add_argument("--approver", default="operator", help="who approves (recorded)")
    approve.add_argument("--json", action="store_true", help="print the whole outcome as JSON")


def _deny_arguments(deny: argparse.ArgumentParser) -> None:
    deny.add_argument("id", help="the invocation id")
    deny.add_argument("--reason", required=True, help="why (recorded, never shown the model)")
    deny.add_argument("--approver", default="operator", help="who denies (recorded)")
    deny.add_argument("--json", action="store_true", help="print the whole outcome as JSON")


def _recover_arguments(recover: argparse.ArgumentParser) -> None:
    recover.add_argument("--json", action="store_true", help="print what was done as JSON")
    recover.add_argument(
        "--no-rerun", dest="rerun", action="store_false",
        help="do not run IDEMPOTENT or READ_ONLY calls again: end them failed, retryable "
             "(a NON_IDEMPOTENT call is never run again)")


# ---------------------------------------------------------------------- rendering


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _instant(value: Any) -> str:
    return value.isoformat(timespec="microseconds") if value is not None else ""


def _owner(invocations: InvocationStore, record: InvocationRecord) -> str:
    """``pid 4242 on build-7 (alive)``: who ran or runs the row, and, if it is running,
    whether that process still is."""
    from toolhost._composition import InvocationState, OwnerState

    if record.owner is None:
        return ""
    text = escaped(f"pid {record.owner.get('pid')} on {record.owner.get('host')}")
    if record.state is InvocationState.RUNNING:
        state = invocations.owner_state(record.owner)
        text += {OwnerState.ALIVE: " (alive)", OwnerState.GONE: " (gone: toolhost recover "
                 "settles it)", OwnerState.UNKNOWN: " (cannot be checked from here)"}[state]
    return text


def _row_json(invocations: InvocationStore, record: InvocationRecord) -> dict[str, Any]:
    import attrs

    from toolhost._composition import InvocationState

    def value(_: Any, __: Any, v: Any) -> Any:
        if hasattr(v, "isoformat"):
            return _instant(v)
        if hasattr(v, "value") and not isinstance(v, (str, int)):
            return v.value
        if isinstance(v, tuple):
            return list(v)
        return v

    data: dict[str, Any] = attrs.asdict(record, value_serializer=value)
    if record.state is InvocationState.RUNNING:
        data["owner_state"] = invocations.owner_state(record.owner).value
    if record.reason_code:
        data["message"] = _message(record.reason_code)
    return data


def _message(reason_code: str) -> str | None:
    """The message of a reason code: the host's own, or a tool's from the table registration
    makes, for which (and only then) the plugins are loaded."""
    from toolhost._composition import host_reasons

    if reason_code in host_reasons.MESSAGES:
        return host_reasons.MESSAGES[reason_code]
    return load(tools=False).messages.get(reason_code)


# ---------------------------------------------------------------------- pending


def cmd_pending(args: argparse.Namespace) -> int:
    # The record alone: the lines show what the rows hold, so no plugin is loaded.
    stores = load_stores()
    return list_pending(stores.invocations, limit=args.limit, after=args.after,
                        as_json=args.json, out=sys.stdout, err=sys.stderr,
                        principal=args.principal, now=stores.clock.now())


def list_pending(invocations: InvocationStore, *, limit: int, after: str | None,
                 as_json: bool, out: TextIO, err: TextIO, now: dt.datetime,
                 principal: str | None = None) -> int:
    """``pending``'s page: the oldest ``limit`` invocations awaiting approval (after the one
    ``after`` names), each page one indexed range read however many rows wait, of the
    columns a line shows, printed from their stored text (``InvocationStore.pending``). A
    line whose call's run's deadline is at or before ``now`` ends ``PAST_RUN_DEADLINE``;
    one whose call would run in the operator's directory names it (D509, D516), as ``show``
    does. ``--json`` has each call's ``run_deadline`` and ``operator_directory`` as ``show
    --json`` has them."""
    from toolhost._composition import (
        InvocationNotFound,
        InvocationRecord,
        InvocationState,
        OwnerState,
    )

    try:
        listed = invocations.pending(limit=limit + 1, after=after, principal_id=principal)
    except InvocationNotFound:
        raise CommandError(f"no invocation {after!r} (toolhost pending lists them)",
                           ExitCode.FAILED) from None
    more, listed = len(listed) > limit, listed[:limit]
    whole = _whole_rows(invocations, listed)
    if as_json:
        out.write(json_text(_pending_json(listed, whole, err), indent=2,
                            ascii_only=not utf8_stream(out)) + "\n")
    elif not listed and after is None:
        out.write("no invocations await approval\n")
    elif not listed:
        out.write(f"no invocations await approval after {after}\n")
    else:
        # The stored text, escaped: a row edited outside toolhost may hold anything. The mark
        # comes last, after a preview that ends in '}' or '…', so no argument can forge it.
        out.write("".join(
            f"{escaped(f'{r.id}  {r.tool_name}@{r.tool_version}  {r.created}')}  "
            f"{_arguments_preview(r.arguments_json)}{_line_end(whole.get(r.id), now)}\n"
            for r in listed))
    if more:
        also = f" --limit {limit}" if limit != PENDING_LIMIT else ""
        if principal is not None:
            also += f" --principal {json.dumps(principal)}"
        which = f"the oldest {limit} are" if after is None else f"{limit} are"
        err.write(f"toolhost: {which} listed; more await approval (the next page: "
                  f"toolhost pending --after {escaped(listed[-1].id)}{also})\n")
    running = rows_in(invocations, InvocationState.RUNNING)
    stranded = [r for r in running if isinstance(r, InvocationRecord)
                and invocations.owner_state(r.owner) is OwnerState.GONE]
    if stranded:
        err.write(f"toolhost: {len(stranded)} invocation(s) were left running by a process "
                  "that is gone: toolhost recover settles them\n")
    for damaged in running:
        if not isinstance(damaged, InvocationRecord):
            err.write(f"toolhost: invocation {escaped(damaged.id)} is damaged "
                      f"({damaged.field}): it is running, or was left running, and toolhost "
                      "recover leaves it as it is\n")
    return ExitCode.OK


def _whole_rows(invocations: InvocationStore, listed: Sequence[Any],
                ) -> dict[str, InvocationRecord | InvocationRecordDamaged]:
    """Each listed call's whole row, read once by its id (at most ``--limit`` reads): the
    run's deadline and the operator's directory are not among a pending line's columns. A row
    gone since is left out; a damaged one is there as the store's refusal."""
    from toolhost._composition import InvocationNotFound, InvocationRecordDamaged

    whole: dict[str, InvocationRecord | InvocationRecordDamaged] = {}
    for r in listed:
        try:
            whole[r.id] = invocations.get(r.id)
        except InvocationNotFound:
            continue
        except InvocationRecordDamaged as exc:
            whole[r.id] = exc
    return whole


def _line_end(record: InvocationRecord | InvocationRecordDamaged | None,
              now: dt.datetime) -> str:
    """What a pending line ends with: ``PAST_RUN_DEADLINE`` once the call's run's deadline is
    at or before ``now`` (an approval ends it failed, unrun: D222, as ``show`` says, so its
    directory is not named: D521); else where an approval runs it, when that is the operator's
    directory it paused in (``show``'s ``directory`` line). Nothing for a row gone or
    damaged since."""
    from toolhost._composition import InvocationRecord

    if not isinstance(record, InvocationRecord):
        return ""
    if record.run_deadline is not None and now >= record.run_deadline:
        return PAST_RUN_DEADLINE
    where = _operator_directory(record)
    if where is None:
        return ""
    place, said = where
    return f"  (directory {escaped(place)}{f': {said}' if said else ''})"


def _pending_json(listed: Sequence[Any],
                  whole: Mapping[str, InvocationRecord | InvocationRecordDamaged],
                  err: TextIO) -> list[dict[str, Any]]:
    """``pending --json``'s rows, their JSON columns parsed, with the run's deadline and the
    operator's directory from the whole row (``show --json``'s forms); a row whose column is
    not JSON, or whose whole row is damaged (edited outside toolhost), is skipped, said on
    ``err``; one gone since is left out."""
    from toolhost._composition import InvocationRecordDamaged

    rows = []
    for r in listed:
        record = whole.get(r.id)
        try:
            arguments = json.loads(r.arguments_json)
            policy = None if r.policy_json is None else json.loads(r.policy_json)
        except (ValueError, RecursionError):
            record = InvocationRecordDamaged(
                r.id, "policy" if _parses(r.arguments_json) else "arguments")
        if isinstance(record, InvocationRecordDamaged):
            err.write(f"toolhost: invocation {escaped(r.id)} is damaged ({record.field}): "
                      "skipped\n")
            continue
        if record is None:  # gone since the page was read
            continue
        directory = record.operator_directory
        rows.append({"id": r.id, "tool": r.tool_name, "version": r.tool_version,
                     "argument_digest": r.argument_digest, "created": r.created,
                     "run_id": r.run_id, "arguments": arguments, "policy": policy,
                     "run_deadline": _instant(record.run_deadline) or None,
                     "operator_directory": None if directory is None else dict(directory)})
    return rows


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _arguments_preview(arguments_json: str) -> str:
    """``_cut(json_text(arguments), ARGUMENTS_SHOWN)`` from the canonical JSON text (the
    same text: json.dumps's options, one encoder), without escaping all of a large value: an
    escape is never shorter than its character, so the first ARGUMENTS_SHOWN + 1 characters
    decide both the shown text and whether it was cut."""
    head = arguments_json[:ARGUMENTS_SHOWN + 1]
    if len(head) <= ARGUMENTS_SHOWN and prints(head):  # most lines: nothing to do
        return head
    return _cut(escaped(head), ARGUMENTS_SHOWN)


# ---------------------------------------------------------------------- show


def cmd_show(args: argparse.Namespace) -> int:
    # The record alone; the plugins are loaded only for a tool's failure message and for what
    # a waiting call's tool says it will do.
    stores = load_stores()
    invocations = stores.invocations
    record = _row(invocations, args.id)
    if args.json:
        data = _row_json(invocations, record)
        described = _described(stores, record)
        data["described"] = None if described is None else {
            "distribution": described[0], "lines": described[1]}
        print_json(data)
        return ExitCode.OK
    lines = [
        ("invocation", record.id),
        ("tool", f"{record.tool_name} {record.tool_version or ''}".rstrip()),
        ("state", record.state.value),
        ("policy", _policy(record.policy)),
        ("run", record.run_id),
        ("run deadline", _run_deadline(record, stores.clock.now())),
        ("directory", _directory(record, stores.clock.now())),
        ("principal", f"{record.principal_id} (scopes: {', '.join(record.scopes) or 'none'})"),
        ("conversation", record.conversation_id or ""),
        ("created", _instant(record.created_at)),
        ("decided", _instant(record.decided_at)
         + (f" by {record.approver}" if record.approver else "")),
        ("denial", record.denial_reason or ""),
        ("started", _instant(record.started_at)),
        ("finished", _instant(record.finished_at)),
        ("owner", _owner(invocations, record)),
        ("digest", record.argument_digest or ""),
    ]
    if record.reason_code:
        retryable = "retryable" if record.retryable else "not retryable"
        lines.append(("failure", f"{record.reason_code} ({retryable}): "
                                 f"{_message(record.reason_code) or ''}"))
        if record.failure_detail:
            lines.append(("detail", json_text(dict(record.failure_detail))))
    if record.result_content is not None:
        content = record.result_content
        shown = _cut(content, RESULT_SHOWN)
        lines.append(("result", escaped(shown) + (
            f" ({len(content) - len(shown) + 1} more characters: toolhost show {record.id} "
            "--json)" if shown != content else "")))
    for label, text in lines:
        if text:
            print(f"{label:<13}{escaped(text)}")
    print("arguments")
    print(json_text(record.arguments, indent=2), flush=True)
    # Asked only now: whatever the plugins do, the row is already on the screen.
    described = _described(stores, record)
    if described is not None:
        distribution, said = described
        # The host escaped and bounded each line (Host.describe_call): one line each.
        print(f"what {escaped(distribution)} says it does")
        for line in said:
            print(f"  {line}")
    return ExitCode.OK


def _described(stores: Stores, record: InvocationRecord) -> tuple[str, list[str]] | None:
    """What the tool of a call waiting for a decision says it will do (``Tool(describe=...)``),
    for which the plugins are loaded; None for a decided call (nobody approves it now) and,
    said on stderr, when the plugins do not load: the row itself is still shown."""
    from toolhost._composition import InvocationState

    if record.state is not InvocationState.AWAITING_APPROVAL:
        return None
    try:
        host = load(tools=False, record=stores)
    except CommandError as exc:
        print(f"toolhost: nothing describes what this call does: {exc}", file=sys.stderr)
        return None
    except SystemExit:  # a plugin that exits as it is imported: the row stands without it
        print("toolhost: nothing describes what this call does: a plugin exited as it was "
              "loaded", file=sys.stderr)
        return None
    return host.describe_call(record)


def _run_deadline(record: InvocationRecord, now: dt.datetime) -> str:
    """The run's deadline on the row (D222) and, for a call still to be decided, what an
    approval does with it: at or past it, the approval runs nothing and ends the call failed
    (D440: the approver learns this before deciding, not from the outcome)."""
    from toolhost._composition import InvocationState

    if record.run_deadline is None:
        return ""
    text = _instant(record.run_deadline)
    if record.state not in (InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED):
        return text
    if now >= record.run_deadline:
        return text + (" (passed: an approval runs nothing and ends the call failed, "
                       "tool.timeout.run_deadline_passed)")
    return text + " (an approval after it runs nothing)"


def _directory(record: InvocationRecord, now: dt.datetime) -> str:
    """``show``'s ``directory`` line: the ``_operator_directory``, what an approval does there
    in parentheses; nothing said of an approval once the run's deadline has passed (it runs
    nothing there: the ``run deadline`` line says so, as ``pending`` does, D521)."""
    where = _operator_directory(record)
    if where is None:
        return ""
    place, said = where
    if record.run_deadline is not None and now >= record.run_deadline:
        return place
    return f"{place} ({said})" if said else place


def _operator_directory(record: InvocationRecord) -> tuple[str, str] | None:
    """Where the call runs once approved, when that is the operator's directory it paused in
    (D509): its own files, not a workspace the host makes, so the approver is told first.
    ``(path on host, what an approval does there)``, the second empty once decided; None
    when the call paused in no such directory."""
    from toolhost._composition import InvocationState

    recorded = record.operator_directory
    if not recorded:
        return None
    place = f"{recorded.get('path')} on {recorded.get('host')}"
    if recorded.get("host") != socket.gethostname():
        return place, "another machine: approved here, it runs in a workspace of its own"
    if record.state in (InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED):
        return place, "an approval runs the call there, checked again first"
    return place, ""


def _policy(policy: Any) -> str:
    if not policy:
        return ""
    text = f"{policy.get('action')} ({policy.get('rule')})"
    if policy.get("override"):
        text += f", allowed by {policy['override']}"
    if policy.get("tool_rule") == "always_requires_approval":
        text += ", which the tool always requires"
    return text


def _row(invocations: InvocationStore, invocation_id: str) -> InvocationRecord:
    from toolhost._composition import InvocationNotFound

    try:
        return invocations.get(invocation_id)
    except InvocationNotFound:
        raise CommandError(f"no invocation {invocation_id!r} (toolhost pending lists them)",
                           ExitCode.FAILED) from None


# ---------------------------------------------------------------------- approve, deny


def cmd_approve(args: argparse.Namespace) -> int:
    stores = _approvable(args.id)
    from toolhost import OutcomeStatus
    from toolhost._composition import InvocationNotFound, InvocationState, InvocationStateError

    host = load(stores=True, record=stores, settings=stores.settings)
    from toolhost._composition import CancellationEvent

    # Asked before the row is taken: the operator's directory the call paused in, no longer
    # passing, leaves the call awaiting approval, for the operator to set right and approve.
    record = host.row(args.id)
    if record.state in (InvocationState.AWAITING_APPROVAL, InvocationState.APPROVED):
        refused = host.approval_refusal(record)
        if refused is not None:
            raise CommandError(f"invocation {args.id} was not run and still awaits approval: "
                               f"{refused}")
        # Said before it runs: the approved command changes the operator's own files there.
        # Past the run's deadline nothing runs (D222), and the outcome says so instead.
        directory = host.run_workspaces.approval_directory(record.run_id,
                                                           record.operator_directory)
        runs = record.run_deadline is None or host.clock.now() < record.run_deadline
        if directory is not None and runs:
            print(f"toolhost: invocation {args.id} runs in the operator's directory "
                  f"{escaped(str(directory))}", file=sys.stderr, flush=True)
    cancellation = CancellationEvent()
    try:
        # Ctrl-C (or SIGTERM, SIGHUP) cancels the call as ``serve`` cancels one in flight.
        resumed, stopped = run_cancellable(
            lambda: host.resume(args.id, args.approver, cancellation=cancellation),
            cancellation)
    except InvocationNotFound:
        raise CommandError(f"no invocation {args.id!r} (toolhost pending lists them)",
                           ExitCode.FAILED) from None
    except InvocationStateError as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None
    outcome = resumed.outcome
    code = print_outcome(outcome, args.json)
    if stopped is not None:
        return stopped_code(stopped)
    if not resumed.acted:
        if outcome.status is OutcomeStatus.RUNNING:
            owner = _owner(host.invocations, host.row(args.id))
            what = f"is already running in {owner}" if owner else "is already running"
        else:
            what = f"already finished ({outcome.status.value})"
        print(f"toolhost: invocation {args.id} {what}; it did not run again", file=sys.stderr)
    elif outcome.status is OutcomeStatus.DENIED:
        rule = (outcome.decision or {}).get("rule", "")
        print(f"toolhost: invocation {args.id} did not run: the policy now denies {rule}",
              file=sys.stderr)
        return ExitCode.FAILED
    return code


def _approvable(invocation_id: str) -> Stores:
    """``approve``'s lookup, in the record alone: a row that does not exist or was denied is
    refused before a plugin is loaded. The stores are the host's afterwards (``load``'s
    ``record``), and the pipeline checks the row again as it then stands."""
    from toolhost._composition import InvocationNotFound, InvocationState

    stores = load_stores()
    try:
        state = stores.invocations.get(invocation_id).state
    except InvocationNotFound:
        raise CommandError(f"no invocation {invocation_id!r} (toolhost pending lists them)",
                           ExitCode.FAILED) from None
    if state is InvocationState.DENIED:  # Pipeline.resume's InvocationStateError, said early
        raise CommandError(f"invocation {invocation_id} was denied", ExitCode.FAILED)
    return stores


def cmd_deny(args: argparse.Namespace) -> int:
    from toolhost._composition import InvocationNotFound, InvocationStateError

    # The record alone: a denial runs nothing, so no plugin is loaded.
    stores = load_stores()
    try:
        denial = stores.denial(args.id, args.approver, args.reason)
    except InvocationNotFound:
        raise CommandError(f"no invocation {args.id!r} (toolhost pending lists them)",
                           ExitCode.FAILED) from None
    except InvocationStateError as exc:
        raise CommandError(str(exc), ExitCode.FAILED) from None
    code = print_outcome(denial.outcome, args.json)
    if not denial.acted:
        # Said, not silent: this command's reason is not the one recorded.
        first = stores.invocations.get(args.id)
        # Both escaped: an MCP client names the approver of a row it declined itself.
        print(f"toolhost: invocation {args.id} was already denied by "
              f"{escaped(first.approver or '')} ({escaped(first.denial_reason or '')}); this "
              "reason was not recorded", file=sys.stderr)
    return code


# ---------------------------------------------------------------------- recover


def cmd_recover(args: argparse.Namespace) -> int:
    host = load(stores=True)
    from toolhost._composition import CancellationEvent

    gone = _gone_runs(host)
    cancellation = CancellationEvent()
    # Ctrl-C (or SIGTERM, SIGHUP) cancels a call run again as approve's: its row ends failed,
    # not running under this process for the next recover to run once more (D337).
    report, stopped = run_cancellable(
        lambda: host.recover_cancellable(cancellation, rerun=args.rerun), cancellation)
    # Recovery ends a killed command's run (D475) and reports only rows: the runs it ended
    # are the ones listed as gone before it that are no longer registered.
    ended = [run for run in gone if not host.run_workspaces.registered(run[0])]
    code = ExitCode.OK if stopped is None else stopped_code(stopped)
    if args.json:
        print_json([*map(_ended_run_json, ended), *(r.to_json() for r in report)])
        return code
    if not report and not ended and stopped is None:
        print("nothing to recover: no invocation is left running")
    for run_id, directory, has_workspace in ended:
        left = (f" (its directory {directory} is kept)" if directory is not None
                else " (its workspace is removed)" if has_workspace else "")
        print(escaped(f"ended run {run_id}: {_GONE_REASON}{left}"))
    for r in report:
        print(escaped(f"{r.invocation_id}  {r.tool}@{r.version}  {r.action.value}: {r.reason}"))
    return code


#: Why recover ended a run (``runs list`` said it would: "its command is gone").
_GONE_REASON = "its command was gone"
#: A run as ``_gone_runs`` lists it: its id, the operator's directory it ran in (None: its
#: workspace was the host's), whether it had a workspace.
_Run = tuple[str, "Path | None", bool]


def _gone_runs(host: Host) -> list[_Run]:
    """The runs whose command is gone, which the recovery about to start ends; none when no
    run was ever registered here (listing would make the registry's directory)."""
    runs = host.run_workspaces
    if not runs.root.is_dir():
        return []
    try:
        return [(run.run_id, run.directory, run.has_workspace)
                for run in runs.listed() if run.command_gone]
    except OSError:  # the registry cannot be read: the recovery's sweep logs why
        return []


def _ended_run_json(run: _Run) -> dict[str, Any]:
    """A run recover ended, as an entry of its ``--json`` list: the keys a row's entry has
    (null where a run has none), so a reader of the rows reads it too, with ``run_id`` and
    ``directory`` as ``runs list --json`` has them."""
    run_id, directory, _ = run
    return {"invocation_id": None, "tool": None, "version": None, "action": "run_ended",
            "reason": _GONE_REASON, "outcome": None, "run_id": run_id,
            "directory": str(directory) if directory is not None else None}


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "pending": cmd_pending,
    "show": cmd_show,
    "approve": cmd_approve,
    "deny": cmd_deny,
    "recover": cmd_recover,
}
