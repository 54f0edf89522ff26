"""While the provider works (minutes, up to the tool's deadline), the call holds its reference
images once, as read: the data URIs and the encoded JSON request are let go of once sent.

Regression (adversarial review of toolhost-media, finding 3): the data URIs and the encoded
request lived as locals of the download generator, and httpx kept the request's bytes with
the response, so the references were held about 3.7 times over for the whole wait.

Measured with tracemalloc, in this process: what was allocated since the call began and is
still live while the fake provider "thinks", leaving out the fake's own copies (it parses the
request it received).
"""

from __future__ import annotations

import threading
import time
import tracemalloc

from media_support import PNG, FakeTensorScale, Handler, call, ok
from toolhost import ArtifactOrigin, Trust
from toolhost.testing import Harness

MiB = 1024 * 1024
REFERENCES = 4
EACH = 5 * MiB
RAW = REFERENCES * EACH
#: Loose: the raw references once, and room for whatever else the call holds. Before the fix
#: the wait held about 3.7 times RAW.
BOUND = 2 * RAW
#: How long the provider waits for the client to settle into its wait (a safety bound).
SETTLE_S = 10.0


def held_by_the_client() -> int:
    """Bytes allocated since tracing began and still live, the fake server's excluded."""
    snapshot = tracemalloc.take_snapshot().filter_traces([
        tracemalloc.Filter(False, "*media_support.py", all_frames=True),
        tracemalloc.Filter(False, tracemalloc.__file__),
    ])
    return sum(stat.size for stat in snapshot.statistics("filename"))


def test_the_references_are_held_once_while_the_provider_works(
    host: Harness, server: FakeTensorScale,
) -> None:
    run = host.start_run(scopes=("media.generate", "artifact.write", "artifact.read"))
    ids = [host.context(run=run).artifacts.write(
        origin=ArtifactOrigin.EXPORT, name=f"r{i}.png", media_type="image/png",
        content=PNG + bytes([i]) * (EACH - len(PNG)), trust=Trust.INTERNAL_TOOL).id
        for i in range(REFERENCES)]
    samples: list[int] = []
    answer = ok(PNG, "image/png")

    def works(h: Handler) -> None:
        # The request is read, the provider "generates": sample until the client has let go
        # of what it sent (it may still be returning from the send), or the bound is past.
        until = time.monotonic() + SETTLE_S
        while True:
            samples.append(held_by_the_client())
            if samples[-1] < BOUND or time.monotonic() > until:
                break
            threading.Event().wait(0.1)
        answer(h)

    # A first call imports and builds what any call needs, so the traced call is this one's.
    assert call(host, "image.generate", {"prompt": "warm up"}, run=run).ok
    server.reply = works
    # Deep enough to see the fake's handler under the json and socket frames it calls.
    tracemalloc.start(16)
    try:
        outcome = call(host, "image.generate",
                       {"prompt": "x", "reference_image_ids": ids}, run=run)
    finally:
        tracemalloc.stop()
    assert outcome.ok, outcome
    assert len(server.received[1].body["images"]) == REFERENCES
    assert samples, "the provider never sampled"
    assert min(samples) < BOUND, (
        f"{min(samples) / MiB:.0f} MiB held while the provider works, for {RAW / MiB:.0f} MiB "
        f"of references")
