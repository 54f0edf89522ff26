"""Run one command in the sandbox: start it under its limits, read its output while it
streams, and kill the whole sandbox on timeout, cancellation or too much output.

The launcher is ``/bin/sh`` waiting on a line of its stdin: while it waits, this process puts
it in the call's cgroup and sets its resource limits, then sends the line, and the launcher
becomes bwrap (``exec``) with everything inherited. No ``preexec_fn`` (unsafe in a threaded
process) and no window in which bwrap runs unlimited. Under a sandbox uid (``limits``) the
launcher execs ``sandbox_user.drop_argv`` first, which drops to that uid and then execs
bwrap: the limits are set while the launcher is still this process's uid (changing another
uid's limits takes CAP_SYS_RESOURCE, which a container's root often lacks). bwrap then binds
the workspace's idmapped mount instead of the workspace itself.

While it runs, a thread measures the workspace (``quota``, through the host's
``SandboxWorkspace.usage``) and kills the sandbox once it passes its quota; another, when the
caller wants progress, reports every ``PROGRESS_EVERY_S`` the seconds gone and the output
bytes read so far (seconds counted by its own waits: a plugin reads no clock of its own).

Killing: bwrap's JSON status names the host pid of the sandbox's pid-namespace init;
SIGKILL to it ends every process in the namespace, one that called ``setsid`` included (a
process-group kill does not). bwrap itself is killed too (``--die-with-parent`` then ends the
init even before its pid is known), and the cgroup, where there is one, is emptied as well.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from toolhost import WorkspaceUsage
from toolhost_sandbox.isolation import IsolationUnavailable, account_files, bwrap_argv
from toolhost_sandbox.limits import (
    OUTPUT_LIMIT,
    CallLimits,
    Cgroup,
    LimitsUnavailable,
    apply_rlimits,
)
from toolhost_sandbox.quota import INTERVAL_S, PAUSE_PER_ENTRY_S, over_quota
from toolhost_sandbox.sandbox_user import drop_argv
from toolhost_sandbox.seccomp import SeccompUnavailable, filter_program

__all__ = ["KILL_GRACE_S", "OUTPUT_LIMIT", "PROGRESS_EVERY_S", "Completed", "run_sandboxed"]

#: How long a killed sandbox has to close its output before the reader stops waiting.
KILL_GRACE_S = 5.0
#: How often a running command's progress is reported, in seconds.
PROGRESS_EVERY_S = 1
_READ = 64 * 1024
_LAUNCHER = 'read _ && exec "$@" </dev/null'


@dataclass(frozen=True, slots=True)
class Completed:
    """How the command ended. ``exit_code`` is the shell's status (128+N when a signal N
    ended it) and None when the host killed the sandbox; ``killed`` says why then
    (``timeout``, ``output_limit``, ``workspace_quota``, ``cancelled``)."""

    exit_code: int | None
    killed: str | None
    stdout: bytes
    stderr: bytes

    @property
    def signal(self) -> str | None:
        if self.killed is not None:
            return "SIGKILL"
        if self.exit_code is not None and self.exit_code > 128:
            with contextlib.suppress(ValueError):
                return signal.Signals(self.exit_code - 128).name
        return None


class _Sandbox:
    """The running launcher/bwrap and how to end it, from any thread."""

    def __init__(self, process: subprocess.Popen[bytes], cgroup: Cgroup | None) -> None:
        self.process = process
        self.cgroup = cgroup
        self.init_pid: int | None = None
        self.killed: str | None = None
        self._lock = threading.Lock()

    def kill(self, why: str) -> None:
        with self._lock:
            if self.killed is None:
                self.killed = why
            self._kill_all()

    def found_init(self, pid: int) -> None:
        with self._lock:
            self.init_pid = pid
            if self.killed is not None:  # a kill asked for before the pid was known
                self._kill_all()

    def _kill_all(self) -> None:
        for pid in (self.init_pid, self.process.pid):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()


def _data_pipe(data: bytes) -> int:
    """A pipe's read end holding ``data`` (small: it fits the pipe's buffer)."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


def _start(bwrap: str, workspace_fd: int, command: str, timeout_s: int,
           limits: CallLimits) -> tuple[_Sandbox, int]:
    try:
        program = filter_program()
    except SeccompUnavailable as exc:
        raise IsolationUnavailable(exc.reason) from None
    user = limits.user
    if user is not None:
        try:
            workspace_fd = user.bind_workspace(workspace_fd)
        except OSError as exc:
            raise LimitsUnavailable(
                f"the workspace could not be mapped to the sandbox uid {user.uid} "
                f"(idmapped mount: {exc.strerror})") from None
    status_read, status_write = os.pipe()
    passwd, group = account_files()
    data_fds = [_data_pipe(passwd), _data_pipe(group), _data_pipe(program)]
    argv = bwrap_argv(bwrap, workspace_fd=workspace_fd, status_fd=status_write,
                      passwd_fd=data_fds[0], group_fd=data_fds[1], seccomp_fd=data_fds[2],
                      command=command)
    if user is not None:
        argv = drop_argv(user, argv)
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", _LAUNCHER, "sh", *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(workspace_fd, status_write, *data_fds), env={},
        )
    except OSError as exc:
        os.close(status_read)
        raise IsolationUnavailable(f"the launcher could not start ({exc.strerror})") from None
    finally:
        for fd in (status_write, *data_fds):
            os.close(fd)
    cgroup = limits.cgroup
    sandbox = _Sandbox(process, cgroup)
    assert process.stdin is not None
    try:
        if cgroup is not None:
            cgroup.add(process.pid)
        apply_rlimits(process.pid, timeout_s)
        process.stdin.write(b"go\n")
        process.stdin.close()
    except OSError as exc:
        sandbox.kill("setup")
        process.wait()
        os.close(status_read)
        raise LimitsUnavailable(f"limits could not be applied ({exc.strerror})") from None
    return sandbox, status_read


def _statuses(buffer: bytearray) -> list[dict[str, object]]:
    """The complete JSON documents at the front of ``buffer`` (removed from it)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, object]] = []
    text = buffer.decode("utf-8", errors="replace")
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            break
        if isinstance(value, dict):
            found.append(value)
        position = end
    del buffer[:len(text[:position].encode("utf-8"))]
    return found


def _watch_quota(measure: Callable[[], WorkspaceUsage], sandbox: _Sandbox,
                 stop: threading.Event, quota_bytes: int | None = None) -> None:
    """Measure the workspace until ``stop`` is set or the sandbox is killed; kill it once the
    workspace passes a quota. The pause between walks grows with the entries walked
    (``PAUSE_PER_ENTRY_S``), so a big tree is not walked back to back."""
    while not stop.is_set() and sandbox.killed is None:
        try:
            usage = measure()
        except Exception:
            # A workspace that cannot be measured cannot be held to its quota: fail closed.
            sandbox.kill("workspace_quota")
            return
        if over_quota(usage, quota_bytes) is not None:
            sandbox.kill("workspace_quota")
            return
        stop.wait(max(INTERVAL_S, usage.entries * PAUSE_PER_ENTRY_S))


def _report_progress(report: Callable[[int, int], None], output: list[int],
                     stop: threading.Event) -> None:
    """``report(seconds, output bytes)`` every PROGRESS_EVERY_S until ``stop`` is set."""
    seconds = 0
    while not stop.wait(PROGRESS_EVERY_S):
        seconds += PROGRESS_EVERY_S
        report(seconds, output[0])


def run_sandboxed(
    bwrap: str,
    workspace_fd: int,
    command: str,
    *,
    timeout_s: int,
    on_cancel: Callable[[Callable[[], None]], Callable[[], None]],
    limits: CallLimits,
    measure: Callable[[], WorkspaceUsage] | None,
    quota_bytes: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Completed:
    """Run ``command`` with ``/bin/sh -c`` in the sandbox over ``workspace_fd``.

    ``measure()`` is the workspace's usage now (``quota.measure`` of the host's workspace),
    called from a thread of its own while the command runs; None: no quota (a probe over an
    empty directory). ``quota_bytes`` is the host's byte quota (None: ``quota.QUOTA_BYTES``).

    ``limits`` is how its processes are limited (``limits.limits_for_call``); the caller
    releases it once nothing of the sandbox may still write.

    ``on_cancel(callback)`` registers a callback for the call's cancellation and returns its
    remover (``context.cancellation.add_callback``). ``on_progress(seconds, output_bytes)``,
    when given, is called from a thread of its own every PROGRESS_EVERY_S while the command
    runs (never after this returns). Returns when every process of the
    sandbox has ended (or, past ``KILL_GRACE_S`` after a kill, when its output stays open).

    :raises IsolationUnavailable: bwrap could not build the sandbox; nothing ran.
    :raises LimitsUnavailable: a limit could not be applied; nothing ran.
    """
    sandbox, status_fd = _start(bwrap, workspace_fd, command, timeout_s, limits)
    process = sandbox.process
    assert process.stdout is not None and process.stderr is not None
    timer = threading.Timer(timeout_s, sandbox.kill, args=("timeout",))
    timer.daemon = True
    timer.start()
    remove = on_cancel(lambda: sandbox.kill("cancelled"))
    stop_watching = threading.Event()
    watcher = None
    if measure is not None:
        watcher = threading.Thread(target=_watch_quota,
                                   args=(measure, sandbox, stop_watching, quota_bytes),
                                   name="toolhost-sandbox-quota", daemon=True)
        watcher.start()
    #: The output bytes kept so far, read by the progress thread (one int: no lock needed).
    output = [0]
    reporter = None
    if on_progress is not None:
        reporter = threading.Thread(target=_report_progress,
                                    args=(on_progress, output, stop_watching),
                                    name="toolhost-sandbox-progress", daemon=True)
        reporter.start()
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    outputs = {out_fd: bytearray(), err_fd: bytearray()}
    status = bytearray()
    exit_code: int | None = None
    started = False
    selector = selectors.DefaultSelector()
    try:
        for fd in (*outputs, status_fd):
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        total = 0
        waited_after_kill = 0.0
        while selector.get_map():
            ready = selector.select(timeout=0.25)
            if not ready:
                if sandbox.killed is not None:
                    waited_after_kill += 0.25
                    if waited_after_kill >= KILL_GRACE_S:
                        break  # killed, yet something holds the pipes open: stop reading
                continue
            for key, _ in ready:
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, _READ)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(fd)
                    continue
                if fd == status_fd:
                    status += chunk
                    for document in _statuses(status):
                        if isinstance(document.get("child-pid"), int):
                            started = True
                            sandbox.found_init(int(str(document["child-pid"])))
                        if isinstance(document.get("exit-code"), int):
                            exit_code = int(str(document["exit-code"]))
                    continue
                # Exactly OUTPUT_LIMIT bytes and then the end is not truncated; one more is.
                room = OUTPUT_LIMIT - total
                outputs[fd] += chunk[:room]
                total += min(len(chunk), room)
                output[0] = total
                if len(chunk) > room:
                    sandbox.kill("output_limit")  # then drain what is left, keeping nothing
    finally:
        selector.close()
        timer.cancel()
        remove()
        stop_watching.set()
        if watcher is not None:
            watcher.join()  # before the sandbox_root block ends: nothing walks after it
        if reporter is not None:
            reporter.join()  # no progress after the call's result
        if sandbox.killed is None and exit_code is None:
            sandbox.kill("setup")  # bwrap failed before the command: nothing may linger
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=KILL_GRACE_S)
        if limits.cgroup is not None:
            limits.cgroup.kill()
        os.close(status_fd)
        process.stdout.close()
        process.stderr.close()
    stdout, stderr = outputs[out_fd], outputs[err_fd]
    if sandbox.killed == "setup" or (sandbox.killed is None and exit_code is None):
        first = bytes(stderr).decode("utf-8", errors="replace").strip().splitlines()
        reason = first[0] if first else f"bwrap ended with status {process.returncode}"
        if not started:
            reason = f"{reason} (the sandbox never started)"
        raise IsolationUnavailable(reason)
    killed = sandbox.killed
    return Completed(exit_code=None if killed else exit_code, killed=killed,
                     stdout=bytes(stdout), stderr=bytes(stderr))
