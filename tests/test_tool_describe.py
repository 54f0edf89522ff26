"""``Tool(describe=...)``: a tool says, from its own data, what a paused call will do, and the
host shows those lines to whoever decides (``Host.describe_call``), escaped and bounded; a
describer that fails shows one static line, never its exception."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import structlog
from conftest import make_plugin, make_spec

import toolhost
from toolhost import Idempotency, Services, Tool, ToolOutput, Trust
from toolhost._composition import DESCRIBED_CHARS, DESCRIBED_LINES, Host
from toolhost._model.references import DescribeReference
from toolhost._model.spec import Risk, SideEffect
from toolhost._registration.refusals import RegistrationRefused, Step
from toolhost.testing import Harness


def _send(arguments: Any, context: Any) -> ToolOutput:
    return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])


def _asking(describe: Any) -> Tool:
    """fx.send, asked about at every call, described by ``describe``."""
    spec = make_spec(name="fx.send", side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.LOW,
                     idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)
    return Tool(spec, call=_send, always_requires_approval=True, describe=describe)


def described_by_reference(arguments: Mapping[str, Any], services: Services,
                           principal_id: str) -> Sequence[str]:
    """The describer ``_asking`` names by reference: what it read, and whose call it was."""
    return [f"sends {arguments['x']} for {principal_id}",
            f"data directory named {services.data_dir.name}"]


def _described(describe: Any, x: str = "a") -> tuple[str, list[str]] | None:
    with Harness.over({"fx-dist": make_plugin(tools=[_asking(describe)])}) as h:
        paused = h.invoke("fx.send", x=x)
        assert paused.paused
        return h.host.describe_call(h.host.row(paused.invocation_id or ""))


def test_registration_refuses_a_describe_that_is_not_callable() -> None:
    with pytest.raises(RegistrationRefused) as caught:
        Host.from_plugins({"fx-dist": make_plugin(tools=[_asking(42)])})
    assert caught.value.step is Step.FIELD_COMPLETENESS
    assert "fx.send@1.0.0 from distribution fx-dist: the Tool's describe= is not callable" in \
        str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_describe_reference_is_checked_when_the_tool_is_made_and_imported_at_first_use(
) -> None:
    with pytest.raises(ValueError, match="is not a reference"):
        _asking("not a reference")
    tool = _asking(f"{__name__}:described_by_reference")
    assert isinstance(tool.describe, DescribeReference)
    assert tool.describe == f"{__name__}:described_by_reference"
    described = _described(f"{__name__}:described_by_reference", x="b")
    assert described == ("fx-dist", ["sends b for operator", "data directory named fx-dist"])


def test_the_typed_decorator_takes_describe() -> None:
    @toolhost.tool("fx.typed", "1.0.0", side_effect=SideEffect.NONE, risk=Risk.LOW,
                   idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL,
                   required_scopes=(), timeout_s=1, maximum_output_bytes=64, reasons=(),
                   describe=f"{__name__}:described_by_reference")
    def typed(x: str) -> str:
        """Echo."""
        return x

    assert typed.describe == f"{__name__}:described_by_reference"


def test_a_tool_without_describe_describes_nothing() -> None:
    assert _described(None) is None


def test_the_lines_are_escaped_cut_and_bounded() -> None:
    def describe(arguments: Mapping[str, Any], services: Services,
                 principal_id: str) -> Sequence[str]:
        return ["evil\u202eeulav\nforged line", "x" * 1000,
                *(f"line {i}" for i in range(DESCRIBED_LINES + 3))]

    distribution, lines = _described(describe) or ("", [])
    assert distribution == "fx-dist"
    assert lines[0] == "evil\\u202eeulav\\nforged line"
    assert lines[1] == "x" * (DESCRIBED_CHARS - 1) + "…"
    assert len(lines) == DESCRIBED_LINES + 1
    assert lines[-1] == "(5 more lines not shown)"


@pytest.mark.parametrize("answer", ["one string", [b"bytes"], None, 7])
def test_a_describer_that_fails_or_answers_no_lines_shows_one_static_line(
        answer: Any) -> None:
    def describe(arguments: Mapping[str, Any], services: Services,
                 principal_id: str) -> Any:
        if answer is None:
            raise RuntimeError("secret-ish detail from the plugin")
        return answer

    with structlog.testing.capture_logs() as logs:
        assert _described(describe) == (
            "fx-dist", ["(fx-dist could not describe this call; the log says why)"])
    # The exception's words stay in the log, never in what the person reads.
    warned = [e for e in logs if e["event"] == "tool.describe.failed"]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning"
    assert warned[0]["error"] == ("RuntimeError" if answer is None else "TypeError")


@pytest.mark.parametrize("stop", [SystemExit(0), KeyboardInterrupt()], ids=["exit", "interrupt"])
def test_a_describer_that_exits_is_one_static_line_and_ends_nothing(stop: BaseException) -> None:
    # Before: SystemExit out of a describer ended `toolhost serve` (every call of the session
    # then "Connection closed") and `toolhost show` with the describer's exit code.
    def describe(arguments: Mapping[str, Any], services: Services, principal_id: str) -> Any:
        raise stop

    assert _described(describe) == (
        "fx-dist", ["(fx-dist could not describe this call; the log says why)"])


def test_a_describer_that_hangs_is_one_static_line_after_its_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import toolhost._composition as composition

    monkeypatch.setattr(composition, "DESCRIBE_TIMEOUT_S", 0.2)
    released = threading.Event()

    def describe(arguments: Mapping[str, Any], services: Services, principal_id: str) -> Any:
        released.wait(30)
        return ["too late"]

    try:
        with structlog.testing.capture_logs() as logs:
            assert _described(describe) == (
                "fx-dist", ["(fx-dist could not describe this call; the log says why)"])
        assert [e["error"] for e in logs if e["event"] == "tool.describe.failed"] == [
            "TimeoutError"]
    finally:
        released.set()
