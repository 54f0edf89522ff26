"""The specification's people classes (D173): the four registrations exist only with
AGENT_PEOPLE_ENABLED, all read-only, parallel-safe, MEMORY trust and people.read (history 1.1.0
checks email.read in its body, for a source read only); every output bound stated and covered
by maximum_output_bytes (D177)."""

from __future__ import annotations

from pathlib import Path

import pytest

from people_support import ENABLED, harness
from toolhost import Idempotency, Risk, SideEffect, Trust

EXPECTED = [
    ("people.context", "1.0.0"),
    ("people.history", "1.0.0"),
    ("people.history", "1.1.0"),
    ("people.search", "1.0.0"),
]


def _registered(data_dir: Path, settings: dict[str, str]) -> list[tuple[str, str]]:
    with harness(data_dir, settings) as host:
        return sorted((r.spec.name, r.spec.version) for r in host.host.registry)


@pytest.mark.parametrize("value", ["", "0", "no", "false"])
def test_nothing_is_registered_without_the_flag(tmp_path: Path, value: str) -> None:
    assert _registered(tmp_path, {}) == []
    assert _registered(tmp_path, {"AGENT_PEOPLE_ENABLED": value}) == []


def test_four_registrations_with_the_flag(tmp_path: Path) -> None:
    assert _registered(tmp_path, ENABLED) == EXPECTED


def test_classification(tmp_path: Path) -> None:
    with harness(tmp_path) as host:
        specs = {(r.spec.name, r.spec.version): r.spec for r in host.host.registry}
    for spec in specs.values():
        assert (spec.side_effect, spec.risk, spec.idempotency) == (
            SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY)
        assert spec.allow_parallel is True
        assert spec.output_trust is Trust.MEMORY
        assert spec.input_schema["additionalProperties"] is False
    scopes = {key: spec.required_scopes for key, spec in specs.items()}
    assert scopes == {
        ("people.context", "1.0.0"): ("people.read",),
        ("people.history", "1.0.0"): ("people.read",),
        ("people.history", "1.1.0"): ("people.read",),
        ("people.search", "1.0.0"): ("people.read",),
    }


def test_every_bound_is_in_the_schemas(tmp_path: Path) -> None:
    with harness(tmp_path) as host:
        specs = {(r.spec.name, r.spec.version): r.spec for r in host.host.registry}
    search = specs["people.search", "1.0.0"]
    query = search.input_schema["properties"]["query"]
    limit = search.input_schema["properties"]["limit"]
    assert (query["minLength"], query["maxLength"]) == (1, 200)
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 25, 10)
    assert search.output_schema["properties"]["people"]["maxItems"] == 25
    for version in ("1.0.0", "1.1.0"):
        history = specs["people.history", version]
        props = history.input_schema["properties"]
        assert (props["limit"]["minimum"], props["limit"]["maximum"]) == (1, 50)
        assert props["cursor"]["maxLength"] == 512
        assert history.output_schema["properties"]["interactions"]["maxItems"] == 50
    assert "interaction_id" not in specs["people.history", "1.0.0"].input_schema["properties"]
    source = specs["people.history", "1.1.0"].output_schema["properties"]["source"]
    assert source["properties"]["headers"]["maxItems"] == 100
    assert source["properties"]["text"]["maxLength"] == 20000
    context = specs["people.context", "1.0.0"].output_schema["properties"]
    assert [context[k]["maxItems"] for k in ("addresses", "names", "recent_threads")] == [
        20, 10, 10]


def test_maximum_output_bytes_covers_every_result_the_schema_allows(tmp_path: Path) -> None:
    from toolhost_people.bounds import worst_case_bytes

    with harness(tmp_path) as host:
        specs = [r.spec for r in host.host.registry]
    for spec in specs:
        # Raises for any string or array in the output without a bound.
        assert spec.maximum_output_bytes >= worst_case_bytes(spec.output_schema), spec.identity
