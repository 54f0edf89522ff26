"""``toolhost check``'s readiness probes start as each plugin loads, and the plugins that had
one at the last check load first (issue #11). Neither may change what ``check`` prints or
which failure it reports: asserted on exact output, each command a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from installed import install_fake_plugin
from test_cli import idle, toolhost

from toolhost import Settings
from toolhost._adapters.sized_fs import SizedFilesystems

PLUGINS = "fake-a,fake-b,fake-c"


def _plugin(domain: str, readiness: str = "") -> str:
    return f'''
from toolhost import hookimpl, Domain

@hookimpl
def toolhost_domains():
    return [Domain("{domain}")]
''' + readiness


#: A probe under the hook's own name, none, and one under another name (pluggy's specname).
READINESS = {
    "fake-a": ("fake_a", _plugin("alpha", '''
@hookimpl
def toolhost_readiness(settings):
    return ["a one", "a two"]
''')),
    "fake-b": ("fake_b", _plugin("beta")),
    "fake-c": ("fake_c", _plugin("gamma", '''
@hookimpl(specname="toolhost_readiness")
def probe(settings):
    return ["c"]
''')),
}


def not_held(problem: str | None) -> str:
    """``check``'s line where the host cannot hold the workspace quota as a filesystem
    (D265), for ``problem``, the reason the host finds; none where it can."""
    if problem is None:
        return ""
    quota = Settings.from_environ().workspace_quota_bytes
    return (f"not held: the workspace quota ({quota // 2**20} MiB) is not a filesystem of its "
            f"size here ({problem}): only the tools' own checks bound it, and parallel "
            "writers can pass them (the sandbox's, every 0.2 s)\n")


#: Asked here as the host asks it: the commands below run as this process's user, with its
#: privileges and devices (root with loop devices: no line; elsewhere, the line).
NOT_HELD = not_held(SizedFilesystems(Settings.from_environ().workspace_quota_bytes).problem())
EXPECTED = (f"{idle('fake-a, fake-b, fake-c')}\n"
            "not ready: fake-a: a one\n"
            "not ready: fake-a: a two\n"
            "not ready: fake-c: c\n" + NOT_HELD)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for dist, (module, source) in READINESS.items():
        install_fake_plugin(tmp_path / "site", dist, module, source)
    return tmp_path / "site"


def test_every_probe_prints_in_plugin_order_and_the_next_check_loads_them_first(
        site: Path, tmp_path: Path) -> None:
    env = {"TOOLHOST_PLUGINS": PLUGINS, "TOOLHOST_DATA_DIR": str(tmp_path / "data")}
    hints = tmp_path / "data" / "cache" / "readiness.json"
    first = toolhost("check", env=env, site=site)
    assert (first.returncode, first.stdout, first.stderr) == (0, EXPECTED, "")
    assert json.loads(hints.read_text()) == ["fake-a", "fake-c"]
    # Now fake-c and fake-a load before fake-b: what check prints is the same.
    second = toolhost("check", env=env, site=site)
    assert (second.returncode, second.stdout, second.stderr) == (0, EXPECTED, "")


@pytest.mark.parametrize("hint", ['["fake-b", "not-installed"]', "not json", '{"a": 1}'])
def test_a_stale_or_unreadable_hint_changes_nothing(site: Path, tmp_path: Path,
                                                     hint: str) -> None:
    hints = tmp_path / "data" / "cache" / "readiness.json"
    (tmp_path / "data").mkdir(mode=0o700)  # as toolhost makes it (else check says so)
    hints.parent.mkdir()
    hints.write_text(hint)
    result = toolhost("check", env={"TOOLHOST_PLUGINS": PLUGINS,
                                    "TOOLHOST_DATA_DIR": str(tmp_path / "data")}, site=site)
    assert (result.returncode, result.stdout, result.stderr) == (0, EXPECTED, "")
    # Corrected for the plugins loaded now; one not loaded keeps its hint.
    assert json.loads(hints.read_text()) == (
        ["fake-a", "fake-c", "not-installed"] if "not-installed" in hint else ["fake-a", "fake-c"])


def test_a_plugin_left_out_keeps_its_hint(site: Path, tmp_path: Path) -> None:
    env = {"TOOLHOST_PLUGINS": PLUGINS, "TOOLHOST_DATA_DIR": str(tmp_path / "data")}
    hints = tmp_path / "data" / "cache" / "readiness.json"
    assert toolhost("check", env=env, site=site).returncode == 0
    left_out = toolhost("check", env={**env, "TOOLHOST_PLUGINS_EXCLUDE": "fake-a"}, site=site)
    assert left_out.stdout == (f"{idle('fake-b, fake-c')}\n"
                               "not ready: fake-c: c\n" + NOT_HELD)
    assert json.loads(hints.read_text()) == ["fake-a", "fake-c"]


def test_a_plugin_loaded_first_reports_its_failure_in_entry_point_order(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-x", "fake_x", "import nowhere_x\n")
    install_fake_plugin(site, "fake-y", "fake_y", "import nowhere_y\n")
    hints = tmp_path / "data" / "cache" / "readiness.json"
    (tmp_path / "data").mkdir(mode=0o700)  # as toolhost makes it (else check says so)
    hints.parent.mkdir()
    hints.write_text('["fake-y"]')
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-x,fake-y",
                                    "TOOLHOST_DATA_DIR": str(tmp_path / "data")}, site=site)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(
        "toolhost: plugin fake-x: entry point fake_x = fake_x failed to import: "
        "ModuleNotFoundError: No module named 'nowhere_x' at ")
    assert "Traceback" not in result.stderr


def test_a_probe_that_raises_is_one_line_and_exit_1(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-r", "fake_r", _plugin("rho", '''
@hookimpl
def toolhost_readiness(settings):
    raise RuntimeError("boom")
'''))
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-r"}, site=site)
    assert (result.returncode, result.stdout) == (1, f"{idle('fake-r')}\n")
    assert result.stderr == (
        "toolhost: plugin fake-r: hook toolhost_readiness raised RuntimeError: boom (leave it "
        "out with TOOLHOST_PLUGINS, or fix and reinstall it)\n")


def test_check_ends_without_teardown_yet_runs_the_exit_handlers(tmp_path: Path) -> None:
    # check ends with os._exit once it is done (the interpreter's teardown was 10-20 ms):
    # a handler a plugin registered with atexit still runs, and every line is out.
    marker = tmp_path / "exited"
    install_fake_plugin(tmp_path / "site", "fake-e", "fake_e", f'''
import atexit

atexit.register(lambda: open({str(marker)!r}, "w").close())
''' + _plugin("epsilon", '''
@hookimpl
def toolhost_readiness(settings):
    return ["x" * 70000]
'''))
    result = toolhost("check", env={"TOOLHOST_PLUGINS": "fake-e"}, site=tmp_path / "site")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"{idle('fake-e')}\n"
                             f"not ready: fake-e: {'x' * 70000}\n"  # past a pipe's buffer
                             + NOT_HELD)
    assert marker.exists()


def test_check_says_where_the_quota_is_not_held(tmp_path: Path) -> None:
    """The ``not held:`` line, on any machine: where the host can mount, as root without
    CAP_SYS_ADMIN (dropped from the bounding set, as a container drops it); elsewhere as
    the machine is."""
    problem = SizedFilesystems(Settings.from_environ().workspace_quota_bytes).problem()
    prefix: list[str] = []
    if problem is None:
        setpriv = shutil.which("setpriv")
        if os.geteuid() != 0 or setpriv is None:
            pytest.skip("the host can mount here and setpriv cannot take CAP_SYS_ADMIN away")
        prefix = [setpriv, "--bounding-set=-sys_admin"]
        problem = "the host runs without CAP_SYS_ADMIN, so it cannot mount"
    env = {k: v for k, v in os.environ.items() if k != "TOOLHOST_PLUGINS"}
    env.update(TOOLHOST_PLUGINS="", TOOLHOST_DATA_DIR=tempfile.mkdtemp(prefix="toolhost-cli-"))
    result = subprocess.run([*prefix, sys.executable, "-m", "toolhost._cli", "check"],
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, "ok: 0 tools registered from no plugins\n" + not_held(problem), "")
