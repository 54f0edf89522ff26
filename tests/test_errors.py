"""One error hierarchy (issue #28): every error the host raises on purpose is a
``ToolhostError`` and keeps the base it had, and the CLI turns one into its one line and exit
code in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import toolhost
from toolhost._cli.common import CommandError, refused
from toolhost._cli.exit_codes import ExitCode
from toolhost._model.errors import ToolhostError, UsageError

#: Exceptions outside the hierarchy on purpose (toolhost/_model/errors.py says why): the CLI's
#: own (its one line; standard output failing, D338), and what carries control inside one
#: module (``Stopped``: a SIGTERM or SIGHUP raised where the command was, a BaseException as
#: KeyboardInterrupt is, D337).
OUTSIDE = {"CommandError", "OutputFailed", "DeadlineExceeded", "Cancelled", "WriteCancelled",
           "Stopped"}


def _host_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(toolhost.__path__, "toolhost."):
        if info.name.startswith("toolhost._testing") or info.name.endswith("__main__"):
            continue  # the test kit's own; a module that runs a command when imported
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (PostgreSQL, S3) not installed here
            continue
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == info.name and not name.startswith("_")):
                found[f"{info.name}.{name}"] = value
    return [found[key] for key in sorted(found)]


def test_every_error_the_host_defines_is_a_toolhost_error() -> None:
    outside = [f"{e.__module__}.{e.__name__}" for e in _host_exceptions()
               if not issubclass(e, ToolhostError) and e.__name__ not in OUTSIDE]
    assert outside == []


def test_each_error_keeps_the_base_code_caught_it_by() -> None:
    from toolhost._model.invocations import InvocationNotFound
    from toolhost._model.settings import SettingError
    from toolhost._registration.registry import PinError, UnknownTool

    for error, base in ((InvocationNotFound, LookupError), (UnknownTool, LookupError),
                        (SettingError, ValueError), (PinError, ValueError),
                        (toolhost.ArtifactTooLarge, ValueError)):
        assert issubclass(error, base) and issubclass(error, ToolhostError)
    # The public plugin API keeps its names and behaviour: a tool's failure is still raised
    # and caught as ToolFailure, with its reason.
    with pytest.raises(toolhost.ToolFailure) as caught:
        raise toolhost.ToolValidationError()
    assert caught.value.reason_code == toolhost.ToolValidationError.REASON_CODE


@pytest.mark.parametrize(("error", "code"), [
    ("toolhost._model.settings:SettingError", ExitCode.USAGE),
    ("toolhost._pipeline.policy:PolicyConfigError", ExitCode.USAGE),
    ("toolhost._model.settings:StoreUnavailable", ExitCode.FAILED),
    ("toolhost._registration.refusals:RegistrationRefused", ExitCode.FAILED),
])
def test_the_cli_gives_a_usage_error_2_and_any_other_1(error: str, code: ExitCode) -> None:
    module, name = error.split(":")
    kind = getattr(importlib.import_module(module), name)
    exc = kind.__new__(kind)
    Exception.__init__(exc, "the one line")
    assert issubclass(kind, UsageError) is (code is ExitCode.USAGE)
    line = refused(exc)
    assert isinstance(line, CommandError)
    assert (str(line), line.code) == ("the one line", code)
