"""`toolhost artifacts get` streams: a large artifact goes to a file or to stdout through the
store's ``read_chunks``, never held whole, with every guarantee of a verified read kept.

The process under test is a real ``toolhost`` over a real data directory (SQLite and content
files). Its peak memory is read from the kernel (``ru_maxrss`` of a child, in a wrapper process
of its own, so no other test's child counts), compared with the same command's over a tiny
artifact: a loose bound on the difference, never a time.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhost._adapters.artifact_streams import VerifiedChunks
from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._cli.artifacts import _send, _verify
from toolhost._cli.common import CommandError
from toolhost._cli.exit_codes import ExitCode
from toolhost._model.artifacts import ARTIFACT_CEILING, ArtifactOrigin, ArtifactRecord, NewArtifact
from toolhost._model.spec import Trust
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock

MIB = 1024 * 1024
#: The large artifact: many of the CLI's 1 MiB chunks, and far above the memory bound below.
BIG_MIB = 48
#: How much more than the same command over a tiny artifact the large get may peak at. Holding
#: the artifact whole (as a single read does) costs at least BIG_MIB more.
BOUND_MIB = 24

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="ru_maxrss is in KiB on Linux (bytes elsewhere)")

# Runs ARGV as a child, hashing what it writes to stdout as it arrives, and reports the
# child's peak memory: this wrapper's only child, so RUSAGE_CHILDREN is that one's.
_MEASURED = """
import hashlib, json, resource, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
digest, size = hashlib.sha256(), 0
while block := child.stdout.read(1 << 20):
    digest.update(block)
    size += len(block)
stderr = child.stderr.read().decode()
code = child.wait()
print(json.dumps({"code": code, "stdout_size": size, "stdout_sha256": digest.hexdigest(),
                  "stderr": stderr,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def measured_get(data: Path, *args: str) -> dict[str, Any]:
    """``toolhost artifacts get ARGS`` in a process of its own: exit code, stdout's size and
    sha256, stderr, and its peak resident memory in KiB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_PLUGINS="")
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, sys.executable, "-m", "toolhost._cli", "artifacts",
         "get", *args],
        capture_output=True, text=True, env=env, timeout=300, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def big_blocks() -> Iterator[bytes]:
    """BIG_MIB distinct MiB blocks, the same every run."""
    pattern = bytes(range(256)) * (MIB // 256)
    for i in range(BIG_MIB):
        yield i.to_bytes(4, "big") + pattern[4:]


BIG_SHA256 = hashlib.sha256(b"".join(big_blocks())).hexdigest()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data: Path) -> Iterator[SQLiteArtifactStore]:
    """The data directory's store, opened in the test's process (as a second process would)."""
    s = open_artifact_store(data, FixedClock(T0))
    yield s
    s.close()


def put_big(store: SQLiteArtifactStore) -> ArtifactRecord:
    upload = store.begin(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.MODEL_OUTPUT, name="clip.mp4",
            media_type="video/mp4", trust=Trust.EXTERNAL_UNTRUSTED), max_bytes=ARTIFACT_CEILING)
    for block in big_blocks():
        upload.write(block)
    return upload.commit(T0)


def put_tiny(store: SQLiteArtifactStore) -> ArtifactRecord:
    return store.put(NewArtifact(
            run_id="run-1", origin=ArtifactOrigin.EXPORT, name="tiny.txt", media_type="text/plain",
            trust=Trust.INTERNAL_TOOL), b"tiny")


def content_file(store: SQLiteArtifactStore, record: ArtifactRecord) -> Path:
    return store._blob_path(record.checksum)


def flip_byte_at(path: Path, offset: int) -> None:
    """One byte changed in place: the size stays, the checksum does not."""
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(MIB):
            digest.update(block)
    return digest.hexdigest()


def corrupted_line(record: ArtifactRecord, reason: str, *, whole: bool = False) -> str:
    return (f"toolhost: artifact {record.id!r} was not written{' whole' if whole else ''}: "
            f"its stored content no longer matches its checksum ({reason})\n")


# --------------------------------------------------------------------------------------------
# A large artifact, with memory bounded
# --------------------------------------------------------------------------------------------


def test_a_large_artifact_goes_to_a_file_without_being_held_whole(
    store: SQLiteArtifactStore, data: Path, tmp_path: Path
) -> None:
    big, tiny = put_big(store), put_tiny(store)
    out = tmp_path / "out"
    out.mkdir()
    baseline = measured_get(data, tiny.id, "-o", str(out / "tiny.txt"))
    assert (baseline["code"], baseline["stderr"]) == (0, "")
    target = out / "clip.mp4"
    target.write_bytes(b"an older file, replaced")
    got = measured_get(data, big.id, "-o", str(target))
    assert (got["code"], got["stdout_size"], got["stderr"]) == (0, 0, "")
    assert target.stat().st_size == BIG_MIB * MIB and sha256_of(target) == BIG_SHA256
    assert sorted(p.name for p in out.iterdir()) == ["clip.mp4", "tiny.txt"]  # no temp file
    grew_mib = (got["maxrss_kib"] - baseline["maxrss_kib"]) / 1024
    print(f"get -o FILE: peak {got['maxrss_kib'] / 1024:.1f} MiB, over a tiny get's "
          f"{baseline['maxrss_kib'] / 1024:.1f} MiB: +{grew_mib:.1f} MiB")
    assert grew_mib < BOUND_MIB


def test_a_large_artifact_goes_to_stdout_without_being_held_whole(
    store: SQLiteArtifactStore, data: Path
) -> None:
    big, tiny = put_big(store), put_tiny(store)
    baseline = measured_get(data, tiny.id, "-o", "-")
    assert (baseline["code"], baseline["stdout_size"], baseline["stderr"]) == (0, 4, "")
    got = measured_get(data, big.id, "-o", "-")
    assert (got["code"], got["stderr"]) == (0, "")
    assert (got["stdout_size"], got["stdout_sha256"]) == (BIG_MIB * MIB, BIG_SHA256)
    grew_mib = (got["maxrss_kib"] - baseline["maxrss_kib"]) / 1024
    print(f"get -o -: peak {got['maxrss_kib'] / 1024:.1f} MiB, over a tiny get's "
          f"{baseline['maxrss_kib'] / 1024:.1f} MiB: +{grew_mib:.1f} MiB")
    assert grew_mib < BOUND_MIB


# --------------------------------------------------------------------------------------------
# Damaged content: nothing written, nothing left behind, the static line
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda path: flip_byte_at(path, BIG_MIB * MIB // 2), "checksum mismatch"),
        (lambda path: flip_byte_at(path, BIG_MIB * MIB - 1), "checksum mismatch"),
        (lambda path: os.truncate(path, BIG_MIB * MIB - 1),
         f"size {BIG_MIB * MIB - 1} bytes, expected {BIG_MIB * MIB}"),
        (lambda path: os.truncate(path, BIG_MIB * MIB + 1),
         f"size more than {BIG_MIB * MIB} bytes, expected {BIG_MIB * MIB}"),
    ],
    ids=["flipped-mid", "flipped-last", "truncated", "extended"],
)
def test_damaged_large_content_is_refused_and_leaves_nothing(
    store: SQLiteArtifactStore, data: Path, tmp_path: Path, damage: Any, reason: str
) -> None:
    big = put_big(store)
    damage(content_file(store, big))
    out = tmp_path / "out"
    out.mkdir()
    # Into a new file: none appears, and no temp file stays.
    fresh = measured_get(data, big.id, "-o", str(out / "clip.mp4"))
    assert (fresh["code"], fresh["stdout_size"], fresh["stderr"]) == (
        ExitCode.FAILED, 0, corrupted_line(big, reason))
    assert list(out.iterdir()) == []
    # Over an existing file: it is untouched.
    kept = out / "kept.mp4"
    kept.write_bytes(b"mine")
    over = measured_get(data, big.id, "-o", str(kept))
    assert (over["code"], over["stderr"]) == (ExitCode.FAILED, corrupted_line(big, reason))
    assert [p.name for p in out.iterdir()] == ["kept.mp4"] and kept.read_bytes() == b"mine"
    # To stdout, which cannot take bytes back: the first pass refuses before any is written.
    to_stdout = measured_get(data, big.id, "-o", "-")
    assert (to_stdout["code"], to_stdout["stdout_size"], to_stdout["stderr"]) == (
        ExitCode.FAILED, 0, corrupted_line(big, reason))


# --------------------------------------------------------------------------------------------
# The second pass: damage between the verifying read and the writing one
# --------------------------------------------------------------------------------------------


class DamagedBetweenPasses(SQLiteArtifactStore):
    """The real store, whose content file is damaged just before the second read opens it:
    what an outsider writing into the store's files mid-get would do."""

    reads = 0

    def read_chunks(self, artifact_id: str, chunk_size: int = MIB) -> VerifiedChunks:
        self.reads += 1
        if self.reads == 2:
            flip_byte_at(self._blob_path(self.get(artifact_id).checksum), 3 * MIB)
        return super().read_chunks(artifact_id, chunk_size)


@pytest.fixture
def between(data: Path) -> Iterator[DamagedBetweenPasses]:
    s = DamagedBetweenPasses(data / "artifacts", connect(data / DATABASE_NAME), FixedClock(T0),
                             owns_connection=True)
    yield s
    s.close()


def test_a_second_pass_that_no_longer_matches_fails_the_command(
    between: DamagedBetweenPasses,
) -> None:
    big = put_big(between)
    verified = _verify(between, big.id)
    assert verified is None  # more than one chunk: a second pass writes it
    out = io.BytesIO()
    with pytest.raises(CommandError) as caught:
        _send(between, big.id, verified, out, "standard output")
    assert between.reads == 2
    line = corrupted_line(big, "checksum mismatch", whole=True)
    assert (f"toolhost: {caught.value}\n", caught.value.code) == (line, ExitCode.FAILED)
    # What went out before the damage was found is short of the whole content.
    assert len(out.getvalue()) < BIG_MIB * MIB


def test_content_of_one_chunk_is_read_once(between: DamagedBetweenPasses) -> None:
    tiny = put_tiny(between)
    verified = _verify(between, tiny.id)
    out = io.BytesIO()
    _send(between, tiny.id, verified, out, "standard output")
    assert (verified, out.getvalue(), between.reads) == (b"tiny", b"tiny", 1)
