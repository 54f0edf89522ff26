"""A body its run's deadline cuts off is still that call's timeout (D433's code), but not
retryable, since every retry in the run is refused ``run_deadline_passed``, and its detail is
the run's deadline, the limit that fired, not the tool's ``timeout_s``. A body its own
``timeout_s`` cuts off, in a run with a later deadline, stays retryable when repeating it is
safe. Real host and SQLite store, the waiting fixture tools of ``test_run_deadline_passed``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_plugin
from test_run_deadline_passed import RAN, SettableClock, _waits, _writer

from toolhost import Idempotency
from toolhost._model import host_reasons as core_messages
from toolhost.testing import DEFAULT_INSTANT, Harness

#: Each waits for its call's cancellation: a 10 s timeout_s, and a 0.5 s one.
PLUGIN = make_plugin(("fw",), [
    _writer("fw.waits_read_only", Idempotency.READ_ONLY, call=_waits),
    _writer("fw.waits_idempotent", Idempotency.IDEMPOTENT, call=_waits),
    _writer("fw.waits_once", Idempotency.NON_IDEMPOTENT, call=_waits),
    _writer("fw.quick_read_only", Idempotency.READ_ONLY, call=_waits, timeout_s=0.5),
])


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    RAN.clear()
    with Harness.over({"toolhost-fw": PLUGIN}, clock=SettableClock(DEFAULT_INSTANT),
                      data_dir=tmp_path / "data") as h:
        yield h


@pytest.mark.parametrize(("name", "code"), [
    ("fw.waits_read_only", core_messages.DEADLINE),
    ("fw.waits_idempotent", core_messages.DEADLINE),
    ("fw.waits_once", core_messages.DEADLINE_MAY_HAVE_TAKEN_EFFECT),
])
def test_a_body_the_runs_deadline_cuts_off_is_not_retryable_and_names_that_deadline(
    harness: Harness, name: str, code: str,
) -> None:
    run = harness.start_run(timeout_s=2)
    assert run.deadline_at is not None
    started = time.monotonic()
    outcome = harness.call(name, {"path": "slow"}, run=run)
    assert time.monotonic() - started < 9  # the run's 2 s fired, not the tool's 10 s
    assert RAN == ["slow"]
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (code, False)
    row = harness.record(str(outcome.invocation_id))
    assert (row.reason_code, row.retryable) == (code, False)
    assert row.failure_detail == {"run_deadline": run.deadline_at.isoformat()}
    harness.end_run(run)


def test_a_body_its_own_timeout_cuts_off_in_a_longer_run_stays_retryable(
    harness: Harness,
) -> None:
    run = harness.start_run(timeout_s=60)
    outcome = harness.call("fw.quick_read_only", {"path": "slow"}, run=run)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        core_messages.DEADLINE, True)
    assert harness.record(str(outcome.invocation_id)).failure_detail == {"timeout_s": 0.5}
    harness.end_run(run)
