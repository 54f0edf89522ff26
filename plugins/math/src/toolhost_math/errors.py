"""The error vocabulary: the eight reasons an expression is refused.

Every math.calculate failure is INVALID_ARGUMENTS and not retryable: the tool is a pure
function, so the identical call produces the identical failure. The tokenizer, parser and
evaluator raise ``CalculationError``, which is the ``ToolFailure`` the host receives: the body
lets it through rather than building a second exception per refusal.
``detail`` is for operators (offset, token, function, argument) and never reaches the model.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from toolhost import ToolFailure

__all__ = ["REASON_CODE_PREFIX", "CalculationError", "Reason"]

REASON_CODE_PREFIX = "tool.invalid_arguments."


class Reason(enum.Enum):
    """The eight reasons, in the order the spec lists them."""

    SYNTAX = "syntax"
    UNKNOWN_NAME = "unknown_name"
    ARITY = "arity"
    DOMAIN = "domain"
    DIVISION_BY_ZERO = "division_by_zero"
    RESULT_OUT_OF_RANGE = "result_out_of_range"
    EXPRESSION_TOO_LONG = "expression_too_long"
    EXPRESSION_TOO_DEEP = "expression_too_deep"

    @property
    def reason_code(self) -> str:
        """``tool.invalid_arguments.<code>``."""
        return REASON_CODE_PREFIX + self.value


_REASON_CODES = {reason: reason.reason_code for reason in Reason}


class CalculationError(ToolFailure):
    """An expression the tool refuses, with operator-only detail; never retryable."""

    retryable = False

    def __init__(self, reason: Reason, **detail: Any) -> None:
        # What ToolFailure.__init__ sets, without its copy of ``detail`` (already a new dict).
        code = _REASON_CODES[reason]  # a dict lookup: Enum.value is a Python-level property
        self.args = (code,)
        self.reason = reason
        self.reason_code = code
        self.detail: Mapping[str, Any] = detail

    @classmethod
    def of(cls, reason: Reason, detail: dict[str, Any]) -> CalculationError:
        """``CalculationError(reason, **detail)``, for the hot path: a keyword call to a Python
        ``__init__`` packs the keywords into a dict twice, which is most of the cost."""
        code = _REASON_CODES[reason]
        error = cls.__new__(cls, code)  # BaseException.__new__ sets args
        error.reason = reason
        error.reason_code = code
        error.detail = detail
        return error

    def __repr__(self) -> str:
        return f"CalculationError({self.reason.value!r}, {dict(self.detail)!r})"
