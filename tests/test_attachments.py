"""A run's attachments (D90, D224): every file the run exported or generated, listed on what the
run leaves its owner (``Host.end_run``), and nothing the host captured or the user uploaded."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import ArtifactOrigin, Tool, ToolExecutionContext, ToolOutput, Trust
from toolhost._adapters.sqlite_artifacts import open_artifact_store
from toolhost._composition import Host
from toolhost._model.artifacts import NewArtifact
from toolhost._pipeline.attachments import ATTACHED_ORIGINS, attachments_of
from toolhost.testing import DEFAULT_INSTANT, FixedClock, RunOutcome, host_for

OUT = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
       "additionalProperties": False}
IN = {"type": "object", "properties": {"origin": {"type": "string", "maxLength": 32},
                                       "name": {"type": "string", "maxLength": 32}},
      "required": ["origin", "name"], "additionalProperties": False}


def _write(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    ref = context.artifacts.write(
        origin=ArtifactOrigin(arguments["origin"]), name=arguments["name"],
        media_type="text/plain", content=f"bytes of {arguments['name']}",
        trust=Trust.INTERNAL_TOOL)
    return ToolOutput(structured={"id": ref.id}, content=ref.id)


PLUGIN = make_plugin(tools=[Tool(make_spec(name="fx.write_artifact", input_schema=IN,
                                           output_schema=OUT), call=_write)])


class TickingClock:
    """A second later at every reading: the store orders a run's artifacts by creation time."""

    def __init__(self) -> None:
        self._next = DEFAULT_INSTANT

    def now(self) -> dt.datetime:
        now, self._next = self._next, self._next + dt.timedelta(seconds=1)
        return now


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    with host_for({"fx-dist": PLUGIN}, data_dir=tmp_path, clock=TickingClock()) as host:
        yield host


def _write_in(host: Host, run: Any, origin: str, name: str) -> str:
    outcome = host.invoke_sync("fx.write_artifact", {"origin": origin, "name": name}, run=run)
    assert outcome.ok, outcome
    return outcome.content


def test_exports_and_model_outputs_are_attached_in_the_order_made(host: Host) -> None:
    run = host.start_run()
    exported = _write_in(host, run, "EXPORT", "a.txt")
    _write_in(host, run, "TOOL_OUTPUT_CAPTURE", "captured.txt")
    _write_in(host, run, "UPLOAD", "uploaded.txt")
    generated = _write_in(host, run, "MODEL_OUTPUT", "image.png")
    other = host.start_run()
    _write_in(host, other, "EXPORT", "elsewhere.txt")

    ended = host.end_run(run)

    assert isinstance(ended, RunOutcome)
    assert ended.run_id == run.id
    assert [ref.id for ref in ended.attachments] == [exported, generated]
    assert [ref.name for ref in ended.attachments] == ["a.txt", "image.png"]
    record = host.pipeline.artifacts.get(exported)
    assert ended.to_json() == {"run_id": run.id, "attachments": [
        {"id": exported, "name": "a.txt", "media_type": "text/plain",
         "byte_count": record.size, "checksum": record.checksum},
        {"id": generated, "name": "image.png", "media_type": "text/plain",
         "byte_count": len(b"bytes of image.png"),
         "checksum": host.pipeline.artifacts.get(generated).checksum},
    ]}


def test_attachments_of_lists_in_creation_order_under_a_fixed_clock(tmp_path: Path) -> None:
    # Every record created at the same instant, ids random: only the order the run stored
    # them can give "the order the run made them".
    store = open_artifact_store(tmp_path, FixedClock(DEFAULT_INSTANT))
    origins = [ArtifactOrigin.EXPORT, ArtifactOrigin.MODEL_OUTPUT,
               ArtifactOrigin.TOOL_OUTPUT_CAPTURE, ArtifactOrigin.UPLOAD]
    try:
        made = [store.put(NewArtifact(
                run_id="run-1", origin=origins[i % len(origins)], name=f"f{i:02}",
                media_type="text/plain", trust=Trust.INTERNAL_TOOL), b"%d" % i)
                for i in range(24)]
        store.put(NewArtifact(
                run_id="run-2", origin=ArtifactOrigin.EXPORT, name="elsewhere.txt",
                media_type="text/plain", trust=Trust.INTERNAL_TOOL), b"x")
        attached = attachments_of(store, "run-1")
        assert {r.created_at for r in made} == {DEFAULT_INSTANT}
        assert [ref.name for ref in attached] == [
            r.name for r in made if r.origin in ATTACHED_ORIGINS]
        assert list(attached) == [r.ref for r in made if r.origin in ATTACHED_ORIGINS]
    finally:
        store.close()


def test_end_run_attaches_in_the_order_made_under_the_harness_clock(tmp_path: Path) -> None:
    # host_for's default clock is fixed: every write of the run happens at one instant.
    with host_for({"fx-dist": PLUGIN}, data_dir=tmp_path) as host:
        run = host.start_run()
        made = [_write_in(host, run, "EXPORT" if i % 3 else "MODEL_OUTPUT", f"f{i:02}.txt")
                for i in range(12)]
        assert [ref.id for ref in host.end_run(run).attachments] == made


def test_the_same_export_twice_is_one_attachment(host: Host) -> None:
    run = host.start_run()
    first = _write_in(host, run, "EXPORT", "a.txt")
    assert _write_in(host, run, "EXPORT", "a.txt") == first
    assert [ref.id for ref in host.end_run(run).attachments] == [first]


def test_a_run_that_exported_nothing_has_no_attachments(host: Host) -> None:
    run = host.start_run()
    _write_in(host, run, "TOOL_OUTPUT_CAPTURE", "captured.txt")
    assert host.end_run(run) == RunOutcome(run_id=run.id, attachments=())


def test_a_run_given_by_id_shares_its_artifacts_across_starts(host: Host) -> None:
    # What `toolhost call --run R` relies on: a second process naming the same run id.
    first = _write_in(host, host.start_run(run_id="run-1"), "EXPORT", "a.txt")
    again = host.start_run(run_id="run-1")
    assert _write_in(host, again, "EXPORT", "a.txt") == first
    assert [ref.id for ref in host.end_run(again).attachments] == [first]


@pytest.mark.parametrize("run_id", ["", "../escape", "a/b", ".hidden", "x" * 129, "a b", "é"])
def test_a_run_id_that_is_not_a_plain_name_is_refused(host: Host, run_id: str) -> None:
    # It names the run's fresh workspace directory under the data directory.
    with pytest.raises(ValueError, match="run_id must be"):
        host.start_run(run_id=run_id)
    assert not (host.data_dir / "escape").exists()
