"""What each one-shot command loads (issue #27): the commands that read or settle the record
(``pending``, ``show``, ``deny``, ``artifacts list``/``get``/``purge``, ``approve``'s lookup) load
no plugin, no registration and no pipeline; nothing imports structlog for a command that logs
nothing, nor rich (or another optional library structlog's dev module picks up) when it does.
Asserted on ``sys.modules`` of a fresh interpreter and on output, never on timings
(bench/bench_commands.py measures those)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolhost._cli.main import _parser, _run_named

#: Runs ``main`` on the arguments and writes, on stderr's last line, the modules loaded and
#: whether rich can be imported now.
PROBE = """\
import importlib.util, json, sys
from toolhost._cli.main import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stderr.write("\\n" + json.dumps({"modules": sorted(sys.modules),
                                         "rich": importlib.util.find_spec("rich") is not None}))
raise SystemExit(code)
"""

PLUGINS = "toolhost-math,toolhost-demo"
#: What reading the record never needs: the plugins' loading, registration, the pipeline, the
#: log (the call paths' own).
NOT_FOR_THE_RECORD = ("pluggy", "toolhost._registration.discovery",
                      "toolhost._registration.refusals", "toolhost._registration.registry",
                      "toolhost._pipeline.pipeline", "toolhost._pipeline.steps", "asyncio",
                      "structlog", "fastjsonschema")


def run(*args: str, data: Path, env: dict[str, str] | None = None,
        path: Path | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The command's result, its stderr without the probe's line, and what the probe saw."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("TOOLHOST_", "AGENT_", "TENSORSCALE_"))}
    full |= {"TOOLHOST_DATA_DIR": str(data), "TOOLHOST_PLUGINS": PLUGINS, "TOOLHOST_CONFIG": ""}
    full |= env or {}
    if path is not None:
        full["PYTHONPATH"] = os.pathsep.join([str(path), *filter(None, [full.get(
            "PYTHONPATH")])])
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                            text=True, env=full, timeout=120)
    stderr, _, probe = result.stderr.rpartition("\n")
    result.stderr = stderr
    return result, json.loads(probe)


def plugin_modules(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith("toolhost_")]


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A data directory with a paused call, a denied one, a failure of the host's reason and
    one of a tool's, and an artifact."""
    data = tmp_path_factory.mktemp("record") / "data"
    ids: dict[str, Any] = {"data": data}
    write = ["call", "demo.external_write", "--args", '{"destination": "x", "content": "y"}']
    ids["paused"] = run(*write, data=data)[0].stdout.strip()
    ids["denied"] = run(*write, data=data)[0].stdout.strip()
    assert run("deny", ids["denied"], "--reason", "no", data=data)[0].returncode == 0
    for key, expression in (("host_reason", 17), ("tool_reason", "1 / 0")):
        failed, _ = run("call", "math.calculate", "--args",
                        json.dumps({"expression": expression}), "--json", data=data)
        ids[key] = json.loads(failed.stdout)["invocation_id"]
    upload = tmp_path_factory.mktemp("upload") / "notes.txt"
    upload.write_text("hello")
    uploaded, _ = run("artifacts", "upload", str(upload), "--conversation", "c1", data=data)
    ids["artifact"] = uploaded.stdout.strip()
    return ids


@pytest.mark.parametrize("command", [
    ["pending"], ["pending", "--json"], ["show", "{denied}"], ["show", "{denied}", "--json"],
    ["show", "{host_reason}"], ["artifacts", "list"], ["artifacts", "get", "{artifact}", "-o", "-"],
    ["artifacts", "purge"], ["approve", "nope"], ["approve", "{denied}"], ["show", "nope"],
])
def test_reading_the_record_loads_no_plugin_and_no_pipeline(
        record: dict[str, Any], command: list[str]) -> None:
    result, probe = run(*(word.format(**record) for word in command), data=record["data"])
    assert "Traceback" not in result.stderr
    assert plugin_modules(probe["modules"]) == []
    assert sorted(set(probe["modules"]).intersection(NOT_FOR_THE_RECORD)) == []


@pytest.mark.parametrize("command", [["show", "{paused}"], ["show", "{paused}", "--json"]])
def test_showing_a_waiting_call_loads_the_plugins_to_say_what_it_does(
        record: dict[str, Any], command: list[str]) -> None:
    # A person deciding it reads what its tool says it will do (Tool(describe=...), D473),
    # as `approve` loads them to run it; the pipeline is still not composed.
    result, probe = run(*(word.format(**record) for word in command), data=record["data"])
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "toolhost_demo" in plugin_modules(probe["modules"])
    assert "toolhost._pipeline.pipeline" not in probe["modules"]


@pytest.mark.parametrize("command", [["pending"], ["show", "{paused}"], ["approve", "nope"]])
def test_reading_invocations_imports_no_cattrs(record: dict[str, Any],
                                               command: list[str]) -> None:
    # Rows are written and read by generated functions; the converter (cattrs and its hooks,
    # ~20 ms) is made only for a record read through it (an artifact's) or a spec's JSON.
    result, probe = run(*(word.format(**record) for word in command), data=record["data"])
    assert "Traceback" not in result.stderr
    assert "cattrs" not in probe["modules"]


@pytest.mark.parametrize("command", [["tools"], ["artifacts", "list"]])
def test_a_command_that_exits_at_once_survives_a_closed_stdout(
        record: dict[str, Any], command: list[str]) -> None:
    # Python starts with sys.stdout None when descriptor 1 is closed: the quick exit
    # (``_exit_now``) flushed it regardless and printed an AttributeError's traceback.
    args = [word.format(**record) for word in command]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLHOST_", "AGENT_", "TENSORSCALE_"))}
    env |= {"TOOLHOST_DATA_DIR": str(record["data"]), "TOOLHOST_PLUGINS": PLUGINS,
            "TOOLHOST_CONFIG": ""}
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m",
                           "toolhost._cli", *args], capture_output=True, env=env, timeout=120)
    assert b"Traceback" not in done.stderr, done.stderr.decode()


def test_deny_loads_no_plugin(record: dict[str, Any]) -> None:
    write = ["call", "demo.external_write", "--args", '{"destination": "z", "content": "z"}']
    paused = run(*write, data=record["data"])[0].stdout.strip()
    denied, probe = run("deny", paused, "--reason", "no", data=record["data"])
    assert (denied.returncode, denied.stdout) == (
        0, "An operator denied this call. Do not retry it; ask the user how to proceed.\n")
    # A pipeline with no tool denies it (the pipeline's module imports registration's types).
    assert plugin_modules(probe["modules"]) == []
    assert "structlog" not in probe["modules"]


def test_show_loads_the_plugins_for_a_tools_failure_message_only(record: dict[str, Any]) -> None:
    shown, probe = run("show", record["tool_reason"], data=record["data"])
    assert ("failure      tool.invalid_arguments.division_by_zero (not retryable): Division by "
            "zero.") in shown.stdout.splitlines()
    assert "toolhost_math.plugin" in probe["modules"]
    as_json, _ = run("show", record["tool_reason"], "--json", data=record["data"])
    assert json.loads(as_json.stdout)["message"] == "Division by zero."
    host, probe = run("show", record["host_reason"], data=record["data"])
    assert ("failure      tool.invalid_arguments.schema (not retryable): The arguments do not "
            "match the tool's input schema.") in host.stdout.splitlines()
    assert plugin_modules(probe["modules"]) == []


def test_a_plugin_that_fails_to_load_stops_the_commands_that_load_plugins_only(
        tmp_path: Path) -> None:
    # Reading the record never imports a plugin, so one that cannot be imported no longer stops
    # pending or artifacts list; tools, check and call still refuse to start on it.
    site = tmp_path / "site"
    site.mkdir()
    (site / "fake_broken.py").write_text("raise RuntimeError('boom')\n")
    info = site / "fake_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[toolhost.plugins]\nfake_broken = fake_broken\n")
    env = {"TOOLHOST_PLUGINS": "fake-broken"}
    for command in (["pending"], ["artifacts", "list"]):
        result, _ = run(*command, data=tmp_path / "data", env=env, path=site)
        assert (result.returncode, result.stderr) == (0, ""), command
    refused, _ = run("tools", data=tmp_path / "data", env=env, path=site)
    assert refused.returncode == 1
    assert refused.stderr.startswith("toolhost: plugin fake-broken: entry point fake_broken = "
                                     "fake_broken failed to import: RuntimeError: boom")


def test_approve_says_no_row_and_denied_before_loading_a_plugin(record: dict[str, Any]) -> None:
    missing, _ = run("approve", "nope", data=record["data"])
    assert (missing.returncode, missing.stderr) == (
        1, "toolhost: no invocation 'nope' (toolhost pending lists them)\n")
    denied, _ = run("approve", record["denied"], data=record["data"])
    assert (denied.returncode, denied.stderr) == (
        1, f"toolhost: invocation {record['denied']} was denied\n")


def test_approve_logs_a_loosened_policy_once(tmp_path: Path) -> None:
    # The lookup's stores are the host's: its pipeline is not composed over a second pair,
    # which would log the loosened cell a second time.
    paused, _ = run("call", "math.calculate", "--args", '{"expression": "2"}', data=tmp_path,
                    env={"TOOLHOST_POLICY": '{"NONE/LOW": "approval"}'})
    assert paused.returncode == 3, paused.stderr
    approved, _ = run("approve", paused.stdout.strip(), data=tmp_path, env={
        "TOOLHOST_POLICY": '{"NONE/LOW": "approval", "EXTERNAL_WRITE/HIGH": "allow"}',
        "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"})
    assert (approved.returncode, approved.stdout) == (0, "2\n"), approved.stderr
    events = [json.loads(line) for line in approved.stderr.splitlines()]
    assert [(e["event"], e["cell"]) for e in events] == [
        ("policy.loosened", "EXTERNAL_WRITE/HIGH: approval -> allow")]


def test_pending_still_logs_a_loosened_policy(tmp_path: Path) -> None:
    result, probe = run("pending", data=tmp_path, env={
        "TOOLHOST_POLICY": '{"EXTERNAL_WRITE/HIGH": "allow"}',
        "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"})
    assert (result.returncode, result.stdout) == (0, "no invocations await approval\n")
    (line,) = result.stderr.splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["cell"]) == (
        "policy.loosened", "warning", "EXTERNAL_WRITE/HIGH: approval -> allow")
    assert plugin_modules(probe["modules"]) == []


# ---------------------------------------------------------------------- the log


#: A stand-in for rich, importable: what structlog's dev module imports when rich is installed.
#: structlog's rich traceback formatter would use ``Traceback.from_exception``, which this one
#: lacks, so an exception rendered through it would not be the plain traceback.
FAKE_RICH = {
    "rich/__init__.py": "",
    "rich/console.py": "class Console:\n    pass\n",
    "rich/traceback.py": "class Traceback:\n    pass\n",
    "rich/pretty.py": "def traverse(*args, **kwargs):\n    return None\n",
    "colorama/__init__.py": textwrap.dedent("""\
        class Style:
            RESET_ALL = BRIGHT = DIM = ""
        class Fore:
            RED = BLUE = CYAN = MAGENTA = YELLOW = GREEN = ""
        class Back:
            RED = ""
        """),
    "better_exceptions/__init__.py": "def format_exception(*args):\n    return ['fake']\n",
}


@pytest.fixture
def fake_rich(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    for name, text in FAKE_RICH.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return site


def test_a_call_that_logs_nothing_at_its_level_imports_no_structlog(tmp_path: Path,
                                                                     fake_rich: Path) -> None:
    result, probe = run("call", "math.calculate", "--args", '{"expression": "6 * 7"}',
                        data=tmp_path, path=fake_rich)
    assert (result.returncode, result.stdout, result.stderr) == (0, "42\n", "")
    assert "structlog" not in probe["modules"] and "rich" not in probe["modules"]


def test_a_call_that_logs_imports_no_rich_even_when_it_is_installed(tmp_path: Path,
                                                                     fake_rich: Path) -> None:
    result, probe = run("call", "math.calculate", "--args", '{"expression": "6 * 7"}',
                        data=tmp_path, path=fake_rich, env={"TOOLHOST_LOG_LEVEL": "debug"})
    assert (result.returncode, result.stdout) == (0, "42\n")
    events = [json.loads(line)["event"] for line in result.stderr.splitlines()]
    assert events and all(e.startswith("pipeline.") for e in events), events
    assert "structlog" in probe["modules"]
    assert sorted(set(probe["modules"]) & {"rich", "colorama", "better_exceptions"}) == []
    assert probe["rich"]  # only structlog's import was kept from it: rich is importable after


#: Configures the log for the console renderer, logs an exception, prints what was written.
RENDER = """\
import io, sys
from toolhost._pipeline.log import configure_logging, get_logger
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT

out = io.StringIO()
configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=False)
try:
    raise ValueError("boom")
except ValueError:
    get_logger(run_id="r1").exception("pipeline.failed", step=9)
sys.stdout.write(out.getvalue())
"""


def render(path: Path | None, *, structlog_first: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    code = ("import structlog; " if structlog_first else "") + RENDER  # the same line numbers
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=60, check=True)
    return result.stdout


def test_the_log_reads_the_same_with_rich_installed(fake_rich: Path) -> None:
    plain = render(None)
    assert "pipeline.failed" in plain and "ValueError: boom" in plain
    assert render(fake_rich) == plain
    # An application that imported structlog first (and so rich) still gets the same lines:
    # the renderer names its traceback formatter.
    assert render(fake_rich, structlog_first=True) == plain


#: Configures the log before structlog is imported; reports what each step imported.
DEFERRED = """\
import io, json, sys
from toolhost._pipeline.log import configure_logging, get_logger
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT

out = io.StringIO()
configure_logging(FixedClock(DEFAULT_INSTANT), level="warning", stream=out)
seen = ["structlog" in sys.modules]
get_logger(run_id="r1").info("below")
seen.append("structlog" in sys.modules)
if "--theirs" in sys.argv:
    import structlog
    theirs = io.StringIO()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=theirs),
                        processors=[structlog.processors.JSONRenderer()])
get_logger(run_id="r1").warning("shown")
seen.append("structlog" in sys.modules)
print(json.dumps({"seen": seen, "ours": out.getvalue(),
                  "theirs": theirs.getvalue() if "--theirs" in sys.argv else None}))
"""


def test_the_log_is_configured_when_the_first_event_at_its_level_comes() -> None:
    result = subprocess.run([sys.executable, "-c", DEFERRED], capture_output=True, text=True,
                            timeout=60, check=True)
    report = json.loads(result.stdout)
    assert report["seen"] == [False, False, True]
    assert json.loads(report["ours"]) == {"event": "shown", "level": "warning", "run_id": "r1",
                                          "timestamp": "2026-07-25T13:03:11.482913+00:00"}


def test_a_configuration_given_after_ours_is_kept() -> None:
    # Someone configured structlog after configure_logging, before its first event: theirs is
    # the newer, as it was when configure_logging applied at once.
    result = subprocess.run([sys.executable, "-c", DEFERRED, "--theirs"], capture_output=True,
                            text=True, timeout=60, check=True)
    report = json.loads(result.stdout)
    assert report["ours"] == ""
    assert json.loads(report["theirs"]) == {"event": "shown", "run_id": "r1"}


def test_a_server_applies_the_configuration_at_once() -> None:
    # `toolhost serve` calls apply_logging at its start: stdout is its transport.
    code = ("import sys\n"
            "from toolhost._pipeline.log import apply_logging, configure_logging\n"
            "from toolhost._testing.clocks import FixedClock\n"
            "from toolhost.testing import DEFAULT_INSTANT\n"
            "configure_logging(FixedClock(DEFAULT_INSTANT), level='warning')\n"
            "before = 'structlog' in sys.modules\n"
            "print(before, apply_logging().is_configured())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout == "False True\n"


def test_the_level_table_is_the_standard_librarys() -> None:
    from toolhost._pipeline.log import _LEVEL_NUMBERS

    assert logging.getLevelNamesMapping() == _LEVEL_NUMBERS


# ---------------------------------------------------------------------- the parser


COMMANDS = ["tools", "check", "call", "demo", "pending", "show", "approve", "deny", "recover",
            "artifacts", "config", "plugins", "serve", "runs"]


def test_every_command_is_listed_whichever_is_built() -> None:
    # Only the command a run parses gets its arguments; the listing stays the same.
    listing = _parser(None).format_help()
    assert all(f"    {name}" in listing for name in COMMANDS)
    for name in COMMANDS:
        assert _parser(name).format_help() == listing


@pytest.mark.parametrize(("argv", "named"), [
    (["pending", "--limit", "2"], "pending"), (["--help"], None), (["--version"], None),
    ([], None), (["--", "show", "x"], "show"), (["-h", "call"], "call"),
    (["artifacts", "get", "a", "-o", "-"], "artifacts"),
])
def test_the_command_a_line_names(argv: list[str], named: str | None) -> None:
    assert _run_named(argv) == named


def test_a_command_built_alone_parses_as_before() -> None:
    args = _parser("call").parse_args(["call", "math.calculate", "--args", "{}", "--json"])
    assert (args.command, args.name, args.args, args.json, args.version) == (
        "call", "math.calculate", "{}", True, None)
    args = _parser("artifacts").parse_args(["artifacts", "get", "a1", "-o", "-"])
    assert (args.artifacts_command, args.id, args.output) == ("get", "a1", "-")


def test_main_parses_the_process_arguments_when_given_none(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from toolhost._cli import main as cli

    monkeypatch.setattr(sys, "argv", ["toolhost", "pending", "--limit", "0"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 2
    assert textwrap.dedent("""\
        toolhost pending: error: argument --limit: expected a whole number of at least 1, \
not '0'""") in capsys.readouterr().err


def test_a_command_that_runs_no_tool_ends_at_once_yet_runs_the_exit_handlers(
        tmp_path: Path) -> None:
    # `tools` ends with os._exit as check does (the interpreter's teardown was 10-25 ms): a
    # handler a plugin registered still runs, the output is all out, and what only the
    # teardown would do (finalizing the plugin's live objects) is not done.
    exited, finalized = tmp_path / "exited", tmp_path / "finalized"
    site = tmp_path / "site"
    site.mkdir()
    (site / "fake_x.py").write_text(textwrap.dedent(f"""\
        import atexit
        atexit.register(lambda: open({str(exited)!r}, "w").close())

        class Live:
            def __del__(self, open=open):  # bound now: the teardown clears the builtins
                open({str(finalized)!r}, "w").close()

        LIVE = Live()
        """))
    info = site / "fake_x-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-x\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[toolhost.plugins]\nfake_x = fake_x\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env |= {"TOOLHOST_PLUGINS": "fake-x", "TOOLHOST_DATA_DIR": str(tmp_path / "data"),
            "TOOLHOST_CONFIG": "", "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-m", "toolhost._cli", "tools"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert exited.exists() and not finalized.exists()
