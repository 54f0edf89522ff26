"""toolhost.testing's helpers for tests of what an operator sees: ``run_toolhost``, the
loopback TLS server, the hypothesis profile the pytest plugin loads, and the workspace a test
wraps around a run's real one."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolhost import Provenance, ProvenancedChunks, Workspace
from toolhost.testing import (
    ForwardingWorkspace,
    Harness,
    Host,
    StartTLSServer,
    WatchedChunks,
    loopback_tls_server,
    run_toolhost,
)


def test_a_forwarding_workspace_is_the_real_one_in_every_member_of_the_port(
        tmp_path: Path) -> None:
    # Every member of the public Protocol is forwarded (a port that gains one fails here),
    # and a read keeps the handle's own chunks, which say whose bytes were read.
    members = {n for n in vars(Workspace) if not n.startswith("_")}
    assert members <= set(vars(ForwardingWorkspace))
    with Host.from_plugins({}, data_dir=tmp_path) as host:
        real = host.fresh_workspace("run-1")
        wrapped = ForwardingWorkspace(real)
        assert wrapped.write("d/a.md", b"the run's").byte_count == 9
        assert wrapped.read("d/a.md") == b"the run's"
        chunks = wrapped.read_chunks("d/a.md", 4)
        assert isinstance(chunks, ProvenancedChunks) and b"".join(chunks) == b"the run's"
        assert chunks.provenance() is Provenance.TOOL_WRITTEN
        assert wrapped.provenance("d/a.md") is Provenance.TOOL_WRITTEN
        assert [e.path for e in wrapped.listdir(recursive=True).entries] == ["d", "d/a.md"]
        real.discard()


def test_a_harness_ends_the_runs_its_contexts_started(tmp_path: Path) -> None:
    # A context's run is never handed to the test, so the harness ends it: left live, its
    # workspace (a mounted filesystem where the host sizes workspaces: this root machine)
    # outlived the process in the test's data directory.
    with Harness.over({}, data_dir=tmp_path / "data") as harness:
        context = harness.context()
        root = Path(context.workspace.root)
        context.workspace.write("a.txt", b"written")
        assert root.is_dir()
        kept = harness.start_run()  # the test's own run: still live after close
        kept_root = Path(harness.context(run=kept).workspace.root)
        kept_root.joinpath("b.txt").write_bytes(b"kept")
    assert not root.exists() and not os.path.ismount(root)
    assert kept_root.joinpath("b.txt").read_bytes() == b"kept"
    with Harness.over({}, data_dir=tmp_path / "data") as harness:
        harness.end_run(kept)
    assert not kept_root.exists()


def test_a_harness_closes_its_host_when_ending_a_run_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness = Harness.over({}, data_dir=tmp_path / "data")
    roots = [Path(harness.context().workspace.root) for _ in range(2)]
    release = harness.host.release_run
    calls: list[str] = []

    def fails_first(run: Any) -> None:
        calls.append(run.id)
        if len(calls) == 1:
            raise OSError("a release that failed")
        release(run)

    monkeypatch.setattr(harness.host, "release_run", fails_first)
    with pytest.raises(OSError, match="a release that failed"):
        harness.close()
    assert len(calls) == 2 and not roots[1].exists()  # the other run still ended
    assert harness.host.closed


def test_a_harness_whose_host_the_test_closed_leaves_nothing_behind() -> None:
    harness = Harness.over({})  # its own temporary data directory
    harness.context()
    data_dir = harness.host.data_dir
    harness.host.close()
    assert not data_dir.exists()
    harness.close()
    assert not data_dir.exists()  # not made again to end the context's run


def test_watched_chunks_keep_the_reads_provenance_and_say_when_each_chunk_is_used(
        tmp_path: Path) -> None:
    seen: list[str] = []
    with Host.from_plugins({}, data_dir=tmp_path) as host:
        real = host.fresh_workspace("run-1")
        real.write("a.md", b"abcdefghij")
        watched = WatchedChunks(real.read_chunks("a.md", 4),
                                after=lambda i: seen.append(f"after {i}"),
                                done=lambda: seen.append("done"))
        assert isinstance(watched, ProvenancedChunks)
        assert watched.provenance() is Provenance.UNKNOWN  # nothing read yet
        for chunk in watched:
            seen.append(chunk.decode())
        assert seen == ["abcd", "after 0", "efgh", "after 1", "ij", "after 2", "done"]
        assert watched.provenance() is Provenance.TOOL_WRITTEN
        early = WatchedChunks(real.read_chunks("a.md", 4), done=lambda: seen.append("closed"))
        next(early)
        early.close()
        early.close()
        assert seen[-1:] == ["closed"] and seen.count("closed") == 1
        assert early.provenance() is Provenance.UNKNOWN  # closed before the last chunk
        with pytest.raises(StopIteration):
            next(early)  # a closed read gives nothing and calls nothing
        assert seen.count("closed") == 1
        real.discard()


def test_watched_chunks_end_when_the_read_fails_or_is_dropped_unclosed() -> None:
    # What a generator double's `finally` did: a double that undoes a disturbance in done()
    # must undo it however the read ends (found by review).
    seen: list[str] = []

    def failing() -> Iterator[bytes]:
        yield b"a"
        raise OSError("the disk went away")

    watched = WatchedChunks(failing(), after=lambda i: seen.append(f"after {i}"),
                            done=lambda: seen.append("done"))
    assert next(watched) == b"a"
    with pytest.raises(OSError):
        next(watched)
    with pytest.raises(StopIteration):
        next(watched)
    assert seen == ["after 0", "done"]
    dropped = WatchedChunks(iter([b"a", b"b"]), done=lambda: seen.append("dropped"))
    next(dropped)
    del dropped
    assert seen[-1] == "dropped"


def test_run_toolhost_sees_only_what_the_test_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The machine's settings would break the command: none of them reaches it.
    broken = tmp_path / "toolhost.toml"
    broken.write_text("not = [toml")
    monkeypatch.setenv("TOOLHOST_CONFIG", str(broken))
    monkeypatch.setenv("TOOLHOST_PLUGINS", "toolhost-nonexistent")
    monkeypatch.setenv("TOOLHOST_LOG_LEVEL", "loud")
    done = run_toolhost("call", "math.calculate", "--args", '{"expression": "6 * 7"}',
                        data_dir=tmp_path / "data", plugins="toolhost-math")
    assert (done.returncode, done.stdout, done.stderr) == (0, "42\n", "")
    assert (tmp_path / "data" / "toolhost.sqlite3").is_file()


def test_run_toolhost_takes_input_and_a_wrapper(tmp_path: Path) -> None:
    wrapped = run_toolhost("tools", "--json", data_dir=tmp_path, plugins="",
                           command=[sys.executable, "-c",
                                    "import sys; print(sys.argv[1:], sys.stdin.read())"],
                           input="typed")
    assert wrapped.stdout == "['tools', '--json'] typed\n"


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def test_the_loopback_server_is_trusted_through_its_bundle_only(tmp_path: Path) -> None:
    with loopback_tls_server(_Hello, tmp_path) as server:
        trusting = ssl.create_default_context(cafile=str(server.ca_bundle))
        assert httpx.get(server.base_url, verify=trusting, timeout=10).text == "hello"
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(server.base_url, verify=ssl.create_default_context(), timeout=10)
        assert server.base_url == f"https://127.0.0.1:{server.port}"


def test_the_fixture_starts_servers_with_bundles_of_their_own(
        toolhost_tls_server: StartTLSServer) -> None:
    one, two = toolhost_tls_server(_Hello), toolhost_tls_server(_Hello)
    assert one.ca_bundle != two.ca_bundle and one.port != two.port
    with pytest.raises(httpx.ConnectError):
        httpx.get(one.base_url, verify=ssl.create_default_context(cafile=str(two.ca_bundle)),
                  timeout=10)


SLOW_PROPERTY = textwrap.dedent("""
    import time
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=1)
    @given(st.none())
    def test_slow(n):
        time.sleep(0.3)  # past hypothesis's default deadline of 200 ms
""")


@pytest.mark.parametrize(("options", "outcome"), [
    ((), "1 passed"),
    # Another profile chosen on the command line wins: the default's deadline fails it.
    (("--hypothesis-profile", "default"), "1 failed"),
])
def test_the_plugin_loads_a_profile_without_the_deadline(
        tmp_path: Path, options: tuple[str, ...], outcome: str) -> None:
    (tmp_path / "test_slow.py").write_text(SLOW_PROPERTY)
    # Not in CI's environment: hypothesis's own ci profile (no deadline either) would win.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", *options, "test_slow.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert outcome in done.stdout, done.stdout
