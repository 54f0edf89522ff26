"""The determinism scan's content-keyed cache (``toolhost check``): a file whose bytes were
scanned is not parsed again, a changed file is, and the cache can never make check fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhost._registration import ambient
from toolhost._registration.ambient import find_ambient_reads
from toolhost._registration.scan_cache import ScanCache

CLOCK_READ = "import time\n\n\ndef f():\n    return time.time()\n"


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    root = tmp_path / "plugin"
    root.mkdir()
    (root / "clean.py").write_text("def f():\n    return 1\n")
    (root / "reads.py").write_text(CLOCK_READ)
    return root


def test_cached_findings_are_the_scans_own(plugin: Path, tmp_path: Path) -> None:
    path = tmp_path / "cache" / "scan.json"
    uncached = find_ambient_reads([plugin])
    first = ScanCache(path)
    assert find_ambient_reads([plugin], cache=first) == uncached
    first.save()
    assert find_ambient_reads([plugin], cache=ScanCache(path)) == uncached
    assert uncached == [f"{plugin / 'reads.py'}:5: time.time()"]


def test_a_file_seen_before_is_not_parsed_again(
        plugin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "scan.json"
    cache = ScanCache(path)
    find_ambient_reads([plugin], cache=cache)
    cache.save()
    parsed: list[str] = []
    real = ambient.scan_source
    monkeypatch.setattr(ambient, "scan_source",
                        lambda source, name: parsed.append(name) or real(source, name))
    assert len(find_ambient_reads([plugin], cache=ScanCache(path))) == 1
    assert parsed == []
    # A changed file is a new key: it is parsed, and its new finding is reported.
    (plugin / "clean.py").write_text("import uuid\n\nX = uuid.uuid4()\n")
    found = find_ambient_reads([plugin], cache=ScanCache(path))
    assert parsed == [str(plugin / "clean.py")]
    assert f"{plugin / 'clean.py'}:3: uuid.uuid4()" in found


def test_a_changed_scanner_is_a_new_key(plugin: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ScanCache(tmp_path / "scan.json")
    before = cache.key(b"x")
    fake = tmp_path / "ambient.py"
    fake.write_text(Path(ambient.__file__).read_text() + "\n# a new rule\n")
    monkeypatch.setattr(ambient, "__file__", str(fake))
    assert ScanCache(tmp_path / "scan.json").key(b"x") != before


@pytest.mark.parametrize("garbage", [b"", b"not json", b"[1, 2]", b'{"k": 3}', b"\xff\xfe"])
def test_a_damaged_cache_is_an_empty_one(plugin: Path, tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "scan.json"
    path.write_bytes(garbage)
    cache = ScanCache(path)
    assert find_ambient_reads([plugin], cache=cache) == find_ambient_reads([plugin])
    cache.save()
    assert len(ScanCache(path)) == 2


def test_a_cache_that_cannot_be_written_is_not_an_error(plugin: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    cache = ScanCache(blocked / "cache" / "scan.json")  # its parent is a file
    assert len(find_ambient_reads([plugin], cache=cache)) == 1
    cache.save()
    assert blocked.read_text() == ""
