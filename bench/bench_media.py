"""image.generate's streaming path against a plain httpx download of the same bytes.

Standalone: ``python bench/bench_media.py [--runs N] [--mib M ...]`` from the repository root,
with toolhost, toolhost-media and trustme installed. A fake TensorScale (a real
``ThreadingHTTPServer`` over TLS on loopback, certificate from a throwaway ``trustme`` CA
trusted through ``TOOLHOST_CA_BUNDLE``) answers every POST with an M MiB PNG, written in 1 MiB
blocks, unique per answer as generated files are. It runs in a process of its own, as a real
provider is remote: in this one its TLS encryption would compete for the GIL with the client's
decryption and the store's work. The ways to take it, interleaved run by run so noise hits
each alike, in one long-lived client process:

- ``httpx, sync client``: the same download with the host's sync client (``Services.http``),
  for comparison: no event loop, and the TLS read in the ``ssl`` module's C code.
- ``user's loop``: issue #27's reference, what a user writes to keep the file: the sync
  client's stream, each chunk hashed (sha256) and written to a file, fsynced at the end. The
  last line of each size is the adapter's path and the pipeline call against it.
- ``httpx``: the reference. The host's own async httpx client (``Services.async_http``: same
  TLS context, same policy) POSTs the same JSON and reads the body with ``aiter_bytes``,
  discarding it.
- ``adapter → store``: the TensorScale adapter (status, type, signature and cap checks) into
  the run's streaming ArtifactWriter (``toolhost_media.generate.save``): every byte hashed,
  written to a staged file and published, as the tool body does. Since D321 the download
  runs on a thread of its own with the sync client, the user's loop with the adapter's
  checks; before, the async client on the event loop with a writer thread beside it.
- ``adapter, no store`` and ``store, no network``: the two halves of the adapter's path
  alone (the adapter's checks with the bytes discarded; the same bytes written in 16 KiB
  chunks, what TLS hands the client, to a streaming ArtifactWriter and committed), to show
  where the time goes.
- ``pipeline call``: the whole tool through the host's pipeline (``Harness.call``), with the
  row recorded: what a model's call costs.
- ``httpx + thread hashing`` and ``httpx + thread writing``: the reference download while an
  independent thread, told each time another MiB has arrived, sha256-hashes (or writes to a
  plain file, fsynced at the end) that MiB of the same bytes. No data passes between them and
  nothing of the adapter or the store runs: what the store's two kinds of work cost a
  download merely by running beside it on this machine, the floor under any design that
  overlaps them with the download.

Figures are medians of N runs in MiB/s, with each path's ratio to httpx's time (target for
the adapter: at most 1.2x), and the ratio of the CPU time the event loop's thread spent to
httpx's: on a shared machine the wall time also counts waiting for a core, while the loop
thread's CPU is the critical path a free core for the writer thread would leave. The last
column is the server process's CPU time per run (Linux ``/proc``): what the provider's side
costs this machine's two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import queue
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
KEY = "bench-key"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: What one TLS record carries, so what the client's reads hand over.
_TLS_RECORD = 16 * 1024

try:
    import trustme
    from toolhost_media import plugin
    from toolhost_media.generate import save
    from toolhost_media.provider import ImageRequest
    from toolhost_media.tensorscale import TensorScale

    from toolhost import ArtifactOrigin, Secret, Trust
    from toolhost.testing import Harness
except ImportError as exc:  # pragma: no cover - an operator's environment
    sys.exit(f"bench_media needs toolhost, toolhost-media and trustme installed ({exc})")


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        view = memoryview(self.server.body)
        # Each answer unique, as generated files are: the same bytes again would take the
        # store's reuse path (verify the existing file) instead of publishing a new one.
        self.wfile.write(_unique(view[:MIB]))
        for start in range(MIB, len(view), MIB):
            self.wfile.write(view[start:start + MIB])

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext, body: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context
        self.body = body

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        return self.context.wrap_socket(sock, server_side=True), addr


_counter = itertools.count()


def _unique(head: memoryview) -> bytes:
    """``head`` with a fresh counter and this process's id in the 16 bytes after the PNG
    signature."""
    stamp = next(_counter).to_bytes(8, "big") + os.getpid().to_bytes(8, "big")
    return bytes(head[:8]) + stamp + bytes(head[24:])


def _serve(mib: int, cert_chain: str) -> None:
    """The fake TensorScale's process: prints its port, serves until stdin closes."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_chain)
    server = _Server(context, _body(mib))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()
    server.server_close()


class _Remote:
    """The fake TensorScale in its own process, as a real provider is: its TLS encryption
    does not compete for this process's GIL with the client's decryption and the store."""

    def __init__(self, mib: int, cert_chain: Path) -> None:
        self.body = _body(mib)
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--mib", str(mib),
             "--cert-chain", str(cert_chain)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        port = int(self._process.stdout.readline())
        self.base_url = f"https://127.0.0.1:{port}"

    def cpu(self) -> float:
        """The server process's CPU seconds so far (Linux ``/proc``; 0.0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1]
        except OSError:
            return 0.0
        utime, stime = fields.split()[11:13]
        return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)


def _body(mib: int) -> bytes:
    # Not all zeros: a store or a transport that compresses would flatter itself.
    block = bytes(range(256)) * (MIB // 256)
    return (PNG_SIGNATURE + block * mib)[: mib * MIB]


async def _plain(harness: Harness, url: str) -> int:
    async with harness.services("toolhost-media").async_http(timeout=600) as client, \
            client.stream("POST", url + "/v2/sensenova-u1.5/t2i",
                          json={"prompt": "bench", "size": "1024x1024"},
                          headers={"Authorization": f"Bearer {KEY}"}) as response:
        got = 0
        async for chunk in response.aiter_bytes():
            got += len(chunk)
        return got


async def _plain_beside(harness: Harness, url: str, body: bytes, work: str,
                        into: Path) -> int:
    """The reference download while a thread hashes or writes each MiB as it passes."""
    arrived: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    thread = threading.Thread(target=_beside, args=(arrived, memoryview(body), work, into))
    thread.start()
    try:
        async with harness.services("toolhost-media").async_http(timeout=600) as client, \
                client.stream("POST", url + "/v2/sensenova-u1.5/t2i",
                              json={"prompt": "bench", "size": "1024x1024"},
                              headers={"Authorization": f"Bearer {KEY}"}) as response:
            got = told = 0
            async for chunk in response.aiter_bytes():
                got += len(chunk)
                if got - told >= MIB:
                    arrived.put(got)
                    told = got
            arrived.put(got)
    finally:
        arrived.put(None)
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
    return got


def _beside(arrived: queue.SimpleQueue[int | None], body: memoryview, work: str,
            into: Path) -> None:
    digest = hashlib.sha256()
    with open(into, "wb") as file:
        done = 0
        while (upto := arrived.get()) is not None:
            if work == "hash":
                digest.update(body[done:upto])
            else:
                file.write(body[done:upto])
            done = upto
        file.flush()
        os.fsync(file.fileno())


def _plain_sync(harness: Harness, url: str) -> int:
    """The same download with the host's sync client (``Services.http``): no event loop, the
    TLS read in the ``ssl`` module's C code, for comparison with the async path."""
    with harness.services("toolhost-media").http(timeout=600) as client, \
            client.stream("POST", url + "/v2/sensenova-u1.5/t2i",
                          json={"prompt": "bench", "size": "1024x1024"},
                          headers={"Authorization": f"Bearer {KEY}"}) as response:
        got = 0
        for chunk in response.iter_bytes():
            got += len(chunk)
        return got


def _users_loop(harness: Harness, url: str, into: Path) -> int:
    """The loop a user writes to keep the file: stream, sha256, write, fsync (issue #27)."""
    digest = hashlib.sha256()
    with harness.services("toolhost-media").http(timeout=600) as client, \
            client.stream("POST", url + "/v2/sensenova-u1.5/t2i",
                          json={"prompt": "bench", "size": "1024x1024"},
                          headers={"Authorization": f"Bearer {KEY}"}) as response, \
            open(into, "wb") as file:
        got = 0
        for chunk in response.iter_bytes():
            digest.update(chunk)
            file.write(chunk)
            got += len(chunk)
        file.flush()
        os.fsync(file.fileno())
        return got


async def _adapter(harness: Harness, url: str, run: Any) -> int:
    client = harness.services("toolhost-media").http(timeout=600)
    context = harness.context(run=run, timeout_s=600)
    ref = await save(TensorScale(client, Secret(KEY), url),
                     ImageRequest(prompt="bench", size="1024x1024"), context, "image-bench.png")
    return ref.byte_count


def _adapter_only(harness: Harness, url: str) -> int:
    got = 0
    with TensorScale(harness.services("toolhost-media").http(timeout=600), Secret(KEY),
                     url) as provider:
        for chunk in provider.stream(ImageRequest(prompt="bench", size="1024x1024")):
            got += len(chunk)
    return got


def _store_only(harness: Harness, run: Any, body: bytes) -> None:
    context = harness.context(run=run, timeout_s=600)
    view = memoryview(body)
    with context.artifacts.stream(origin=ArtifactOrigin.MODEL_OUTPUT, name="image-store.png",
                                  media_type="image/png", trust=Trust.EXTERNAL_UNTRUSTED,
                                  max_bytes=len(body)) as out:
        out.write(_unique(view[:_TLS_RECORD]))
        for start in range(_TLS_RECORD, len(view), _TLS_RECORD):
            out.write(bytes(view[start:start + _TLS_RECORD]))
        out.commit()


def _ok(outcome: Any) -> None:
    if not outcome.ok:
        raise SystemExit(f"the pipeline call failed: {outcome.failure}")


def _measure(harness: Harness, server: _Remote, runs: int,
             beside: Path) -> dict[str, list[tuple[float, float, float]]]:
    """(wall, this thread's CPU, the server's CPU) seconds per run of each path, interleaved
    run by run after one warm-up each."""
    run = harness.start_run()
    url = server.base_url
    paths = {
        "httpx": lambda: asyncio.run(_plain(harness, url)),
        "httpx, sync client": lambda: _plain_sync(harness, url),
        "user's loop": lambda: _users_loop(harness, url, beside.with_suffix(".user")),
        "adapter, no store": lambda: _adapter_only(harness, url),
        "store, no network": lambda: _store_only(harness, run, server.body),
        "adapter → store": lambda: asyncio.run(_adapter(harness, url, run)),
        "pipeline call": lambda: _ok(harness.call("image.generate", {"prompt": "bench"},
                                                  run=run)),
        "httpx + thread hashing": lambda: asyncio.run(
            _plain_beside(harness, url, server.body, "hash", beside)),
        "httpx + thread writing": lambda: asyncio.run(
            _plain_beside(harness, url, server.body, "write", beside)),
    }
    for fn in paths.values():  # warm up: imports, connections, first files
        fn()
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in paths}
    for _ in range(runs):
        for name, fn in paths.items():
            times[name].append(_timed(fn, server))
    return times


def _timed(fn: Any, server: _Remote) -> tuple[float, float, float]:
    start, cpu, served = time.perf_counter(), time.thread_time(), server.cpu()
    fn()
    return (time.perf_counter() - start, time.thread_time() - cpu, server.cpu() - served)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--mib", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cert-chain", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.mib[0], args.cert_chain)
        return

    ca = trustme.CA()
    with tempfile.TemporaryDirectory(prefix="bench-media-") as tmp:
        bundle = Path(tmp) / "ca.pem"
        ca.cert_pem.write_to_path(str(bundle))
        cert_chain = Path(tmp) / "server.pem"
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert_chain))
        print(f"python {sys.version.split()[0]}, {args.runs} interleaved runs per size, "
              "medians; ratio = time / httpx's time; server in its own process; "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"{'size':>6}  {'path':<24} {'MiB/s':>8} {'ratio':>6}  (min-max ratio)  "
              "loop CPU ratio  server CPU ms")
        for mib in args.mib:
            server = _Remote(mib, cert_chain)
            env = {"TENSORSCALE_API_KEY": KEY, "TENSORSCALE_BASE_URL": server.base_url,
                   "TOOLHOST_CA_BUNDLE": str(bundle),
                   "TOOLHOST_POLICY": '{"EXTERNAL_WRITE/HIGH": "allow"}',
                   "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1"}
            try:
                with Harness.over({"toolhost-media": plugin}, settings=env,
                                  data_dir=Path(tmp) / f"data-{mib}") as harness:
                    times = _measure(harness, server, args.runs, Path(tmp) / f"beside-{mib}.bin")
                    walls = {name: [w for w, _, _ in runs] for name, runs in times.items()}
                    cpus = {name: [c for _, c, _ in runs] for name, runs in times.items()}
                    served = {name: [s for _, _, s in runs] for name, runs in times.items()}
                    base = statistics.median(walls["httpx"])
                    base_cpu = statistics.median(cpus["httpx"])
                    for name, spent in walls.items():
                        ratios = [t / b for t, b in zip(spent, walls["httpx"], strict=True)]
                        median = statistics.median(spent)
                        # These download on a thread of their own: nothing to show.
                        cpu = ("-" if name in ("pipeline call", "adapter → store") else
                               f"{statistics.median(cpus[name]) / base_cpu:.2f}")
                        server_ms = statistics.median(served[name]) * 1000
                        print(f"{mib:>4}MiB  {name:<24} {mib / median:>8.0f} "
                              f"{median / base:>6.2f}  ({min(ratios):.2f}-{max(ratios):.2f})"
                              f"  {cpu:>10}  {server_ms:>13.0f}")
                    users = statistics.median(walls["user's loop"])
                    print(f"{mib:>4}MiB  against the user's loop (target 1.1x): adapter → store "
                          f"{statistics.median(walls['adapter → store']) / users:.2f}x, "
                          f"pipeline call {statistics.median(walls['pipeline call']) / users:.2f}x")
            finally:
                server.close()
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
