"""Pipeline step 12: what happens to an output larger than the tool's maximum_output_bytes.

Up to the hard ceiling, the model gets a head-and-tail excerpt with an explicit elision marker
naming the artifact that holds the whole output. Past it, the call fails OUTPUT_TOO_LARGE and
the partial output is kept as an artifact for the operator.
"""

from __future__ import annotations

__all__ = ["elision_marker", "excerpt"]


def elision_marker(elided: int, total: int, artifact_id: str, checksum: str) -> str:
    return (
        f"\n[... {elided} bytes elided of {total}. The whole output is artifact "
        f"{artifact_id} ({checksum}). ...]\n"
    )


def _head(data: bytes, limit: int) -> bytes:
    # Never cut inside a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
    end = min(limit, len(data))
    while 0 < end < len(data) and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


def _tail(data: bytes, limit: int) -> bytes:
    start = max(len(data) - limit, 0)
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def excerpt(content: str, budget: int, artifact_id: str, checksum: str) -> str:
    """Head and tail of ``content`` around a marker, at most ``budget`` UTF-8 bytes in all."""
    data = content.encode("utf-8")
    # The marker's own length depends on the number it prints; size it for the worst case.
    marker_budget = len(elision_marker(len(data), len(data), artifact_id, checksum).encode())
    room = max(budget - marker_budget, 0)
    head = _head(data, room // 2)
    tail = _tail(data, room - room // 2)
    marker = elision_marker(len(data) - len(head) - len(tail), len(data), artifact_id, checksum)
    return head.decode("utf-8") + marker + tail.decode("utf-8")
