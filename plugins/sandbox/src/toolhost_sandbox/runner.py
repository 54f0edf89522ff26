"""Run one command in the sandbox: start it under its limits, read its output while it
streams, and kill the whole sandbox on timeout, cancellation or too much output.

bwrap is started in the call's cgroup, before it makes the sandbox's namespaces (so its
cgroup namespace is rooted there, and the call's cgroup's name is never shown to it): born
there where the calling thread can step into it for that moment (v1:
``cgroups.Cgroup.entered``; no migration, whose RCU grace period cost 10-12 ms a call), else
execed by a ``/bin/sh`` launcher added to it first (v2, whose cgroups take no single thread;
a thread placed elsewhere). bwrap is held at a gate (``_Gate``): it reads its seccomp filter,
the last step of its setup before it forks the command, from a pipe this process writes only
once the sandbox's init (bwrap's ``child-pid``) is under the call's resource limits, so the
command and everything it starts inherit them; a filter never written reaches bwrap empty,
and bwrap cannot load it: the command never runs unlimited (amending docs/decisions.md D105:
bwrap's own setup runs before the rlimits).
No ``preexec_fn`` (unsafe in a threaded process). Under a sandbox uid (``limits``) the limits
must be set while the process is still this process's uid (changing another uid's limits
takes CAP_SYS_RESOURCE, which a container's root often lacks): there a ``/bin/sh`` launcher
waits on a line of its stdin while this process sets its limits, then execs
``sandbox_user.drop_argv``, which drops to that uid and execs bwrap; bwrap then binds the
workspace's idmapped mount instead of the workspace itself.

While it runs, one loop on the caller's thread reads the output and acts on the ticks of a
timer fd (``ticker``; no thread per call, and no clock read: a plugin reads none of its own):
the timeout, progress every ``PROGRESS_EVERY_S`` (the seconds gone and the output bytes read
so far), and the workspace's measurements (``quota``, through the host's
``SandboxWorkspace.usage``), which kill the sandbox once it passes its quota.

Killing: bwrap's JSON status names the host pid of the sandbox's pid-namespace init;
SIGKILL to it ends every process in the namespace, one that called ``setsid`` included (a
process-group kill does not). bwrap itself is killed too, and the cgroup, where there is one,
is emptied as well. Before its pid is known the init may exist already, waiting on bwrap
(``--die-with-parent`` is not yet armed): bwrap is stopped and its children killed first
(``_Sandbox._kill_unnamed``), for where no cgroup holds the init (a host with none).

The workspace is measured once before the sandbox starts: over its quota then, nothing is
started (``Completed.killed`` ``workspace_quota``; ``workspace_unmeasurable`` when it cannot be
measured), and that walk is not counted in the command's timeout. Later walks run on the
loop, between ticks: a timeout may be late by one walk (bounded by the quota's entry limit).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from toolhost import WorkspaceUsage
from toolhost_sandbox.cgroups import StepOutFailed
from toolhost_sandbox.isolation import IsolationUnavailable, account_files, bwrap_argv
from toolhost_sandbox.limits import (
    OUTPUT_LIMIT,
    CallLimits,
    Cgroup,
    LimitsUnavailable,
    apply_rlimits,
)
from toolhost_sandbox.quota import INCOMPLETE_IN_A_ROW, INTERVAL_S, PAUSE_PER_ENTRY_S, over_quota
from toolhost_sandbox.sandbox_user import drop_argv
from toolhost_sandbox.seccomp import SeccompUnavailable, filter_program
from toolhost_sandbox.ticker import Ticker

__all__ = ["KILL_GRACE_S", "OUTPUT_LIMIT", "PROGRESS_EVERY_S", "TICK_S", "UNMEASURABLE",
           "Completed", "run_sandboxed"]

#: Why a sandbox was killed (or never started) when the workspace could not be measured: the
#: host's walk met a directory it may not list (a command's ``chmod 300 d`` on a host that is
#: not root), or could not walk at all, or ``quota.INCOMPLETE_IN_A_ROW`` walks in a row missed
#: something (directories kept moving under them). Fail closed: the quota cannot be held
#: (D135).
UNMEASURABLE = "workspace_unmeasurable"
#: How long a killed sandbox has to close its output before the reader stops waiting.
KILL_GRACE_S = 5.0
#: How often a running command's progress is reported, in seconds.
PROGRESS_EVERY_S = 1
#: The loop's tick: the timeout, progress and the kill's grace are whole numbers of it, and the
#: workspace is measured at most once a tick (``quota.INTERVAL_S``).
TICK_S = INTERVAL_S
_TICKS_PER_SECOND = round(1 / TICK_S)
_READ = 64 * 1024
_LAUNCHER = 'read _ && exec "$@" </dev/null'


@dataclass(frozen=True, slots=True)
class Completed:
    """How the command ended. ``exit_code`` is the shell's status (128+N when a signal N
    ended it) and None when the host killed the sandbox; ``killed`` says why then
    (``timeout``, ``output_limit``, ``workspace_quota``, ``workspace_unmeasurable``,
    ``cancelled``). ``started`` is False when the workspace failed its quota (``killed``:
    which way) before the start: nothing ran, so nothing was killed either."""

    exit_code: int | None
    killed: str | None
    stdout: bytes
    stderr: bytes
    started: bool = True

    @property
    def signal(self) -> str | None:
        if not self.started:
            return None
        if self.killed is not None:
            return "SIGKILL"
        if self.exit_code is not None and self.exit_code > 128:
            with contextlib.suppress(ValueError):
                return signal.Signals(self.exit_code - 128).name
        return None


class _Sandbox:
    """The running bwrap (or its launcher) and how to end it, from any thread."""

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
        if self.init_pid is None:
            self._kill_unnamed()
        for pid in (self.init_pid, self.process.pid):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    def _kill_unnamed(self) -> None:
        """Before bwrap has named its init, the init may exist already (it waits for bwrap
        to write its uid maps and child-pid): bwrap alone killed, it would wait for ever, in
        no cgroup of the call's where it is added only at child-pid (v2), or where there is
        none. So bwrap is stopped (a signal pending, it can fork no more: a fork that was
        under way either completed, its child listed, or is refused), its children are
        killed, the init's pid namespace with it, and then bwrap (``_kill_all``)."""
        pid = self.process.pid
        if self.process.returncode is not None:
            return  # reaped: the pid may be another process's now
        try:
            os.kill(pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            return
        for child in _children(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    """``pid``'s children: its one thread's ``children`` (bwrap has no other thread), else a
    scan of every process's parent."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as file:
            return [int(word) for word in file.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as file:
                    stat = file.read()
            except OSError:
                continue  # gone meanwhile
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 1 and int(fields[1]) == pid:
                found.append(int(name))
    return found


def _data_pipe(data: bytes) -> int:
    """A pipe's read end holding ``data`` (small: it fits the pipe's buffer)."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


class _Gate:
    """Holds the command back until the sandbox's init is under the call's limits.

    bwrap reads its seccomp filter from ``read_fd`` as the last step of its setup, before it
    forks the command; this process writes the filter only once ``let_go`` has set the
    init's (bwrap's ``child-pid``) resource limits, so everything the command starts
    inherits them (the init is in the call's cgroup from its birth: ``_spawn``). A filter
    never written (the limits failed, or this process died) reaches bwrap as an empty one,
    which it cannot load: it exits without running the command. ``error`` is why the limits
    failed, if they did.
    """

    def __init__(self, program: bytes, timeout_s: int) -> None:
        self.read_fd, self._write_fd = os.pipe()
        self._program = program
        self._timeout_s = timeout_s
        self.error: LimitsUnavailable | None = None

    def let_go(self, sandbox: _Sandbox, init_pid: int) -> None:
        try:
            apply_rlimits(init_pid, self._timeout_s)
            os.write(self._write_fd, self._program)  # one write: a pipe takes it whole
        except OSError as exc:
            sandbox.kill("setup")
            if sandbox.killed == "setup":  # not a cancellation that ended the init meanwhile
                self.error = LimitsUnavailable(f"limits could not be applied ({exc.strerror})")
        finally:
            self.close()

    def close(self) -> None:
        if self._write_fd >= 0:
            fd, self._write_fd = self._write_fd, -1
            os.close(fd)


def _born_in(cgroup: Cgroup | None, start: Callable[[], subprocess.Popen[bytes]],
             what: str) -> subprocess.Popen[bytes] | None:
    """``start()``'s process born in ``cgroup`` where this thread can step into it for the
    moment (``Cgroup.entered``: v1; a move waits for an RCU grace period), or with no cgroup;
    None where the thread cannot step in (v2: the caller adds a launcher to it instead).

    :raises IsolationUnavailable: ``what`` could not start.
    :raises LimitsUnavailable: this thread could not step back out of the cgroup (the process,
        held at its gate, is killed and reaped).
    """
    process = None
    try:
        with cgroup.entered() if cgroup is not None else contextlib.nullcontext(False) as inside:
            if inside or cgroup is None:
                process = start()
    except StepOutFailed as exc:
        if process is not None:
            _Sandbox(process, cgroup).kill("setup")  # held at its gate: it never ran the command
            _reap(process)
        raise LimitsUnavailable(f"the call's cgroup could not be left ({exc.strerror})") from None
    except OSError as exc:
        raise IsolationUnavailable(f"{what} could not start ({exc.strerror})") from None
    return process


def _spawn(argv: list[str], pass_fds: tuple[int, ...],
           cgroup: Cgroup | None) -> subprocess.Popen[bytes]:
    """bwrap started, in ``cgroup`` from before it makes the sandbox's namespaces: born there
    (``_born_in``), else execed by a launcher added to it first (v2; a thread placed
    elsewhere). Either way the sandbox's cgroup namespace is rooted at the call's cgroup,
    whose name (this process's pid, a count of its calls) it never sees, and its init is in
    the cgroup from its birth (a kill that comes before its pid is known ends it with the
    cgroup).

    :raises IsolationUnavailable: bwrap could not start.
    :raises LimitsUnavailable: this thread could not step back out of the cgroup, or the
        launcher could not be added to it.
    """
    process = _born_in(cgroup, lambda: subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=pass_fds, env={}), "bwrap")
    if process is not None:
        return process
    assert cgroup is not None
    try:
        process = _launcher(argv, pass_fds)
    except OSError as exc:
        raise IsolationUnavailable(f"the launcher could not start ({exc.strerror})") from None
    assert process.stdin is not None
    try:
        cgroup.add(process.pid)
        process.stdin.write(b"go\n")
        process.stdin.close()
    except OSError as exc:
        _Sandbox(process, cgroup).kill("setup")
        _reap(process)
        raise LimitsUnavailable(
            f"the launcher could not be added to the call's cgroup ({exc.strerror})") from None
    return process


def _launcher(argv: list[str], pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """``_LAUNCHER`` holding ``argv`` until it reads ``go`` on its stdin."""
    return subprocess.Popen(["/bin/sh", "-c", _LAUNCHER, "sh", *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=pass_fds,
                            env={})


def _reap(process: subprocess.Popen[bytes]) -> None:
    """A killed process waited for, its pipes closed."""
    process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _filter() -> bytes:
    try:
        return filter_program()
    except SeccompUnavailable as exc:
        raise IsolationUnavailable(exc.reason) from None


def _start(bwrap: str, workspace_fd: int, command: str, timeout_s: int,
           limits: CallLimits) -> tuple[_Sandbox, int, _Gate | None]:
    """The sandbox started: bwrap itself, held at its gate (under a sandbox uid: the launcher,
    limited already); the read end of its status pipe; the gate to open at its ``child-pid``.
    """
    if limits.user is not None:
        sandbox, status_read = _start_as_user(bwrap, workspace_fd, command, timeout_s, limits)
        return sandbox, status_read, None
    gate = _Gate(_filter(), timeout_s)
    status_read, status_write = os.pipe()
    passwd, group = account_files()
    data_fds = [_data_pipe(passwd), _data_pipe(group), gate.read_fd]
    argv = bwrap_argv(bwrap, workspace_fd=workspace_fd, status_fd=status_write,
                      passwd_fd=data_fds[0], group_fd=data_fds[1], seccomp_fd=gate.read_fd,
                      command=command)
    try:
        process = _spawn(argv, (workspace_fd, status_write, *data_fds), limits.cgroup)
    except BaseException:
        os.close(status_read)
        gate.close()
        raise
    finally:
        for fd in (status_write, *data_fds):
            os.close(fd)
    return _Sandbox(process, limits.cgroup), status_read, gate


def _start_as_user(bwrap: str, workspace_fd: int, command: str, timeout_s: int,
                   limits: CallLimits) -> tuple[_Sandbox, int]:
    """Under a sandbox uid: the launcher, limited while it is still this process's uid, then
    dropped to the sandbox's (``sandbox_user.drop_argv``), execs bwrap."""
    program = _filter()
    user = limits.user
    assert user is not None
    try:
        workspace_fd = user.bind_workspace(workspace_fd)
    except OSError as exc:
        raise LimitsUnavailable(
            f"the workspace could not be mapped to the sandbox uid {user.uid} "
            f"(idmapped mount: {exc.strerror})") from None
    status_read, status_write = os.pipe()
    passwd, group = account_files()
    data_fds = [_data_pipe(passwd), _data_pipe(group), _data_pipe(program)]
    argv = drop_argv(user, bwrap_argv(
        bwrap, workspace_fd=workspace_fd, status_fd=status_write, passwd_fd=data_fds[0],
        group_fd=data_fds[1], seccomp_fd=data_fds[2], command=command))
    cgroup = limits.cgroup
    pass_fds = (workspace_fd, status_write, *data_fds)
    try:
        # Born in the call's cgroup where this thread can step in, else added to it below,
        # before it execs bwrap.
        born = _born_in(cgroup, lambda: _launcher(argv, pass_fds), "the launcher")
        process = born if born is not None else _launcher(argv, pass_fds)
    except OSError as exc:
        os.close(status_read)
        raise IsolationUnavailable(f"the launcher could not start ({exc.strerror})") from None
    except (IsolationUnavailable, LimitsUnavailable):
        os.close(status_read)
        raise
    finally:
        for fd in (status_write, *data_fds):
            os.close(fd)
    sandbox = _Sandbox(process, cgroup)
    assert process.stdin is not None
    try:
        if cgroup is not None and born is None:
            cgroup.add(process.pid)
        apply_rlimits(process.pid, timeout_s)
        process.stdin.write(b"go\n")
        process.stdin.close()
    except OSError as exc:
        sandbox.kill("setup")
        _reap(process)
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


class _Schedule:
    """What the loop does as the ticker's ticks pass (``TICK_S`` each): the timeout, progress
    once a second, the workspace's measurements, and how long a killed sandbox may keep its
    pipes open. Ticks are counted, never a clock read."""

    def __init__(self, sandbox: _Sandbox, timeout_s: int,
                 measure: Callable[[], WorkspaceUsage] | None, quota_bytes: int | None,
                 on_progress: Callable[[int, int], None] | None,
                 first: WorkspaceUsage | None) -> None:
        self._sandbox = sandbox
        self._timeout_ticks = timeout_s * _TICKS_PER_SECOND
        self._progress_ticks = PROGRESS_EVERY_S * _TICKS_PER_SECOND
        self._measure = measure
        self._quota_bytes = quota_bytes
        self._on_progress = on_progress
        self._ticks = 0
        # The first measurement was taken before the start (``_first_measurement``).
        self._next_measure = 0 if first is None else _pause_ticks(first)
        # Incomplete measurements since the last complete one.
        self._incomplete = 0 if first is None or first.complete else 1
        self._reported = 0
        self._killed_at: int | None = None

    def measure_quota(self, passed: Callable[[], int]) -> None:
        """Measure the workspace, and kill the sandbox once it passes a quota, or once
        ``INCOMPLETE_IN_A_ROW`` measurements in a row were incomplete (the quota cannot be
        held where every walk misses something). The next measurement waits longer for a big
        tree (``PAUSE_PER_ENTRY_S``), counted from when this one ended (``passed``: the
        ticks gone since the last count)."""
        if self._measure is None or self._sandbox.killed is not None:
            return
        try:
            usage = self._measure()
        except Exception:
            # A workspace that cannot be measured cannot be held to its quota: fail closed.
            self._sandbox.kill(UNMEASURABLE)
            return
        if over_quota(usage, self._quota_bytes) is not None:
            self._sandbox.kill("workspace_quota")
            return
        self._incomplete = 0 if usage.complete else self._incomplete + 1
        if self._incomplete >= INCOMPLETE_IN_A_ROW:
            self._sandbox.kill(UNMEASURABLE)
            return
        self._ticks += passed()
        self._next_measure = self._ticks + _pause_ticks(usage)

    def tick(self, count: int, output_bytes: int, passed: Callable[[], int]) -> bool:
        """``count`` more ticks went by; False once a killed sandbox has had its grace."""
        self._ticks += count
        if self._ticks >= self._timeout_ticks:
            self._sandbox.kill("timeout")
        if self._sandbox.killed is not None:
            if self._killed_at is None:
                self._killed_at = self._ticks
            # Killed, yet something holds the pipes open: stop reading.
            return self._ticks - self._killed_at < KILL_GRACE_S * _TICKS_PER_SECOND
        reports = self._ticks // self._progress_ticks
        if self._on_progress is not None and reports > self._reported:
            self._reported = reports
            self._on_progress(reports * PROGRESS_EVERY_S, output_bytes)
        if self._ticks >= self._next_measure:
            self.measure_quota(passed)
        return True


def _pause_ticks(usage: WorkspaceUsage) -> int:
    """The ticks to wait after a measurement before the next: longer for a big tree."""
    pause = max(INTERVAL_S, usage.entries * PAUSE_PER_ENTRY_S)
    return max(1, math.ceil(pause / TICK_S))


def _first_measurement(measure: Callable[[], WorkspaceUsage] | None,
                       quota_bytes: int | None) -> WorkspaceUsage | str | None:
    """The workspace measured before the sandbox starts: its usage; or why no sandbox may
    start (``workspace_quota``: over its quota already; ``workspace_unmeasurable``: it cannot
    be measured, fail closed); None when there is no quota.

    Before the start, a workspace left over its quota (by an earlier call's write between two
    measurements) starts no sandbox at all, rather than killing one at a moment its size sets
    (its walk's length); and the walk is not counted against the command's timeout."""
    if measure is None:
        return None
    try:
        usage = measure()
    except Exception:
        return UNMEASURABLE
    return "workspace_quota" if over_quota(usage, quota_bytes) is not None else usage


class _Streams:
    """The command's stdout and stderr as they are read (OUTPUT_LIMIT across both), and
    bwrap's JSON status: the sandbox's pid, then the exit code."""

    def __init__(self, sandbox: _Sandbox, out_fd: int, err_fd: int, gate: _Gate | None) -> None:
        self._sandbox = sandbox
        self._gate = gate
        self.outputs = {out_fd: bytearray(), err_fd: bytearray()}
        self.total = 0
        self.exit_code: int | None = None
        self.started = False
        self._status = bytearray()

    def output(self, fd: int, chunk: bytes) -> None:
        # Exactly OUTPUT_LIMIT bytes and then the end is not truncated; one more is.
        room = OUTPUT_LIMIT - self.total
        self.outputs[fd] += chunk[:room]
        self.total += min(len(chunk), room)
        if len(chunk) > room:
            self._sandbox.kill("output_limit")  # then drain what is left, keeping nothing

    def status(self, chunk: bytes) -> None:
        self._status += chunk
        for document in _statuses(self._status):
            if isinstance(document.get("child-pid"), int):
                self.started = True
                init_pid = int(str(document["child-pid"]))
                self._sandbox.found_init(init_pid)
                if self._gate is not None and self._sandbox.killed is None:
                    self._gate.let_go(self._sandbox, init_pid)
            if isinstance(document.get("exit-code"), int):
                self.exit_code = int(str(document["exit-code"]))


def _read(fd: int) -> bytes | None:
    """What the pipe holds now; b"" at its end, None when nothing is there yet."""
    try:
        return os.read(fd, _READ)
    except BlockingIOError:
        return None


def _pump(streams: _Streams, status_fd: int, ticker: Ticker, schedule: _Schedule) -> None:
    """Read the pipes until each has ended (or a killed sandbox's grace is over), acting on
    the ticks in between."""
    pipes = {*streams.outputs, status_fd}
    with selectors.DefaultSelector() as selector:
        for fd in (*pipes, ticker.fileno()):
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while pipes:
            for key, _ in selector.select():
                fd = int(key.fd)
                if fd == ticker.fileno():
                    if not schedule.tick(ticker.passed(), streams.total, ticker.passed):
                        return
                    continue
                chunk = _read(fd)
                if chunk is None:
                    continue
                if not chunk:
                    selector.unregister(fd)
                    pipes.discard(fd)
                elif fd == status_fd:
                    streams.status(chunk)
                else:
                    streams.output(fd, chunk)


def _ticker() -> Ticker:
    try:
        return Ticker(TICK_S)
    except OSError as exc:
        raise IsolationUnavailable(f"no timer for the call ({exc.strerror})") from None


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
    called before the sandbox starts (over its quota then, none starts: ``killed`` is
    ``workspace_quota``, or ``workspace_unmeasurable`` when ``measure`` raised; that walk is
    not counted in ``timeout_s``) and then every ``INTERVAL_S`` or more while the command runs
    (raising then kills the sandbox as ``workspace_unmeasurable``); None: no quota (a probe
    over an empty directory). ``quota_bytes`` is the host's byte quota (None:
    ``quota.QUOTA_BYTES``).

    ``limits`` is how its processes are limited (``limits.limits_for_call``); the caller
    releases it once nothing of the sandbox may still write.

    ``on_cancel(callback)`` registers a callback for the call's cancellation and returns its
    remover (``context.cancellation.add_callback``). ``on_progress(seconds, output_bytes)``,
    when given, is called every PROGRESS_EVERY_S while the command runs (never after this
    returns). All of it runs on the caller's thread, but for the cancellation's callback.
    Returns when every process of the sandbox has ended (or, past ``KILL_GRACE_S`` after a
    kill, when its output stays open).

    :raises IsolationUnavailable: bwrap could not build the sandbox; nothing ran.
    :raises LimitsUnavailable: a limit could not be applied; nothing ran.
    """
    first = _first_measurement(measure, quota_bytes)
    if isinstance(first, str):
        return Completed(exit_code=None, killed=first, stdout=b"", stderr=b"", started=False)
    ticker = _ticker()  # the timeout counts from here: after the first measurement
    try:
        sandbox, status_fd, gate = _start(bwrap, workspace_fd, command, timeout_s, limits)
    except BaseException:
        ticker.close()
        raise
    process = sandbox.process
    assert process.stdout is not None and process.stderr is not None
    remove = on_cancel(lambda: sandbox.kill("cancelled"))
    streams = _Streams(sandbox, process.stdout.fileno(), process.stderr.fileno(), gate)
    schedule = _Schedule(sandbox, timeout_s, measure, quota_bytes, on_progress, first)
    try:
        _pump(streams, status_fd, ticker, schedule)
    finally:
        ticker.close()
        remove()
        if sandbox.killed is None and streams.exit_code is None:
            sandbox.kill("setup")  # bwrap failed before the command: nothing may linger
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=KILL_GRACE_S)
        if limits.cgroup is not None:
            limits.cgroup.kill()
        if gate is not None:
            gate.close()  # after the kill: an unopened gate must not let a command go
        os.close(status_fd)
        process.stdout.close()
        process.stderr.close()
    if gate is not None and gate.error is not None:
        raise gate.error
    return _completed(sandbox, streams, process.returncode)


def _completed(sandbox: _Sandbox, streams: _Streams, returncode: int | None) -> Completed:
    """How it ended; a sandbox that never ran the command is bwrap's failure, which raises.

    :raises IsolationUnavailable: bwrap could not build the sandbox.
    """
    stdout, stderr = streams.outputs.values()
    if sandbox.killed == "setup" or (sandbox.killed is None and streams.exit_code is None):
        first = bytes(stderr).decode("utf-8", errors="replace").strip().splitlines()
        reason = first[0] if first else f"bwrap ended with status {returncode}"
        if not streams.started:
            reason = f"{reason} (the sandbox never started)"
        raise IsolationUnavailable(reason)
    killed = sandbox.killed
    return Completed(exit_code=None if killed else streams.exit_code, killed=killed,
                     stdout=bytes(stdout), stderr=bytes(stderr))
