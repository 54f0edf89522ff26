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
    """Head and tail of ``content`` around a marker, at most ``budget`` UTF-8 bytes in all.

    Head and tail never overlap: content that fits beside the marker is kept whole, before
    it, and the marker says 0 bytes were elided (the structured result is what was withheld).
    A budget too small for the marker itself gets as much of the marker as fits and none of
    the content; the artifact is still in the outcome's ``artifacts``.
    """
    data = content.encode("utf-8")
    total = len(data)
    worst = elision_marker(total, total, artifact_id, checksum).encode()
    if len(worst) > budget:
        return _head(worst, max(budget, 0)).decode("utf-8")
    # The marker's length depends on the count it prints. Sized for the worst count (all of
    # it elided) the excerpt always fits; sized again for the count that elides, it uses the
    # few bytes the shorter number left, unless a character boundary made it elide more.
    head, tail = _cut(data, budget - len(worst))
    marker = _marker(head, tail, total, artifact_id, checksum)
    tighter = _cut(data, budget - len(marker))
    again = _marker(*tighter, total, artifact_id, checksum)
    if len(tighter[0]) + len(again) + len(tighter[1]) <= budget:
        (head, tail), marker = tighter, again
    return head.decode("utf-8") + marker.decode("utf-8") + tail.decode("utf-8")


def _marker(head: bytes, tail: bytes, total: int, artifact_id: str, checksum: str) -> bytes:
    return elision_marker(total - len(head) - len(tail), total, artifact_id, checksum).encode()


def _cut(data: bytes, room: int) -> tuple[bytes, bytes]:
    """The head and tail kept in ``room`` bytes: all of ``data`` when it fits, else about half
    each, on character boundaries, never overlapping."""
    if len(data) <= room:
        return data, b""
    head = _head(data, room // 2)
    return head, _tail(data, room - len(head))
