"""Sessions: one per plugin (host + that plugin alone, its tests, which include the
conformance suite), the host's tests, the conformance suite's own tests, the documented example
plugin, lint, typing, and the demo; `ci` (the default) runs all but the demo, CI_JOBS at
a time. The host's tests run on each Python of HOST_PYTHONS, every other session on nox's.

Plugins are discovered from plugins/*/pyproject.toml, so a new plugin gets its session by
existing (templates/plugin, what a new plugin copies, is deliberately outside plugins/). Every
session builds a fresh virtualenv and installs real distributions, the way an operator or a
plugin team's CI would.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100", "opentelemetry-sdk>=1.28"]

#: The Pythons the host's tests run on: the oldest and the newest of those pyproject claims
#: (3.11 to 3.13), so a claimed version is a tested one (D261). Every other session runs on
#: the Python that runs nox.
HOST_PYTHONS = ("3.11", "3.13")

#: What `nox` runs: every test session (see `ci`).
nox.options.sessions = ["ci"]
#: How many sessions `ci` runs at once: the two host sessions (each spread over both cores
#: by pytest-xdist) and beside them one session after another, the longest first, so the
#: single-process plugin sessions fill the time the host's tests spend waiting.
CI_JOBS = 3
#: The sessions that take longest after the host's (measured: email's tests take minutes),
#: started first so none of them is the last to end.
LONGEST = ("plugin(email)", "typing", "plugin(workspace)", "plugin(media)", "plugin(artifact)")
#: How often `ci` says which sessions are still running when none has ended, in seconds.
HEARTBEAT_S = 60
#: pytest-xdist workers of each host session (see `host`).
HOST_WORKERS = "4"
#: The tests that start processes (hosts, servers, clients, Chromium: importing the MCP SDK
#: alone is ~0.8 s of CPU) run on one Python each; the rest, ~2,600 tests in 86 files that
#: together take ~80 s of CPU, run on both. CI is CPU-bound on two cores, so each file is placed by its CPU
#: (bench/ci_test_cpu.py measures it: a file whose tests took over 5 s of CPU, their children
#: included, is here), the two lists about even (~285 s each when measured), and each Python
#: runs some of every kind: MCP SDK clients and servers, asyncio, subprocesses, PostgreSQL and
#: S3. A path missing here (renamed) runs on both, never on neither (tests/test_ci_layout.py).
ONE_PYTHON_ONLY = {
    "3.11": ("tests/journeys",
             "tests/test_mcp_server.py", "tests/test_s3_artifacts.py",
             "tests/test_cli.py", "tests/test_cli_artifacts.py", "tests/test_cli_runs.py",
             "tests/test_inbox_limits.py"),
    "3.13": ("tests/test_gateway.py", "tests/test_gateway_http.py",
             "tests/test_http_hosts.py",
             "tests/test_many_hosts.py", "tests/test_many_hosts_artifacts.py",
             "tests/test_inbox_browser.py",
             "tests/test_http_sessions.py", "tests/test_http_serve.py",
             "tests/test_pg_s3_artifacts.py", "tests/test_inbox_http.py",
             "tests/test_cli_approvals.py", "tests/test_command_loads.py",
             "tests/test_data_dir.py", "tests/test_cli_config.py"),
}
#: Debian's Chromium and its driver, for the inbox's browser tests (D314): the packages the
#: host session installs where they are missing; never a browser a test tool downloads.
BROWSER_PACKAGES = ("chromium", "chromium-driver")
BROWSER_FILES = ("/usr/bin/chromium", "/usr/bin/chromedriver")
# A claimed Python that is not on the machine fails the run; it never passes untested.
nox.options.error_on_missing_interpreters = True
# Bytecode is written, once, to one cache under .nox (never beside a source file or in a test's
# directory). A machine that sets PYTHONDONTWRITEBYTECODE (this one does) otherwise has every
# process the tests start (thousands: hosts, servers, the CLI) compile from source each module
# it imports, and every pytest worker rewrite every test module's assertions again (~6 s of
# CPU each); CI here is CPU-bound. A developer's own prefix wins.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(ROOT / ".nox" / "pycache"))
# uv builds a virtualenv and installs into it about ten times faster than pip; where uv is not
# installed, nox falls back to virtualenv and pip.
nox.options.default_venv_backend = "uv|virtualenv"
# uv's own bundled roots do not include a CA the machine's administrator added; pip finds it
# through its configuration. Trust the platform's store, as curl and pip do (UV_NATIVE_TLS for
# older uv releases, UV_SYSTEM_CERTS for newer); an operator's own setting wins.
os.environ.setdefault("UV_NATIVE_TLS", "1")
os.environ.setdefault("UV_SYSTEM_CERTS", "1")


def _pyenv_pythons(versions: tuple[str, ...]) -> None:
    """Make each of ``versions`` that pyenv installed findable as ``pythonX.Y``: pyenv's shims
    run only the versions ``pyenv global`` selects, so nox's search (which asks them) misses
    one that is installed but not selected. A link to it (the newest patch release) goes in
    .nox/pythons, first on PATH; nothing else of that installation shadows the machine's."""
    links = ROOT / ".nox" / "pythons"
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for wanted in versions:
        name = f"python{wanted}"
        with contextlib.suppress(OSError):
            if subprocess.run([name, "-c", ""], capture_output=True).returncode == 0:
                continue  # on PATH and runs: nox finds it
        found = [p for p in root.glob(f"{wanted}.*/bin/{name}") if p.is_file()]
        if not found:
            continue  # nox says it is missing
        newest = max(found, key=lambda p: [int(n) for n in p.parent.parent.name.split(".")
                                           if n.isdigit()])
        links.mkdir(parents=True, exist_ok=True)
        (links / name).unlink(missing_ok=True)
        (links / name).symlink_to(newest)
        if str(links) not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = f"{links}{os.pathsep}{os.environ.get('PATH', '')}"


_pyenv_pythons(HOST_PYTHONS)


@nox.session(venv_backend="none")
def ci(session: nox.Session) -> None:
    """Every test session, each as a `nox` process of its own, CI_JOBS at a time, the longest
    first. A line says when each starts; when it ends, a line says how it went and its whole
    log follows, so the output reads session by session while they overlap; a line a minute
    names those still running. The last line names exactly the sessions that failed."""
    queue = _ci_sessions()
    running: list[tuple[str, subprocess.Popen[bytes], IO[str], float]] = []
    failed: list[str] = []
    began = said = time.monotonic()
    with contextlib.ExitStack() as logs:
        while queue or running:
            while queue and len(running) < CI_JOBS:
                name = queue.pop(0)
                log = logs.enter_context(
                    tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace"))
                child = subprocess.Popen(
                    [sys.executable, "-m", "nox", "-s", name, *session.posargs],
                    cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
                running.append((name, child, log, time.monotonic()))
                _say(f"ci: {name} started ({len(queue)} waiting)")
            for entry in [e for e in running if e[1].poll() is not None]:
                running.remove(entry)
                name, child, log, started = entry
                verdict = "passed" if child.returncode == 0 else "FAILED"
                if child.returncode != 0:
                    failed.append(name)
                _say(f"ci: {name} {verdict} in {time.monotonic() - started:.0f}s; its log:")
                log.seek(0)
                sys.stdout.write(log.read())
                _say(f"ci: end of {name}'s log")
                said = time.monotonic()
            if time.monotonic() - said >= HEARTBEAT_S:
                # A host session runs for minutes: say what is still running, so a silent
                # log is never a stuck one.
                _say("ci: still running: " + ", ".join(
                    f"{n} ({time.monotonic() - t:.0f}s)" for n, _, _, t in running))
                said = time.monotonic()
            time.sleep(0.2)
    _say(f"ci: every session ended in {time.monotonic() - began:.0f}s")
    if failed:
        session.error(f"failed: {', '.join(failed)}")


def _ci_sessions() -> list[str]:
    """What `ci` runs, longest first (so the last to start are short): the host's tests on
    each Python, LONGEST, every other plugin alone, the example, the conformance suite, lint."""
    rest = [*(f"plugin({p.name})" for p in PLUGINS), "example", "conformance", "lint"]
    return [*(f"host-{v}" for v in HOST_PYTHONS), *LONGEST, *(n for n in rest if n not in LONGEST)]


def _say(line: str) -> None:
    print(line, flush=True)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session
def typing(session: nox.Session) -> None:
    """mypy --strict over the host, the conformance suite, every plugin, the example and the
    plugin template (as it is, placeholders and all: it type-checks before it is renamed)."""
    example = ROOT / "examples" / "toolhost-greet"
    session.install("mypy", *TEST_DEPS, "trustme", ".[mcp,postgres,s3,oauth]", "./conformance",
                    *map(str, PLUGINS), str(example))
    session.run("mypy", "--strict", "host/toolhost")
    for project in [ROOT / "conformance", *PLUGINS, example, ROOT / "templates" / "plugin"]:
        session.run("mypy", "--strict", str(project.relative_to(ROOT) / "src"))


@nox.session(python=HOST_PYTHONS)
def host(session: nox.Session) -> None:
    """The host's own tests, with every first-party plugin installed beside it, on each
    Python of HOST_PYTHONS (``host-3.11``, ``host-3.13``): all of them but the scenarios
    ONE_PYTHON_ONLY gives the other Python."""
    # tests/test_cli.py builds throwaway plugins with hatchling and installs them with uv when
    # uv is on PATH (installed here, so it is; pip otherwise, which is three times slower).
    # The PostgreSQL and S3 backends' tests need real servers: the PostgreSQL binaries of the
    # machine (tests/pg_server.py starts a throwaway cluster) and moto's S3 server (started by
    # tests/s3_server.py). TOOLHOST_REQUIRE_SERVERS turns "missing, skipped" into a failure, so
    # CI never counts a backend it could not test as passing. httptools: the HTTP parser
    # uvicorn would pick when installed; serve names h11, and a test proves it (D326).
    session.install(*TEST_DEPS, "pytest-xdist", "hatchling", "uv", "trustme", "moto[server]",
                    "httptools",
                    "selenium>=4.20", ".[mcp,postgres,s3,oauth]", "./conformance",
                    *map(str, PLUGINS))
    placed = ONE_PYTHON_ONLY.get(str(session.python), ())
    elsewhere = [path for version, paths in ONE_PYTHON_ONLY.items() if version != session.python
                 for path in paths]
    named = _named_tests(session.posargs)
    # Tests named on the command line (`nox -s host-3.11 -- tests/test_cli.py`) run as asked:
    # the other Python's files stay ignored, but not one a name covers.
    ignored = [path for path in elsewhere
               if not any(_covers(path, n) or _covers(n, path) for n in named)]
    browser = "tests/test_inbox_browser.py"
    browser_tests = (any(_covers(n, browser) for n in named) if named
                     else browser in placed)
    if browser_tests and not all(os.path.exists(path) for path in BROWSER_FILES):
        # The browser tests fail, never skip, without them: installed here, not assumed.
        apt = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *BROWSER_PACKAGES]
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        session.run(*sudo, "sh", "-c", f"{' '.join(apt)} || (apt-get update -q && "
                    f"{' '.join(apt)})", external=True)
    # Most of these tests wait on a child process, a server or a clock, not on the CPU: more
    # workers than cores keeps both cores busy. Each worker starts its own PostgreSQL cluster
    # and S3 server on free ports (tests/pg_server.py, tests/s3_server.py), and every test's
    # files are under its own tmp_path. worksteal: the few long tests do not queue behind
    # each other on one worker.
    session.run("pytest", *([] if named else ["tests"]), *(f"--ignore={p}" for p in ignored),
                "-n", HOST_WORKERS, "--dist", "worksteal", *_basetemp(session),
                *session.posargs,
                env={"TOOLHOST_REQUIRE_SERVERS": "1"})


def _basetemp(session: nox.Session) -> list[str]:
    """pytest's temporary directory for this session alone, unless the command line names one.

    By default every pytest run numbers its directory under one /tmp/pytest-of-USER and removes
    the oldest there: `ci`'s concurrent sessions removed a directory another was still writing
    (pytest's own cleanup failed plugin(demo) with "Directory not empty"). Short and under the
    system's temporary directory, not the checkout: Unix socket paths stay under 108 bytes."""
    if any(arg == "--basetemp" or arg.startswith("--basetemp=") for arg in session.posargs):
        return []
    checkout = hashlib.sha256(str(ROOT.resolve()).encode()).hexdigest()[:8]
    parent = Path(tempfile.gettempdir()) / f"toolhost-{checkout}"
    parent.mkdir(mode=0o700, exist_ok=True)  # pytest makes the session's own, not its parent
    name = re.sub(r"[^A-Za-z0-9.]+", "-", session.name).strip("-")
    return [f"--basetemp={parent / name}"]


#: pytest options whose value is the next argument (``-k host``): that value names no test.
_TAKES_A_VALUE = frozenset({"-k", "-m", "-p", "-c", "-o", "-n", "-W", "--deselect", "--ignore",
                            "--ignore-glob", "--basetemp", "--rootdir", "--dist", "--maxfail",
                            "--durations", "--tb", "--junitxml", "--log-level",
                            "--hypothesis-profile", "--hypothesis-seed"})


def _named_tests(posargs: list[str]) -> list[str]:
    """The test paths among pytest's arguments (``tests/test_cli.py``, ``tests/x.py::test_y``,
    ``tests/journeys``): under tests/, existing, and not an option's value."""
    named = []
    for before, arg in zip(["", *posargs], posargs, strict=False):
        path = arg.split("::")[0].rstrip("/")
        # os.path.exists, not Path.exists: a name too long for the file system is no test.
        if (before not in _TAKES_A_VALUE and (path == "tests" or path.startswith("tests/"))
                and os.path.exists(ROOT / path)):
            named.append(arg)
    return named


def _covers(outer: str, inner: str) -> bool:
    """Whether the test path ``outer`` (a directory, a file, or a file::test) includes
    ``inner``'s file."""
    a, b = outer.split("::")[0].rstrip("/"), inner.split("::")[0].rstrip("/")
    return b == a or b.startswith(a + "/")


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite's own tests (its negative fixtures), with no plugin installed."""
    session.install(*TEST_DEPS, ".", "./conformance")
    session.run("pytest", "conformance/tests", *_basetemp(session), *session.posargs)


def _local_requirements(project: Path) -> list[str]:
    """The first-party plugins ``project`` depends on (toolhost-people needs toolhost-email's
    mail cache), as paths: they are not on an index, so they install from this checkout."""
    import tomllib

    names = {tomllib.loads((p / "pyproject.toml").read_text())["project"]["name"]: p
             for p in PLUGINS}
    wanted = tomllib.loads((project / "pyproject.toml").read_text())["project"].get(
        "dependencies", [])
    found = {re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0] for spec in wanted}
    return [str(names[name]) for name in sorted(found) if name in names and names[name] != project]


def _plugin_tests(session: nox.Session, project: Path) -> None:
    """The host, the suite and this one plugin, installed; then the plugin's own tests.

    They include its ConformanceSuite subclass (tests/test_packaging.py checks that every plugin has one),
    so the suite runs once, there: running ``toolhost-conformance DIST`` after them ran the same
    checks a second time. The command itself is covered by conformance's own tests
    (conformance/tests/test_cli.py, in the conformance session).
    """
    # trustme: the media and email plugins test against a real loopback HTTPS server.
    session.install(*TEST_DEPS, "trustme", ".", "./conformance", *_local_requirements(project),
                    str(project))
    session.run("pytest", str(project / "tests"), *_basetemp(session), *session.posargs)


@nox.session
@nox.parametrize("name", [p.name for p in PLUGINS], ids=[p.name for p in PLUGINS])
def plugin(session: nox.Session, name: str) -> None:
    """One plugin alone: the host, this plugin and the suite; its tests, conformance included."""
    _plugin_tests(session, ROOT / "plugins" / name)


@nox.session
def example(session: nox.Session) -> None:
    """The README's "Writing a plugin" example, exactly as a third-party team would run it."""
    _plugin_tests(session, ROOT / "examples" / "toolhost-greet")


@nox.session
def demo(session: nox.Session) -> None:
    """The Milestone 1 run: "What is 17 multiplied by 23?" → math.calculate → 391."""
    session.install(".", "./plugins/math", "./plugins/system")
    session.run("toolhost", "demo")
