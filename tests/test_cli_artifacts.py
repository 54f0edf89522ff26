"""`toolhost artifacts list|get|upload|purge`: the artifact store at the operator's surface, run
as a real process over a real data directory (SQLite and content files), and
TOOLHOST_ARTIFACT_RETENTION_DAYS, the writer's default expiry."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhost._adapters.sqlite_artifacts import SQLiteArtifactStore, open_artifact_store
from toolhost._model.artifacts import ArtifactOrigin, ArtifactUnavailable, NewArtifact
from toolhost._model.settings import SettingError, Settings
from toolhost._model.spec import Trust
from toolhost._pipeline.artifacts import ArtifactResolver
from toolhost._testing.artifact_store_contract import T0
from toolhost._testing.clocks import FixedClock
from toolhost.testing import run_toolhost

# Instants the real clock of a `toolhost` process is always past (T0 is) or never reaches.
PAST = T0 + dt.timedelta(days=1)
FAR_FUTURE = dt.datetime(2200, 1, 1, tzinfo=dt.UTC)
BINARY = b"\x00\x01binary\xff\n" * 100


def toolhost(data_dir: Path, *args: str, env: dict[str, str] | None = None,
             text: bool = True) -> subprocess.CompletedProcess[Any]:
    # No plugin is needed to reach the store: an empty allow-list loads none.
    if text:
        return run_toolhost("artifacts", *args, data_dir=data_dir, plugins="", env=env)
    return run_toolhost("artifacts", *args, data_dir=data_dir, plugins="", env=env, text=False)


def refused(result: subprocess.CompletedProcess[str], code: int, line: str) -> None:
    assert (result.returncode, result.stdout, result.stderr) == (code, "", f"toolhost: {line}\n")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data: Path) -> Iterator[SQLiteArtifactStore]:
    """The same data directory, opened in the test's process (as a second process would)."""
    s = open_artifact_store(data, FixedClock(T0))
    yield s
    s.close()


def upload(data: Path, path: Path, *extra: str, conversation: str = "conv-1",
           env: dict[str, str] | None = None) -> str:
    result = toolhost(data, "upload", str(path), "--conversation", conversation, *extra, env=env)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    artifact_id = str(result.stdout).removesuffix("\n")
    assert len(artifact_id) == 32 and result.stdout == artifact_id + "\n"
    return artifact_id


def listed(data: Path, *args: str) -> list[dict[str, Any]]:
    result = toolhost(data, "list", "--json", *args)
    assert (result.returncode, result.stderr) == (0, "")
    records: list[dict[str, Any]] = json.loads(result.stdout)
    return records


def blob(data: Path, content: bytes) -> Path:
    digest = hashlib.sha256(content).hexdigest()
    return data / "artifacts" / "sha256" / digest[:2] / digest[2:]


# --------------------------------------------------------------------------------------------
# upload and list
# --------------------------------------------------------------------------------------------


def test_an_empty_store_says_so(data: Path) -> None:
    assert toolhost(data, "list").stdout == "no artifacts\n"
    result = toolhost(data, "list", "--run", "r-1", "--conversation", "c\n1")
    assert (result.returncode, result.stdout, result.stderr) == (
        0, 'no artifacts in run "r-1" in conversation "c\\n1"\n', "")
    assert toolhost(data, "list", "--json").stdout == "[]\n"


def test_upload_then_list_shows_it_and_the_resolver_accepts_it(
    data: Path, tmp_path: Path
) -> None:
    source = tmp_path / "photo.PNG"
    source.write_bytes(BINARY)
    artifact_id = upload(data, source)
    [record] = listed(data, "--conversation", "conv-1")
    assert set(record) == {"id", "run_id", "conversation_id", "principal_id", "origin", "name",
                           "media_type", "byte_count", "checksum", "trust", "created_at",
                           "expires_at", "claimed"}
    assert {k: record[k] for k in ("id", "conversation_id", "principal_id", "origin", "name",
                                   "media_type", "byte_count", "checksum", "trust", "claimed")
            } == {
        "id": artifact_id, "conversation_id": "conv-1", "principal_id": "operator",
        "origin": "UPLOAD", "name": "photo.PNG", "media_type": "image/png",
        "byte_count": len(BINARY), "checksum": "sha256:" + hashlib.sha256(BINARY).hexdigest(),
        "trust": "USER", "claimed": True,
    }
    text = toolhost(data, "list", "--conversation", "conv-1")
    assert (text.returncode, text.stderr) == (0, "")
    assert text.stdout == (f"{artifact_id}  {record['created_at']}  UPLOAD  {len(BINARY)}  "
                           f'image/png  "photo.PNG"\n')
    assert toolhost(data, "list", "--conversation", "conv-2").stdout == (
        'no artifacts in conversation "conv-2"\n')

    # What a tool of that conversation, acting for the operator, may read (D63, D100): any
    # run of the conversation, since the upload is claimed.
    created = dt.datetime.fromisoformat(record["created_at"])
    store = open_artifact_store(data, FixedClock(created))
    resolver = ArtifactResolver(store, FixedClock(created + dt.timedelta(seconds=1)))
    assert resolver.read(artifact_id, principal_id="operator", run_id="a-later-run",
                         conversation_id="conv-1", max_bytes=len(BINARY)) == BINARY
    with pytest.raises(ArtifactUnavailable) as info:
        resolver.resolve(artifact_id, principal_id="operator", run_id="a-later-run",
                         conversation_id="conv-2")
    assert info.value.reason == "other_conversation"
    store.close()


def test_upload_for_another_principal_is_that_principals_alone(
    data: Path, tmp_path: Path
) -> None:
    source = tmp_path / "notes"
    source.write_bytes(b"for alice")
    artifact_id = upload(data, source, "--principal", "alice", "--name", "notes.md")
    [record] = listed(data)
    assert (record["principal_id"], record["name"], record["media_type"]) == (
        "alice", "notes.md", "text/markdown")
    created = dt.datetime.fromisoformat(record["created_at"])
    store = open_artifact_store(data, FixedClock(created))
    resolver = ArtifactResolver(store, FixedClock(created))
    assert resolver.read(artifact_id, principal_id="alice", run_id="some-run",
                         conversation_id="conv-1", max_bytes=100) == b"for alice"
    with pytest.raises(ArtifactUnavailable) as info:
        resolver.resolve(artifact_id, principal_id="operator", run_id="some-run",
                         conversation_id="conv-1")
    assert info.value.reason == "foreign_principal"
    store.close()


@pytest.mark.parametrize(
    ("file_name", "extra", "name", "media_type"),
    [
        ("report.TXT", (), "report.TXT", "text/plain"),
        ("data.bin", (), "data.bin", "application/octet-stream"),
        ("no-extension", (), "no-extension", "application/octet-stream"),
        ("a.png", ("--media-type", "image/x-custom"), "a.png", "image/x-custom"),
        ("a.txt", ("--name", "line one\nline two\u202e.md"), "line one\nline two\u202e.md",
         "text/markdown"),
    ],
)
def test_upload_names_and_media_types(
    data: Path, tmp_path: Path, file_name: str, extra: tuple[str, ...], name: str,
    media_type: str,
) -> None:
    source = tmp_path / file_name
    source.write_bytes(b"x")
    artifact_id = upload(data, source, *extra)
    [record] = listed(data)
    assert (record["name"], record["media_type"]) == (name, media_type)
    # A name is one JSON-quoted field on one line, whatever it holds.
    line = toolhost(data, "list").stdout
    assert line.count("\n") == 1
    assert line.endswith(f"  {media_type}  {json.dumps(name)}\n")
    assert line.startswith(artifact_id)


def test_list_pages_in_creation_order(data: Path, tmp_path: Path) -> None:
    ids = []
    for i in range(3):
        source = tmp_path / f"f{i}.txt"
        source.write_bytes(b"%d" % i)
        ids.append(upload(data, source, conversation=f"conv-{i % 2}"))
    assert [r["id"] for r in listed(data)] == ids
    first = toolhost(data, "list", "--limit", "2")
    assert [line.split("  ")[0] for line in first.stdout.splitlines()] == ids[:2]
    assert first.stderr == ("toolhost: the first 2 are listed; more follow (toolhost artifacts "
                            f"list --limit 2 --after {ids[1]})\n")
    rest = toolhost(data, "list", "--limit", "2", "--after", ids[1])
    assert ([line.split("  ")[0] for line in rest.stdout.splitlines()], rest.stderr) == (
        ids[2:], "")
    assert [r["id"] for r in listed(data, "--conversation", "conv-0")] == [ids[0], ids[2]]
    assert [r["id"] for r in listed(data, "--run", listed(data)[1]["run_id"])] == [ids[1]]
    refused(toolhost(data, "list", "--after", "nope"), 1,
            "--after 'nope' is not an artifact (toolhost artifacts list shows them)")


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["upload", "{missing}", "--conversation", "c"], 2,
         "cannot read '{missing}': No such file or directory"),
        (["upload", "{dir}", "--conversation", "c"], 2, "cannot read '{dir}': Is a directory"),
        (["upload", "{file}", "--conversation", ""], 2,
         "--conversation must be 1 to 128 letters, digits, '.', '_' or '-', starting with a "
         "letter or digit"),
        (["upload", "{file}", "--conversation", "../c"], 2,
         "--conversation must be 1 to 128 letters, digits, '.', '_' or '-', starting with a "
         "letter or digit"),
        (["upload", "{file}", "--conversation", "c", "--principal", ""], 2,
         "--principal must not be empty"),
        (["upload", "{file}", "--conversation", "c", "--media-type", "png"], 2,
         "media_type must look like 'type/subtype', got 'png'; nothing was stored"),
        (["list", "--run", ""], 2, "--run must not be empty"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(
    data: Path, tmp_path: Path, args: list[str], code: int, line: str
) -> None:
    (tmp_path / "file.txt").write_bytes(b"x")
    paths = {"missing": str(tmp_path / "missing.txt"), "dir": str(tmp_path),
             "file": str(tmp_path / "file.txt")}
    refused(toolhost(data, *(a.format(**paths) for a in args)), code, line.format(**paths))
    assert listed(data) == []
    # Nothing half-written either: no content file and no staged upload.
    assert sorted(p.name for p in (data / "artifacts").rglob("*") if p.is_file()) == []


# --------------------------------------------------------------------------------------------
# get
# --------------------------------------------------------------------------------------------


def test_get_writes_the_exact_bytes(data: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.bin"
    source.write_bytes(BINARY)
    artifact_id = upload(data, source)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "copy.bin"
    target.write_bytes(b"an older file, replaced")
    result = toolhost(data, "get", artifact_id, "-o", str(target))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert target.read_bytes() == BINARY
    assert [p.name for p in out_dir.iterdir()] == ["copy.bin"]  # no temp file left
    to_stdout = toolhost(data, "get", artifact_id, "-o", "-", text=False)
    assert (to_stdout.returncode, to_stdout.stdout, to_stdout.stderr) == (0, BINARY, b"")


def test_get_refuses_tampered_bytes_and_writes_nothing(data: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"the original bytes")
    artifact_id = upload(data, source)
    blob(data, b"the original bytes").write_bytes(b"the tampered bytes")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    line = (f"artifact '{artifact_id}' was not written: its stored content no longer matches "
            "its checksum (checksum mismatch)")
    refused(toolhost(data, "get", artifact_id, "-o", str(out_dir / "copy.txt")), 1, line)
    assert list(out_dir.iterdir()) == []  # no file, no temp file
    existing = out_dir / "kept.txt"
    existing.write_bytes(b"mine")
    refused(toolhost(data, "get", artifact_id, "-o", str(existing)), 1, line)
    assert [p.name for p in out_dir.iterdir()] == ["kept.txt"]
    assert existing.read_bytes() == b"mine"
    stdout = toolhost(data, "get", artifact_id, "-o", "-", text=False)
    assert (stdout.returncode, stdout.stdout) == (1, b"")
    blob(data, b"the original bytes").unlink()
    refused(toolhost(data, "get", artifact_id, "-o", str(out_dir / "copy.txt")), 1,
            f"artifact '{artifact_id}' was not written: its stored content no longer matches "
            "its checksum (the content file is missing)")


def test_get_refuses_an_unknown_id_or_a_directory(data: Path, tmp_path: Path) -> None:
    refused(toolhost(data, "get", "nope", "-o", str(tmp_path / "x")), 1,
            "no artifact 'nope' (toolhost artifacts list shows them)")
    assert not (tmp_path / "x").exists()
    refused(toolhost(data, "get", "nope", "-o", str(tmp_path)), 2,
            f"-o {str(tmp_path)!r} is a directory: name the file to write")
    source = tmp_path / "in.txt"
    source.write_bytes(b"bytes")
    artifact_id = upload(data, source)
    nowhere = tmp_path / "no-such-dir" / "x"
    refused(toolhost(data, "get", artifact_id, "-o", str(nowhere)), 1,
            f"cannot write {str(nowhere)!r}: No such file or directory")


# --------------------------------------------------------------------------------------------
# purge, and the retention that decides what expires
# --------------------------------------------------------------------------------------------


def _put(store: SQLiteArtifactStore, content: bytes, expires_at: dt.datetime | None,
         run_id: str = "run-1") -> str:
    return store.put(NewArtifact(
            run_id=run_id, origin=ArtifactOrigin.EXPORT, name="f.bin",
            media_type="application/octet-stream", trust=Trust.INTERNAL_TOOL,
            expires_at=expires_at), content).id


def _age(path: Path, when: dt.datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def test_purge_removes_only_the_expired_and_what_nothing_references(
    data: Path, store: SQLiteArtifactStore
) -> None:
    _put(store, b"expired, alone", PAST)
    _put(store, b"expired, shared", PAST)
    shared = _put(store, b"expired, shared", None, run_id="run-2")
    later = _put(store, b"expires later", FAR_FUTURE)
    forever = _put(store, b"never expires", None)
    staging = data / "artifacts" / "sha256"
    stale = staging / ".dead-process.upload"
    stale.write_bytes(b"a dead process's half upload")
    _age(stale, PAST)
    live = staging / ".live-process.upload"
    live.write_bytes(b"still coming")
    _age(live, FAR_FUTURE)

    result = toolhost(data, "purge")
    freed = len(b"expired, alone") + len(b"a dead process's half upload")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "purged 2 expired artifacts (29 bytes); removed 1 content file and 1 stale staged "
        f"upload, freeing {freed} bytes\n")
    assert sorted(r["id"] for r in listed(data)) == sorted([shared, later, forever])
    assert not blob(data, b"expired, alone").exists()
    assert blob(data, b"expired, shared").read_bytes() == b"expired, shared"
    assert not stale.exists() and live.exists()
    assert store.read(shared) == b"expired, shared"

    again = toolhost(data, "purge")
    assert (again.returncode, again.stdout, again.stderr) == (0, NOTHING_TO_PURGE, "")
    assert json.loads(toolhost(data, "purge", "--json").stdout) == {
        "artifacts": 0, "artifact_bytes": 0, "content_files": 0, "staged_uploads": 0,
        "freed_bytes": 0}


#: ``purge``'s line when it removed nothing: true beside a staged upload it kept.
NOTHING_TO_PURGE = ("nothing to purge: no artifact has expired, no content is unreferenced and "
                    "no staged upload has been untouched for an hour (a younger one may still "
                    "be an upload under way)\n")


def test_purge_never_says_no_file_is_left_beside_a_younger_staged_upload(data: Path) -> None:
    # Regression: a 48 MB staged upload a killed export left was kept (it is removed once
    # untouched for STAGING_STALE_AFTER), while purge said "no file is left over".
    from toolhost._ports.artifacts import STAGING_STALE_AFTER

    assert dt.timedelta(hours=1) == STAGING_STALE_AFTER  # the hour the line names
    assert toolhost(data, "list").returncode == 0  # the store made
    killed = data / "artifacts" / "sha256" / ".killed-export.upload"
    killed.write_bytes(b"half an export")
    result = toolhost(data, "purge")
    assert (result.returncode, result.stdout, result.stderr) == (0, NOTHING_TO_PURGE, "")
    assert killed.exists()


def test_purge_json_counts(data: Path, store: SQLiteArtifactStore) -> None:
    _put(store, b"one", PAST)
    result = toolhost(data, "purge", "--json")
    assert json.loads(result.stdout) == {
        "artifacts": 1, "artifact_bytes": 3, "content_files": 1, "staged_uploads": 0,
        "freed_bytes": 3}


def test_an_upload_expires_after_the_retention(data: Path, tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_bytes(b"a")
    upload(data, source, env={"TOOLHOST_ARTIFACT_RETENTION_DAYS": "2"})
    upload(data, source, conversation="conv-2", env={"TOOLHOST_ARTIFACT_RETENTION_DAYS": "0"})
    default = upload(data, source, conversation="conv-3")
    two_days, forever, thirty = listed(data)
    created = dt.datetime.fromisoformat(two_days["created_at"])
    expires = dt.datetime.fromisoformat(two_days["expires_at"])
    # Counted from the start of the stream, which the commit's instant (created_at) follows.
    assert created < expires <= created + dt.timedelta(days=2)
    assert expires > created + dt.timedelta(days=1)
    assert forever["expires_at"] is None
    assert thirty["id"] == default
    created = dt.datetime.fromisoformat(thirty["created_at"])
    expires = dt.datetime.fromisoformat(thirty["expires_at"])
    assert created + dt.timedelta(days=29) < expires <= created + dt.timedelta(days=30)


@pytest.mark.parametrize("value", ["-1", "1.5", "two", "1_0", "\u0663", "36501", "0x10"])
def test_a_bad_retention_is_one_line(data: Path, value: str) -> None:
    refused(toolhost(data, "purge", env={"TOOLHOST_ARTIFACT_RETENTION_DAYS": value}), 2,
            f"TOOLHOST_ARTIFACT_RETENTION_DAYS is {value!r}, not a number of days: set it to a "
            "whole number from 1 to 36500, 0 to keep artifacts forever, or leave it unset for 30")
    with pytest.raises(SettingError):
        Settings.from_environ({"TOOLHOST_ARTIFACT_RETENTION_DAYS": value}).artifact_retention  # noqa: B018


@pytest.mark.parametrize(
    ("value", "retention"),
    [(None, dt.timedelta(days=30)), ("", dt.timedelta(days=30)), (" 7 ", dt.timedelta(days=7)),
     ("0", None), ("36500", dt.timedelta(days=36500))],
)
def test_retention_values(value: str | None, retention: dt.timedelta | None) -> None:
    env = {} if value is None else {"TOOLHOST_ARTIFACT_RETENTION_DAYS": value}
    assert Settings.from_environ(env).artifact_retention == retention


def test_the_commands_default_page_is_the_ports() -> None:
    from toolhost._cli import artifacts as cli
    from toolhost._ports import artifacts as port

    assert cli.LIST_LIMIT == port.LIST_LIMIT
