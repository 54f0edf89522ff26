"""The CLI under stress: a signal during ``call`` or ``artifacts get -o``, an output stream
that fails, and hostile values on the command line and in the settings. Each is one line on
stderr and its exit code, never a traceback, and never a row left ``running``."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from installed import install_fake_plugin

from toolhost.testing import run_toolhost, toolhost_command

SLOW = '''
import os, sys
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

SPEC = ToolSpec(
    name="slowx.wait", version="1.0.0", description="Waits until cancelled.",
    input_schema={"type": "object", "additionalProperties": False},
    output_schema={"type": "object", "additionalProperties": False},
    kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.WORKSPACE_WRITE,
    risk=Risk.LOW, idempotency=Idempotency.IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(), timeout_s=120, maximum_output_bytes=4096, allow_parallel=False,
    deprecated=False,
)

def wait(arguments, context):
    with open(os.environ["SLOWX_LOG"], "a") as f:
        f.write("ran\\n")
    sys.stderr.write("started\\n")
    sys.stderr.flush()
    context.cancellation.wait(60)
    return ToolOutput(structured={}, content="done")

@hookimpl
def toolhost_domains():
    return [Domain("slowx")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=wait)]
'''


def child_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """What ``run_toolhost`` gives a child, for a child this module starts itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data_dir), TOOLHOST_CONFIG="", **settings)
    return env


def slowx_env(site: Path, log: Path, data: Path) -> dict[str, str]:
    """A child's environment with the ``slowx.wait`` plugin (SLOW) installed in ``site``,
    each run of it a line in ``log``."""
    install_fake_plugin(site, "fake-slowx", "fake_slowx", SLOW)
    return child_env(data, TOOLHOST_PLUGINS="fake-slowx", SLOWX_LOG=str(log),
                     PYTHONPATH=os.pathsep.join([str(site), *filter(None, [
                         os.environ.get("PYTHONPATH")])]))


def started_slowx(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``toolhost ARGS``, once ``slowx.wait`` is executing in it."""

    def default_signals() -> None:  # as a terminal's process has them, whoever runs pytest
        for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(each, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-m", "toolhost._cli", *args],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=default_signals)
    assert proc.stderr is not None
    before = ""  # what the command logged before the tool started (recover's warning)
    while (line := proc.stderr.readline()) != "started\n":
        before += line
        if not line:  # the tool never started: the command failed before
            proc.kill()
            raise AssertionError(before + proc.communicate()[1])
    return proc


def stopped(proc: subprocess.Popen[str], signum: int | None) -> tuple[str, str]:
    """Its stdout and stderr, once ``signum`` (None: SIGKILL) stopped it."""
    try:
        if signum is None:
            proc.kill()
        else:
            proc.send_signal(signum)
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The command's one stderr line, once its exit code is ``code`` and nothing raised."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# ------------------------------------------------------------------ 1: a signal during call


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_call_records_it_cancelled_and_recover_does_not_run_it_again(
    tmp_path: Path, signum: signal.Signals,
) -> None:
    # Regression: Ctrl-C left the row `running` (exit 130) and `recover` then ran the
    # idempotent call the operator had cancelled; SIGTERM and SIGHUP killed the process
    # with the row `running` too.
    site, log, data = tmp_path / "site", tmp_path / "ran.log", tmp_path / "d"
    env = slowx_env(site, log, data)

    proc = started_slowx(["call", "slowx.wait"], env)
    stdout, stderr = stopped(proc, signum)
    assert proc.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    assert stdout == "The run was cancelled before the tool finished.\n"
    with sqlite3.connect(data / "toolhost.sqlite3") as db:
        rows = db.execute("SELECT state, reason_code FROM tool_invocations").fetchall()
    db.close()
    assert rows == [("failed", "tool.cancelled.run_cancelled")]
    recovered = run_toolhost("recover", data_dir=data, plugins="fake-slowx", path=[site],
                             env={"SLOWX_LOG": str(log)})
    assert recovered.stdout == "nothing to recover: no invocation is left running\n"
    assert log.read_text() == "ran\n"  # once: the cancelled call never ran again


def _rows(data: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(data / "toolhost.sqlite3") as db:
        rows = db.execute("SELECT state, reason_code FROM tool_invocations "
                          "ORDER BY created_at").fetchall()
    db.close()
    return rows


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_recovers_rerun_records_it_cancelled_and_the_next_does_not_run_it(
    tmp_path: Path, signum: signal.Signals,
) -> None:
    # Regression: Ctrl-C while `recover` re-ran an idempotent call left its row `running`,
    # now owned by the recover process (SIGTERM and SIGHUP killed it where it stood), so the
    # next `recover` ran the call the operator had stopped yet again.
    site, log, data = tmp_path / "site", tmp_path / "ran.log", tmp_path / "d"
    env = slowx_env(site, log, data)
    for _ in range(2):
        stopped(started_slowx(["call", "slowx.wait"], env), None)  # killed mid-call
    assert _rows(data) == [("running", None), ("running", None)]
    proc = started_slowx(["recover"], env)  # the first re-run is executing now
    stdout, stderr = stopped(proc, signum)
    assert (proc.returncode, stderr) == (128 + signum, "")
    # One row re-run; the killed calls' own runs are ended too, a line each before it.
    rows = [line for line in stdout.splitlines() if not line.startswith("ended run ")]
    assert stdout.endswith(" so run again here: failed\n") and len(rows) == 1, stdout
    # The second row is not taken once the operator stopped recover: the next one's.
    assert _rows(data) == [("failed", "tool.cancelled.run_cancelled"), ("running", None)]
    recovered = run_toolhost("recover", "--no-rerun", data_dir=data, plugins="fake-slowx",
                             path=[site], env={"SLOWX_LOG": str(log)})
    assert recovered.stdout.count("\n") == 1 and " failed: " in recovered.stdout
    assert _rows(data)[0] == ("failed", "tool.cancelled.run_cancelled")
    assert log.read_text() == "ran\n" * 3  # the calls, and the stopped re-run: no fourth


# ------------------------------------------------------------------ 2: output that fails


def test_a_reader_that_went_away_is_a_quiet_exit_141(tmp_path: Path) -> None:
    # Regression: `toolhost tools | head -1` was a BrokenPipeError traceback.
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([*toolhost_command(), "tools"], stdout=write,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=child_env(tmp_path / "d"), timeout=120, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_an_artifact_to_a_reader_that_went_away_is_the_same_quiet_141(tmp_path: Path) -> None:
    # `artifacts get ID -o - | head -c 10` kept its own line and 1 (the second review).
    content = tmp_path / "big.bin"
    content.write_bytes(os.urandom(3 * 1024 * 1024))
    uploaded = run_toolhost("artifacts", "upload", str(content), "--conversation", "c1",
                            data_dir=tmp_path / "d")
    assert uploaded.returncode == 0, uploaded.stderr
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([*toolhost_command(), "artifacts", "get",
                               uploaded.stdout.strip(), "-o", "-"], stdout=write,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=child_env(tmp_path / "d"), timeout=120, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def _output_of(args: list[str], data_dir: Path, *, terminal: bool) -> bytes:
    """What ``toolhost ARGS`` writes on its stdout: a terminal (a pty), or a pipe."""
    import pty

    env = child_env(data_dir, TOOLHOST_PLUGINS="toolhost-workspace")
    if not terminal:
        return subprocess.run([*toolhost_command(), *args], capture_output=True, env=env,
                              timeout=120, check=True).stdout
    controller, device = pty.openpty()
    try:
        process = subprocess.Popen([*toolhost_command(), *args], stdout=device,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    finally:
        os.close(device)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(controller)
        process.wait(60)
    assert process.returncode == 0
    return b"".join(chunks).replace(b"\r\n", b"\n")


def test_content_on_a_terminal_cannot_move_its_cursor_or_reorder_its_line(
        tmp_path: Path) -> None:
    """A sandbox command's output, or a file's text, with C1 controls and a direction mark
    reached the terminal as itself from `call` and `approve` (the sandbox review); `show`
    escaped them. On a terminal they are escaped; a pipe gets the content as it is."""
    text = "A\u009b2J B \u202e C\tD\nline 2"
    written = run_toolhost("call", "workspace.write_text", "--run", "r1", "--args",
                           json.dumps({"path": "t.txt", "content": text}),
                           data_dir=tmp_path / "d", plugins="toolhost-workspace")
    assert written.returncode == 0, written.stderr
    read = ["call", "workspace.read_text", "--run", "r1", "--args", '{"path": "t.txt"}']
    assert _output_of(read, tmp_path / "d", terminal=True) == (
        b"A\\u009b2J B \\u202e C\tD\nline 2\n")
    assert _output_of(read, tmp_path / "d", terminal=False) == (text + "\n").encode()


EMBEDDED = """
import gc, sys
from toolhost._cli.main import main
code = main(["tools"])
sys.stdout = sys.__stdout__  # what a program calling main() may do after it
gc.collect()
print("after", code)
"""


def test_a_program_calling_main_keeps_its_stdout(tmp_path: Path) -> None:
    # The wrapper main put over stdout closed fd 1 when collected (the second review).
    done = subprocess.run([sys.executable, "-c", EMBEDDED], capture_output=True, text=True,
                          env=child_env(tmp_path / "d", TOOLHOST_PLUGINS="toolhost-math"),
                          timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.endswith("after 0\n")


@pytest.mark.parametrize("args", [["tools"], ["--help"], ["--version"], ["call", "--help"],
                                  ["call", "math.calculate", "--args", '{"expression": "6*7"}']])
def test_a_full_disk_under_standard_output_is_one_line_and_exit_1(
    args: list[str], tmp_path: Path,
) -> None:
    # Regression: `> /dev/full` was an OSError traceback, and `--help > /dev/full` exit 0.
    full = run_toolhost(*args, data_dir=tmp_path / "d", plugins="toolhost-math",
                        command=["sh", "-c", 'exec "$@" >/dev/full', "sh", *toolhost_command()])
    assert one_line(full, 1) == "toolhost: cannot write standard output: No space left on device"


def test_output_its_encoding_cannot_carry_is_escaped_not_a_traceback(tmp_path: Path) -> None:
    # Regression: PYTHONIOENCODING=ascii raised UnicodeEncodeError after the row was written.
    # First-party tools only: the example plugin is not installed where the host's tests run.
    written = run_toolhost("call", "workspace.write_text", "--run", "r1", "--args",
                           '{"path": "a.txt", "content": "Zoë"}', data_dir=tmp_path / "d",
                           plugins="toolhost-workspace")
    assert written.returncode == 0, written.stderr
    called = run_toolhost("call", "workspace.read_text", "--run", "r1", "--args",
                          '{"path": "a.txt"}', data_dir=tmp_path / "d",
                          plugins="toolhost-workspace", env={"PYTHONIOENCODING": "ascii"})
    assert (called.returncode, called.stdout, called.stderr) == (0, "Zo\\xeb\n", "")


# ------------------------------------------------------------------ 3: hostile JSON and numbers


DEEP = "[" * 60000 + "]" * 60000


@pytest.mark.parametrize(("arguments", "line"), [
    (DEEP, "toolhost: --args is nested deeper than 256 levels"),
    ('{"expression": "1", "x": ' + "[" * 985 + "]" * 985 + "}",
     "toolhost: --args is nested deeper than 256 levels"),
    ('{"expression": "1", "x": ' + "[" * 256 + "]" * 256 + "}",
     "toolhost: --args is nested deeper than 256 levels"),
    ('{"expression": ' + "9" * 5000 + "}",
     "toolhost: --args holds an integer of more than 4300 digits"),
    ('{"expression": "ab', "toolhost: --args is not valid JSON (Unterminated string starting "
                           "at position 15)"),
])
def test_hostile_args_are_one_line_and_exit_2(tmp_path: Path, arguments: str, line: str) -> None:
    called = run_toolhost("call", "math.calculate", "--args", arguments,
                          data_dir=tmp_path / "d", plugins="toolhost-math")
    assert one_line(called, 2) == line


def test_args_at_the_depth_bound_go_to_the_tool(tmp_path: Path) -> None:
    nested = '{"expression": "1", "x": ' + "[" * 255 + "]" * 255 + "}"  # 256 levels in all
    called = run_toolhost("call", "math.calculate", "--args", nested,
                          data_dir=tmp_path / "d", plugins="toolhost-math")
    assert "Traceback" not in called.stderr
    assert called.returncode == 1 and "tool.invalid_arguments.schema" in called.stderr


@pytest.mark.parametrize(("text", "line"), [
    ("[host]\ndata_dir = " + "[" * 2000 + "]" * 2000 + "\n", "not a configuration: a value is "
                                                            "nested too deeply"),
    ("[host]\nartifact_retention_days = " + "9" * 5000 + "\n",
     "not a configuration: an integer has more than 4300 digits"),
])
def test_a_config_file_too_deep_or_too_long_is_one_line(tmp_path: Path, text: str,
                                                        line: str) -> None:
    config = tmp_path / "toolhost.toml"
    config.write_text(text)
    listed = run_toolhost("tools", data_dir=tmp_path / "d", plugins="toolhost-math",
                          env={"TOOLHOST_CONFIG": str(config)})
    assert one_line(listed, 2) == f"toolhost: {config}: {line}"


@pytest.mark.parametrize(("name", "value", "line"), [
    ("TOOLHOST_POLICY", DEEP, "toolhost: TOOLHOST_POLICY is not a policy (nested too deeply)"),
    ("TOOLHOST_POLICY", '{"NONE/LOW": ' + "9" * 5000 + "}",
     "toolhost: TOOLHOST_POLICY is not a policy (an integer of more than 4300 digits)"),
    ("TOOLHOST_ARTIFACT_RETENTION_DAYS", "9" * 4301,
     "toolhost: TOOLHOST_ARTIFACT_RETENTION_DAYS is '99999999999999999999'... (4301 "
     "characters), not a number of days: set it to a whole number from 1 to 36500, 0 to keep "
     "artifacts forever, or leave it unset for 30"),
    ("TOOLHOST_WORKSPACE_QUOTA_BYTES", "0" * 4301,
     "toolhost: TOOLHOST_WORKSPACE_QUOTA_BYTES is '00000000000000000000'... (4301 "
     "characters), not a quota: set it to a whole number of bytes from 16777216 (16 MiB) to "
     "1099511627776 (1 TiB), or leave it unset for 1073741824 (1 GiB)"),
])
def test_a_setting_too_deep_or_too_long_is_one_line(tmp_path: Path, name: str, value: str,
                                                    line: str) -> None:
    called = run_toolhost("call", "math.calculate", "--args", '{"expression": "1+1"}',
                          data_dir=tmp_path / "d", plugins="toolhost-math", env={name: value})
    assert one_line(called, 2) == line


# ------------------------------------------------------------------ 4: bytes that are not UTF-8


FF = os.fsdecode(b"\xff")  # what Python makes of the byte 0xff on the command line


@pytest.mark.parametrize(("args", "line"), [
    (["show", FF], "toolhost show: error: argument id: b'\\xff' is not UTF-8 text"),
    (["approve", FF], "toolhost approve: error: argument id: b'\\xff' is not UTF-8 text"),
    (["deny", FF, "--reason", "r"],
     "toolhost deny: error: argument id: b'\\xff' is not UTF-8 text"),
    (["pending", "--after", FF],
     "toolhost pending: error: argument --after: b'\\xff' is not UTF-8 text"),
    (["pending", "--principal", FF],
     "toolhost pending: error: argument --principal: b'\\xff' is not UTF-8 text"),
    (["artifacts", "get", FF, "-o", "-"],
     "toolhost artifacts get: error: argument id: b'\\xff' is not UTF-8 text"),
    (["artifacts", "list", "--run", FF],
     "toolhost artifacts list: error: argument --run: b'\\xff' is not UTF-8 text"),
    (["call", "math" + FF],
     "toolhost call: error: argument name: b'math\\xff' is not UTF-8 text"),
])
def test_a_value_that_is_not_utf8_is_refused_naming_its_argument(
    tmp_path: Path, args: list[str], line: str,
) -> None:
    # Regression: UnicodeEncodeError tracebacks from SQLite; for `call`, "could not record".
    refused = run_toolhost(*args, data_dir=tmp_path / "d", plugins="toolhost-math")
    assert "Traceback" not in refused.stderr
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == line


# ------------------------------------------------------------------ 5, 6: bounds


@pytest.mark.parametrize("seconds", ["1e12", "2592001", "nan", "inf", "0"])
def test_a_timeout_out_of_bounds_is_one_line_and_exit_2(tmp_path: Path, seconds: str) -> None:
    # Regression: --timeout 1e12 was an OverflowError traceback (a date past year 9999).
    called = run_toolhost("call", "math.calculate", "--args", '{"expression": "1"}',
                          "--timeout", seconds, data_dir=tmp_path / "d", plugins="toolhost-math")
    assert one_line(called, 2) == ("toolhost: --timeout must be a positive number of seconds, "
                                   "at most 2592000 (30 days)")


def test_a_timeout_of_30_days_is_taken(tmp_path: Path) -> None:
    called = run_toolhost("call", "math.calculate", "--args", '{"expression": "1"}',
                          "--timeout", "2592000", data_dir=tmp_path / "d",
                          plugins="toolhost-math")
    assert (called.returncode, called.stdout, called.stderr) == (0, "1\n", "")


@pytest.mark.parametrize("command", [["pending"], ["artifacts", "list"]])
@pytest.mark.parametrize("limit", ["9223372036854775807", "1000001", "9" * 5000])
def test_a_limit_over_the_bound_is_a_usage_error(tmp_path: Path, command: list[str],
                                                 limit: str) -> None:
    # Regression: `pending --limit 9223372036854775807` was an OverflowError from SQLite.
    listed = run_toolhost(*command, "--limit", limit, data_dir=tmp_path / "d", plugins="")
    assert "Traceback" not in listed.stderr and listed.returncode == 2
    assert "expected a whole number of at most 1000000, not '" in listed.stderr.splitlines()[-1]


# ------------------------------------------------------------------ 7: runs list


def test_runs_list_on_a_data_directory_that_is_a_file_is_the_data_directory_line(
    tmp_path: Path,
) -> None:
    # Regression: a NotADirectoryError traceback where `pending` gives this line.
    data = tmp_path / "afile"
    data.write_text("x")
    listed = run_toolhost("runs", "list", data_dir=data, plugins="")
    assert one_line(listed, 1) == (
        f"toolhost: the data directory {data} is a file, not a directory: move the file away, "
        "or set TOOLHOST_DATA_DIR to another directory")


# ------------------------------------------------------------------ 8: get -o stopped


def signalled_at(method: str) -> str:
    """``toolhost`` whose ``method`` of ``toolhost._cli.artifacts`` sends the process the
    signal ``SEND_SIGNAL`` names, then waits for it: the moment an operator's SIGTERM, or a
    closed terminal, could land."""
    return textwrap.dedent(f"""\
        import os, sys, time
        from toolhost._cli import artifacts
        from toolhost._cli.main import main

        def stop_here(self, *args, **kwargs):
            os.kill(os.getpid(), int(os.environ["SEND_SIGNAL"]))
            time.sleep(30)

        artifacts.{method} = stop_here
        raise SystemExit(main(sys.argv[1:]))
        """)


#: ``artifacts get``, once the first chunk is written to the temp file.
SIGNALLED = signalled_at("_Shown.add")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_get_to_a_file_stopped_by_a_signal_leaves_no_temp_file(
    tmp_path: Path, signum: signal.Signals,
) -> None:
    # Regression: SIGTERM or SIGHUP left a hidden `.NAME.xxxx.part` beside the target.
    source, out = tmp_path / "a.txt", tmp_path / "out"
    source.write_bytes(b"artifact bytes\n")
    data = tmp_path / "d"
    uploaded = run_toolhost("artifacts", "upload", str(source), "--conversation", "c1",
                            data_dir=data, plugins="")
    assert uploaded.returncode == 0, uploaded.stderr
    out.mkdir()
    (out / "target").write_text("original")
    got = run_toolhost("artifacts", "get", uploaded.stdout.strip(), "-o", str(out / "target"),
                       data_dir=data, plugins="", env={"SEND_SIGNAL": str(int(signum))},
                       command=[sys.executable, "-c", SIGNALLED])
    assert (got.returncode, got.stderr) == (128 + signum, "")
    assert sorted(os.listdir(out)) == ["target"]
    assert (out / "target").read_text() == "original"


def test_the_pending_listing_still_parses_as_json(tmp_path: Path) -> None:
    # The output guard keeps a command's stdout byte for byte what it printed.
    listed = run_toolhost("pending", "--json", data_dir=tmp_path / "d", plugins="")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])


#: ``artifacts upload``, once its first chunk is staged.
UPLOAD_SIGNALLED = signalled_at("ProgressLine.update")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_an_upload_stopped_by_a_signal_leaves_no_staged_bytes_and_no_live_run(
    tmp_path: Path, signum: signal.Signals,
) -> None:
    # Regression (D461): the staged bytes stayed (purge takes them after an hour only) and
    # the upload's run was never ended; Ctrl-C already cleaned both up.
    source, data = tmp_path / "big.bin", tmp_path / "d"
    source.write_bytes(os.urandom(3 * 1024 * 1024))
    stopped = run_toolhost("artifacts", "upload", str(source), "--conversation", "c1",
                           data_dir=data, plugins="", env={"SEND_SIGNAL": str(int(signum))},
                           command=[sys.executable, "-c", UPLOAD_SIGNALLED])
    assert (stopped.returncode, stopped.stdout) == (128 + signum, ""), stopped.stderr
    assert "Traceback" not in stopped.stderr
    staged = [p for p in data.rglob("*") if p.is_file() and p.name.endswith(".upload")]
    assert staged == []
    listed = run_toolhost("runs", "list", "--json", data_dir=data, plugins="")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
