"""A command run as a person runs it at a terminal: its stderr a real pseudo-terminal.

What a progress line writes (``\\r``, erase to the end of the line) is only written to a
terminal, so the test of one needs a terminal, not a pipe.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
from collections.abc import Mapping, Sequence

__all__ = ["run_on_a_terminal"]


def run_on_a_terminal(argv: Sequence[str], env: Mapping[str, str], *, columns: int = 100,
                      timeout: float = 60.0) -> tuple[int, str, str]:
    """Run ``argv`` with its stderr a pseudo-terminal of ``columns`` columns (its stdout a
    pipe): its exit status, its stdout, and every byte the terminal received, as written
    (no ``\\n`` to ``\\r\\n`` translation).

    :raises AssertionError: the command wrote nothing and did not end within ``timeout``.
    """
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    with subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.PIPE,
                          stderr=slave) as process:
        os.close(slave)
        received = bytearray()
        try:
            while True:
                ready, _, _ = select.select([master], [], [], timeout)
                assert ready, "the command neither wrote nor ended"
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not chunk:
                    break
                received += chunk
            assert process.stdout is not None
            out = process.stdout.read().decode()
            code = process.wait(timeout=timeout)
        finally:
            os.close(master)
            if process.poll() is None:
                process.kill()
    return code, out, received.decode()
