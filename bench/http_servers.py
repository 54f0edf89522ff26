"""`toolhost serve --http` processes for the HTTP benches: started, and waited for until they
say they serve."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def start_http_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """``toolhost serve --http 127.0.0.1:PORT`` with ``env``, its stderr in ``log``, once it
    says it serves (a SystemExit with its stderr if it ends or takes a minute first)."""
    with log.open("w") as errlog:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolhost._cli", "serve", "--http", f"127.0.0.1:{port}"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    deadline = time.monotonic() + 60
    while "toolhost: serving " not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"a server did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return process
