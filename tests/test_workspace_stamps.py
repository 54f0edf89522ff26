"""The stamps log a shared workspace keeps its provenance in (``workspace_stamps``): what one
process appends another reads; a torn or foreign line reads as no stamp; a rewrite is read
whole, even one the filesystem gave the replaced file's inode number."""

from __future__ import annotations

from pathlib import Path

from toolhost._adapters import workspace_stamps
from toolhost._adapters.workspace_stamps import Stamp, StampBook
from toolhost._model.workspace import Provenance


def stamp(n: int, provenance: Provenance = Provenance.TOOL_WRITTEN) -> Stamp:
    return Stamp(1, n, 1, n, n, provenance)


def test_what_one_book_appends_the_other_reads(tmp_path: Path) -> None:
    log = tmp_path / "g.stamps"
    writer, reader = StampBook(log), StampBook(log)
    writer.apply({"a": stamp(1), "b": stamp(2)})
    assert reader.get("a") == stamp(1)
    writer.apply({"a": None, "b": stamp(3, Provenance.SANDBOX_WRITTEN)})
    assert (reader.get("a"), reader.get("b")) == (None, stamp(3, Provenance.SANDBOX_WRITTEN))
    reader.clear()
    assert writer.get("b") is None


def test_a_torn_or_foreign_line_is_no_stamp(tmp_path: Path) -> None:
    log = tmp_path / "g.stamps"
    StampBook(log).apply({"a": stamp(1)})
    with log.open("ab") as f:
        f.write(b'["b", [1, 2, 3, 4, 5, "ROOT"]]\n["c", "not a stamp"]\n["d", [1, 2')
    book = StampBook(log)
    assert book.get("a") == stamp(1)
    assert (book.get("b"), book.get("c"), book.get("d")) == (None, None, None)


def test_a_rewrite_under_the_same_inode_is_read_whole(tmp_path: Path) -> None:
    # A rewrite replaces the file; the filesystem may give the new one the old inode number,
    # so a reader that knew the old file only by inode and offset would read from the middle.
    log = tmp_path / "g.stamps"
    writer, reader = StampBook(log), StampBook(log)
    writer.apply({"a": stamp(1)})
    assert reader.get("a") == stamp(1)
    inode = log.stat().st_ino
    rewritten = StampBook(tmp_path / "other.stamps")
    rewritten.apply({"b": stamp(2), "c": stamp(3), "d": stamp(4)})
    log.write_bytes((tmp_path / "other.stamps").read_bytes())  # in place: the same inode
    assert log.stat().st_ino == inode
    assert (reader.get("a"), reader.get("b"), reader.get("d")) == (None, stamp(2), stamp(4))


def test_the_log_is_rewritten_when_it_holds_far_more_lines_than_stamps(tmp_path: Path) -> None:
    log = tmp_path / "g.stamps"
    book, other = StampBook(log), StampBook(log)
    for n in range(workspace_stamps._COMPACT_MIN_LINES + 5):
        book.apply({"churn": stamp(n)})
    assert len(log.read_bytes().splitlines()) < 10  # rewritten: the epoch and one stamp
    assert other.get("churn") == stamp(workspace_stamps._COMPACT_MIN_LINES + 4)
