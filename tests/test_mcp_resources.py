"""Files to the client (D223): ``resources/read`` serves an artifact's exact bytes after
the resolver's checks, refuses everything else with one static sentence, and ``resource_link``
and ``resources/list`` name the run's attachments in the order it made them. The journeys drive
the same through the SDK client (tests/journeys); here each rule is one direct case on a real
host and store."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_plugin, make_tool

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from toolhost import ArtifactOrigin, Trust  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost._mcp import resources  # noqa: E402
from toolhost._mcp.resources import RunResources, resource_link  # noqa: E402
from toolhost._model.context import Principal  # noqa: E402
from toolhost._model.runs import Run  # noqa: E402
from toolhost.testing import host_for  # noqa: E402


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    with host_for({"fx-dist": make_plugin(tools=[make_tool()])},
                  data_dir=tmp_path / "data") as made:
        yield made


def _write(host: Host, run: Run, content: bytes, *, name: str = "f.bin",
           origin: ArtifactOrigin = ArtifactOrigin.EXPORT) -> str:
    context = host.pipeline.context_for(run, deadline=host.deadline_in(10),
                                        cancellation=run.cancellation)
    return context.artifacts.write(origin=origin, name=name,
                                   media_type="application/octet-stream",
                                   content=content, trust=Trust.INTERNAL_TOOL).id


def _read(host: Host, run: Run, uri: str) -> types.ReadResourceResult:
    return asyncio.run(RunResources(host).read(run, uri))


def _refused(host: Host, run: Run, uri: str) -> MCPError:
    with pytest.raises(MCPError) as refused:
        _read(host, run, uri)
    return refused.value


def test_a_read_is_the_exact_bytes_across_chunk_boundaries(host: Host) -> None:
    run = host.start_run()
    content = os.urandom(3 * 256 * 1024 * 2 + 7)  # two whole chunks and a tail of 7 bytes
    artifact_id = _write(host, run, content)
    read = _read(host, run, f"toolhost://artifacts/{artifact_id}")
    (blob,) = read.contents
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob, validate=True) == content
    assert (str(blob.uri), blob.mime_type) == (f"toolhost://artifacts/{artifact_id}",
                                                "application/octet-stream")


def test_every_refusal_a_client_could_learn_from_reads_the_same(host: Host) -> None:
    mine = host.start_run()
    theirs = host.start_run(principal=Principal("someone-else"))
    export = _write(host, mine, b"mine")
    capture = _write(host, mine, b"captured", origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE)
    for run, uri in [
        (theirs, f"toolhost://artifacts/{export}"),   # another principal's
        (mine, f"toolhost://artifacts/{capture}"),    # a captured tool output
        (mine, "toolhost://artifacts/no-such-id"),    # none at all
        (mine, "file:///etc/passwd"),                 # not an artifact URI
        (mine, "toolhost://artifacts/../x"),          # not an id
    ]:
        refused = _refused(host, run, uri)
        assert (refused.error.code, refused.error.message) == (
            resources.RESOURCE_NOT_FOUND, resources.NOT_AVAILABLE), uri


def test_an_artifact_over_the_bound_is_refused_from_its_record(
    host: Host, monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = host.start_run()
    artifact_id = _write(host, run, b"x" * 101)
    monkeypatch.setattr(resources, "MAX_RESOURCE_BYTES", 100)
    opened: list[str] = []
    real = host.pipeline.artifacts.read_chunks
    monkeypatch.setattr(host.pipeline.artifacts, "read_chunks",
                        lambda *a, **k: opened.append("opened") or real(*a, **k))
    refused = _refused(host, run, f"toolhost://artifacts/{artifact_id}")
    assert (refused.error.code, refused.error.message) == (
        resources.RESOURCE_NOT_FOUND, resources.TOO_LARGE)
    assert opened == []


def test_damaged_content_is_never_sent(host: Host) -> None:
    run = host.start_run()
    artifact_id = _write(host, run, b"the real bytes")
    record = host.pipeline.artifacts.get(artifact_id)
    digest = record.checksum.removeprefix("sha256:")
    content = host.data_dir / "artifacts" / "sha256" / digest[:2] / digest[2:]
    content.chmod(0o600)
    content.write_bytes(b"the fake bytes")
    refused = _refused(host, run, f"toolhost://artifacts/{artifact_id}")
    assert (refused.error.code, refused.error.message) == (
        types.INTERNAL_ERROR, resources.DAMAGED)


def test_the_list_is_the_runs_attachments_in_the_order_it_made_them(host: Host) -> None:
    run = host.start_run()
    made = [_write(host, run, bytes([n]), name=f"f{n}.bin") for n in range(5)]
    _write(host, run, b"captured", origin=ArtifactOrigin.TOOL_OUTPUT_CAPTURE)
    listed = asyncio.run(RunResources(host).list(run))
    assert [str(r.uri) for r in listed.resources] == [
        f"toolhost://artifacts/{i}" for i in made]
    assert [(r.name, r.size) for r in listed.resources] == [(f"f{n}.bin", 1) for n in range(5)]


def test_a_resource_link_names_the_file() -> None:
    link = resource_link({"id": "a1", "name": "r.csv", "media_type": "text/csv",
                          "byte_count": 9, "checksum": "sha256:" + "0" * 64})
    assert link.model_dump(by_alias=True, exclude_none=True) == {
        "type": "resource_link", "uri": "toolhost://artifacts/a1", "name": "r.csv",
        "mimeType": "text/csv", "size": 9}


def test_an_artifact_purged_between_its_record_and_its_content_is_not_found(
    host: Host, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A purge (by another host too) that takes the record and its content after the store's
    read found the record: the file is not there any more, which is not damage."""
    run = host.start_run()
    artifact_id = _write(host, run, b"the real bytes")
    store = host.pipeline.artifacts
    real = store.content.chunks  # type: ignore[attr-defined]

    def purged_first(record: object, chunk_size: int) -> object:
        # What purge does, records first and then the content no record references.
        store.metadata.conn.execute(  # type: ignore[attr-defined]
            "DELETE FROM artifacts WHERE id = ?", (artifact_id,))
        store.content.sweep(store.metadata)  # type: ignore[attr-defined]
        return real(record, chunk_size)

    monkeypatch.setattr(store.content, "chunks", purged_first)  # type: ignore[attr-defined]
    refused = _refused(host, run, f"toolhost://artifacts/{artifact_id}")
    assert (refused.error.code, refused.error.message) == (
        resources.RESOURCE_NOT_FOUND, resources.NOT_AVAILABLE)
