"""A local artifact store whose disk fails once the provider answered (second adversarial
review, D359): before the fix the full disk's OSError reached the model as the host's
INTERNAL_UNEXPECTED, with no warning that the request may have been charged, while the same
outage of an S3 store did warn. Now a local disk's failure is the store's outage, which for a
NON_IDEMPOTENT tool is the non-retryable failure that says the request may have been charged.

The disk's failure is real: RLIMIT_FSIZE makes the kernel refuse the staging file's write past
the limit with EFBIG, as a full disk refuses it with ENOSPC.
"""

from __future__ import annotations

from media_support import PNG, FakeTensorScale, call, sized
from toolhost.testing import Harness, file_size_limit

CHARGED = "been charged"


def test_a_full_local_disk_after_the_provider_answered_warns_of_a_charge(
    host: Harness, server: FakeTensorScale,
) -> None:
    server.reply = sized(PNG[:8], 6 * 1024 * 1024, "image/png")
    with file_size_limit(2 * 1024 * 1024):
        outcome = call(host, "image.generate", {"prompt": "a lighthouse"})
    assert len(server.received) == 1  # the provider was asked (and may bill)
    assert outcome.failure is not None, outcome.to_json()
    assert outcome.failure.reason_code == (
        "tool.upstream_unavailable.artifact_store_may_have_taken_effect"), outcome.failure
    assert outcome.failure.retryable is False
    assert CHARGED in outcome.content, outcome.content
    assert outcome.failure.detail["exception"] == "FileStoreUnavailable"
