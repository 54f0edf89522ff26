"""sandbox.run_command: one shell command line in the run's workspace, inside isolation.

The classification is the specification's table exactly; output_trust EXTERNAL_UNTRUSTED is
forced (registration step 7 refuses anything higher for target_kind sandbox). The workspace
reaches the sandbox only through the Workspace port (``context.workspace.sandbox_root()``: a
directory fd to bind, and SANDBOX_WRITTEN provenance for every file the command created or
changed), so containment stays the host's.

Fails closed: with no working isolation every call fails with ``isolation_unavailable`` and
nothing runs; there is no unsandboxed fallback.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Protocol, cast

from toolhost import (
    Settings,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    Trust,
    WorkspaceUsage,
    escaped,
)
from toolhost_sandbox import quota
from toolhost_sandbox.isolation import IsolationUnavailable, find_bwrap
from toolhost_sandbox.limits import LimitsUnavailable, SandboxesBusy, limits_for_call
from toolhost_sandbox.messages import ISOLATION_UNAVAILABLE, SANDBOX_BUSY
from toolhost_sandbox.quota import QUOTA_BYTES, QUOTA_DEPTH, QUOTA_ENTRIES
from toolhost_sandbox.readiness import isolation_problem
from toolhost_sandbox.runner import OUTPUT_LIMIT, UNMEASURABLE, Completed, run_sandboxed
from toolhost_sandbox.specs import (
    COMMAND_MAX_LENGTH,
    DEFAULT_TIMEOUT_S,
    DESCRIPTION,
    INPUT_SCHEMA,
    OUTPUT_SCHEMA,
    SPEC,
)

__all__ = [
    "COMMAND_MAX_LENGTH",
    "DEFAULT_TIMEOUT_S",
    "DESCRIPTION",
    "INPUT_SCHEMA",
    "OUTPUT_SCHEMA",
    "SPEC",
    "isolation_problem",
    "output_message",
    "render",
    "run_command",
]


def output_message(output_bytes: int) -> str:
    """The progress message of a running command: how much output it has made so far."""
    if output_bytes < 1024:
        return f"{output_bytes} {'byte' if output_bytes == 1 else 'bytes'} of output"
    return f"{output_bytes // 1024} KiB of output"


#: Bytes of the tool's maximum_output_bytes the text leaves to the host's elision marker
#: (about 170 of them): when the structured result passes the limit, step 12 then keeps the
#: text whole with its marker after it, and never starts a line with what the command printed.
MARKER_ROOM = 1024


def _quota(quota_bytes: int) -> str:
    return f"{quota_bytes // 2**20} MiB, {QUOTA_ENTRIES} entries, {QUOTA_DEPTH} levels deep"


_UNMEASURED = (
    "could not be measured against its quota (most often a directory in it that may not be "
    "listed or searched, after chmod 0 or chmod 300 on it)")
_KEEP_MEASURABLE = (
    "Keep every directory in the workspace readable and searchable by its owner (chmod u+rx), "
    "and do not keep moving directories in it while the command runs.")


def _status_line(completed: Completed, timeout_s: int, quota_bytes: int) -> str:
    if not completed.started:
        # Measured before the start (D297): the command never ran, nothing of it was killed.
        if completed.killed == UNMEASURABLE:
            return f"Nothing was run: the workspace {_UNMEASURED}. {_KEEP_MEASURABLE}"
        return (f"Nothing was run: the workspace is already over its quota "
                f"({_quota(quota_bytes)}), so the command was not started.")
    if completed.killed == "timeout":
        return f"Timed out after {timeout_s} s; every process of the command was killed."
    if completed.killed == "output_limit":
        return (f"Output reached {OUTPUT_LIMIT} bytes; every process of the command was "
                "killed and the output is cut there.")
    if completed.killed == "workspace_quota":
        return (f"The workspace passed its quota ({_quota(quota_bytes)}); every process of "
                "the command was killed.")
    if completed.killed == UNMEASURABLE:
        return (f"The workspace {_UNMEASURED}; every process of the command was killed. "
                f"{_KEEP_MEASURABLE}")
    if completed.killed is not None:
        return "Cancelled; every process of the command was killed."
    signal = completed.signal
    return f"Exit code {completed.exit_code}" + (f" ({signal})." if signal else ".")


def _literal(text: str) -> str:
    """``text`` as one JSON string on one line. ``json.dumps`` escapes only C0 controls, the
    quote and the backslash; every other character that does not print (DEL, C1 controls
    such as CSI, U+0085, U+2028, U+2029, direction overrides, invisible ones) is its JSON
    escape too (the host's one rule, ``toolhost.escaped``), since each would start a line of
    the command's choosing or drive the reader's terminal."""
    return escaped(json.dumps(text, ensure_ascii=False))


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _header(name: str, size: int, shown: int | None) -> str:
    unit = "byte" if size == 1 else "bytes"
    if shown is None:
        return f"{name} ({size} {unit}): "
    return (f"{name} ({size} {unit}, cut to its first {shown} characters here; the "
            "structured result holds them all): ")


#: The most bytes a stream's header and line end take, the room its JSON string has not.
_HEADER_ROOM = len(_header("stdout", OUTPUT_LIMIT, OUTPUT_LIMIT)) + 1


def _stream(name: str, size: int, text: str, literal: str, room: int) -> str:
    """One stream's line (``literal``: ``text`` as a JSON string, ``size`` its bytes), the
    string at most ``room`` bytes: cut at a character where escaping made it longer, and
    its header says so."""
    if _size(literal) <= room:
        return f"{_header(name, size, None)}{literal}\n"
    # Escaping is per character and each takes a byte at least: cutting as many characters
    # as the string is over brings it within ``room`` from any first guess.
    kept = len(text) * room // _size(literal)
    literal = _literal(text[:kept])
    if (over := _size(literal) - room) > 0:
        kept = max(kept - over, 0)
        literal = _literal(text[:kept])
    return f"{_header(name, size, kept)}{literal}\n"


def _streams(completed: Completed, stdout: str, stderr: str, room: int) -> str:
    """Both streams' lines within ``room`` bytes: a stream whose string needs less than half
    of the room is whole, and the other has the rest."""
    room -= 2 * _HEADER_ROOM
    out, err = _literal(stdout), _literal(stderr)
    out_room = min(_size(out), max(room // 2, room - _size(err)))
    return (_stream("stdout", len(completed.stdout), stdout, out, out_room)
            + _stream("stderr", len(completed.stderr), stderr, err, room - out_room))


def render(completed: Completed, timeout_s: int, quota_bytes: int = QUOTA_BYTES) -> ToolOutput:
    """The result: structured fields, and the text the model reads, byte-stable
    (``quota_bytes``: the byte quota the host set, which a quota kill names). The text stays
    within the tool's maximum_output_bytes less ``MARKER_ROOM``; the structured result keeps
    both streams whole."""
    stdout = completed.stdout.decode("utf-8", errors="replace")
    stderr = completed.stderr.decode("utf-8", errors="replace")
    structured = {
        "exit_code": completed.exit_code,
        "signal": completed.signal,
        "timed_out": completed.killed == "timeout",
        "truncated": completed.killed == "output_limit",
        # A workspace that cannot be measured is held to its quota by the same kill.
        "quota_exceeded": completed.killed in ("workspace_quota", UNMEASURABLE),
        "stdout": stdout,
        "stderr": stderr,
    }
    status = _status_line(completed, timeout_s, quota_bytes)
    room = SPEC.maximum_output_bytes - MARKER_ROOM - _size(status) - 1
    content = f"{status}\n{_streams(completed, stdout, stderr, room)}"
    return ToolOutput(structured=structured, content=content.rstrip("\n"),
                      output_trust=Trust.EXTERNAL_UNTRUSTED)


class _SandboxRoot(Protocol):
    """What the host's workspace offers a sandbox beside the five public Workspace methods
    (the host's ``SandboxWorkspace``): the root as a directory fd, provenance afterwards,
    and its usage measured while the command runs."""

    def sandbox_root(self) -> AbstractContextManager[int]: ...

    def usage(self, *, max_bytes: int, max_entries: int, max_depth: int) -> WorkspaceUsage: ...


def _sandbox_root(context: ToolExecutionContext) -> _SandboxRoot:
    if not all(callable(getattr(context.workspace, name, None))
               for name in ("sandbox_root", "usage")):
        raise _unavailable("this run's workspace offers no sandbox_root or usage (not the host's)")
    return cast(_SandboxRoot, context.workspace)


def _unavailable(reason: str) -> ToolFailure:
    return ToolFailure(ISOLATION_UNAVAILABLE, detail={"problem": reason})


def run_command(settings: Settings, context: ToolExecutionContext, command: str,
                timeout_s: int) -> ToolOutput:
    """The body (``specs.RUN_COMMAND`` calls it), with the host's settings (which bwrap, the
    workspace's byte quota). Step 4 applied timeout_s's default and checked both bounds."""
    quota_bytes = settings.workspace_quota_bytes
    workspace = _sandbox_root(context)
    try:
        bwrap = find_bwrap(settings)
        limits = limits_for_call(settings)
    except SandboxesBusy as exc:
        raise ToolFailure(SANDBOX_BUSY, detail={"problem": exc.reason}, retryable=True) from None
    except (IsolationUnavailable, LimitsUnavailable) as exc:
        raise _unavailable(exc.reason) from None
    try:
        with workspace.sandbox_root() as workspace_fd:
            try:
                completed = run_sandboxed(
                    bwrap, workspace_fd, command, timeout_s=timeout_s,
                    on_cancel=context.cancellation.add_callback, limits=limits,
                    measure=lambda: quota.measure(workspace, quota_bytes),
                    quota_bytes=quota_bytes,
                    on_progress=lambda seconds, output: context.progress(
                        seconds, timeout_s, output_message(output)))
            finally:
                # Before the workspace's provenance is recorded: nothing may still write.
                limits.release()
    except (IsolationUnavailable, LimitsUnavailable) as exc:
        raise _unavailable(exc.reason) from None
    finally:
        limits.release()  # again, for a workspace that failed to open (idempotent)
    return render(completed, timeout_s, quota_bytes)
