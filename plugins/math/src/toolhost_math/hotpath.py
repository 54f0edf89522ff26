"""The hot path: an expression the exact path would answer, answered the same way for less.

The exact path (``tokenize``, ``parse_in_order``, ``evaluate``) builds a Token per token and a
Node per tree node, and knows every offset and every reason. Most calls need none of that:
the expression lexes, parses and either evaluates or overflows. This module does those calls
with plain strings and ints (a shunting-yard pass to postfix, then a stack machine) and
declines everything else by returning None; the caller then runs the exact path, which
answers with its own reason, detail and order. Declining is always safe; answering is only
allowed where the answer is the exact path's, which tests/test_math_hot_path.py holds it to
on generated expressions.

What it answers itself: a value; result_out_of_range (an Overflow or Underflow trap);
expression_too_deep where a group or a sign opens the 33rd level, which the exact parser
raises on the spot, before anything it would defer; and what ``binary`` refuses (division by
zero, 0 to a negative power, a negative base to a fractional power), which the exact evaluator
raises from the same function, at the same operation, since both run the same post-order.
Those are the refusals the spec's hostile examples are made of. What it declines: a character
that starts no token, whitespace other than spaces, possibly more than MAX_TOKENS tokens, a
syntax error, an unknown name, a wrong arity, a call that opens the 33rd level (the exact
parser counts that level at the first argument), a name and its ``(`` with space between, and
every other failure of an operation (a function's domain error, a trap other than Overflow and
Underflow).
"""

from __future__ import annotations

import re
from decimal import Decimal, Inexact, Overflow, Underflow, getcontext, setcontext

from toolhost_math.bounds import MAX_DEPTH, MAX_LENGTH, MAX_TOKENS
from toolhost_math.errors import CalculationError, Reason
from toolhost_math.evaluator import CONTEXT, binary
from toolhost_math.functions import CONSTANTS, FUNCTIONS, OutsideDomain
from toolhost_math.tokenizer import HOT_TEXT_PATTERN, POWER

__all__ = ["evaluate_expression"]

#: Every token's text, a call's name and ``(`` as one text (``sqrt(``).
_TEXTS = re.compile(HOT_TEXT_PATTERN)

# An entry on the operator stack or in the postfix list is ``index << 4 | kind``: the text's
# position and what it is, in one int, so neither list holds a tuple. A call's entry in the
# postfix list also carries its argument count, from bit 13 (an index is under 512).
_GROUP, _CALL, _ADD, _SUB, _MUL, _DIV, _FLOOR, _MOD = range(8)
_POW, _NEG, _POS, _NUMBER, _CONSTANT = range(8, 13)
_MASK = 15
_INDEX = 511
#: Binding strength by kind. Groups and calls bind nothing: a reduction stops at them. The
#: signs sit between the term operators and ^, which is how -2^2 is -(2^2) and 2^-3*4 is
#: (2^-3)*4; ^ binds tightest and is right-associative, so an arriving ^ reduces nothing.
_PRECEDENCE = (0, 0, 1, 1, 2, 2, 2, 2, 4, 3, 3)
_BINARY = {"+": _ADD, "-": _SUB, "*": _MUL, "/": _DIV, "//": _FLOOR, "%": _MOD,
           "^": _POW, "**": _POW}
_OPENERS = {"(": _GROUP, "-": _NEG, "+": _POS}
#: The operation an Overflow or Underflow detail names, as the exact evaluator labels it.
_LABEL = {_ADD: "+", _SUB: "-", _MUL: "*", _DIV: "/", _FLOOR: "//", _MOD: "%", _POW: POWER,
          _NEG: "-", _POS: "+", _NUMBER: "number", _CONSTANT: "constant"}
#: By call text (``sqrt(``): the argument counts as a range (``in`` on a range is C, where
#: Function.accepts is a Python call), and the function.
_ARITY = {
    f"{name}(": range(function.min_args, (function.max_args or MAX_TOKENS) + 1)
    for name, function in FUNCTIONS.items()
}
_APPLY = {f"{name}(": function.apply for name, function in FUNCTIONS.items()}
_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_ZERO = Decimal(0)
_TWO = Decimal(2)
#: 2^33223 is the first power of two past the largest finite value (just under 1e10001);
#: 33300 leaves a margin of 77 doublings, so any base of at least 2 certainly overflows.
_HUGE_EXPONENT = Decimal(33300)


def evaluate_expression(expression: str) -> tuple[Decimal, bool] | None:
    """What ``evaluate(parse_in_order(tokenize(expression)))`` returns (an Evaluation's two
    fields), or None to say "ask the exact path".

    :raises CalculationError: result_out_of_range or expression_too_deep, exactly as the
        exact path raises them.
    """
    if len(expression) > MAX_LENGTH:
        return None
    texts: list[str] = _TEXTS.findall(expression)
    # ``findall`` skips what starts no token. Texts hold no whitespace, so nothing was
    # skipped exactly when they and the spaces add up to the whole input; a tab or a newline
    # fails the sum too, and goes the exact way.
    if sum(map(len, texts)) + expression.count(" ") != len(expression):
        return None
    # A call text is two tokens: counting every "(" twice is an upper bound on the tokens.
    if len(texts) + expression.count("(") > MAX_TOKENS:
        return None
    postfix = _postfix(texts, expression)
    if postfix is None:
        return None
    return _run(postfix, texts, expression)


def _postfix(texts: list[str], expression: str) -> list[int] | None:
    """The tree in post-order (the exact parser's node order), or None to decline.

    Depth counts what the exact parser recurses into: each group, call and sign open on the
    stack. A sign leaves the stack when its operand ends, which is when the exact parser's
    recursion into it returns.

    :raises CalculationError: expression_too_deep, where a group or sign opens the 33rd level
        after a prefix the exact parser accepts too.
    """
    out: list[int] = []
    emit = out.append
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    arguments: list[int] = []  # per open call, its arguments so far
    precedence = _PRECEDENCE
    depth = 0
    operand = True  # an operand comes next (else an operator, ")", "," or the end)
    for index, text in enumerate(texts):
        if operand:
            first = text[0]
            if first in _DIGITS:
                emit(index << 4 | _NUMBER)
                operand = False
            elif first in _LETTERS:
                if text[-1] == "(":
                    if text not in _ARITY or depth == MAX_DEPTH:
                        return None
                    depth += 1
                    push(index << 4 | _CALL)
                    arguments.append(1)
                elif text in CONSTANTS:
                    emit(index << 4 | _CONSTANT)
                    operand = False
                else:
                    return None
            else:
                kind = _OPENERS.get(text)
                if kind is None:
                    return None
                if depth == MAX_DEPTH:
                    raise CalculationError.of(Reason.EXPRESSION_TOO_DEEP, {
                        "offset": _offset(expression, texts, index), "token": text,
                        "limit": MAX_DEPTH,
                    })
                depth += 1
                push(index << 4 | kind)
            continue
        kind = _BINARY.get(text)
        if kind is not None:
            if kind != _POW:
                strength = precedence[kind]
                while stack and precedence[stack[-1] & _MASK] >= strength:
                    entry = pop()
                    if entry & _MASK >= _NEG:
                        depth -= 1
                    emit(entry)
            push(index << 4 | kind)
            operand = True
            continue
        if text != ")" and text != ",":
            return None  # an operand where an operator belongs
        # Close the innermost group or call argument: reduce down to its opening entry.
        while True:
            if not stack:
                return None
            entry = pop()
            kind = entry & _MASK
            if kind <= _CALL:
                break
            if kind >= _NEG:
                depth -= 1
            emit(entry)
        if text == ",":
            if kind != _CALL:
                return None
            push(entry)
            arguments[-1] += 1
            operand = True
            continue
        depth -= 1
        if kind == _CALL:
            count = arguments.pop()
            if count not in _ARITY[texts[entry >> 4]]:
                return None
            emit(count << 13 | entry)
    if operand:
        return None  # empty, or ends where an operand belongs
    while stack:
        entry = pop()
        if entry & _MASK <= _CALL:
            return None  # a group or call left open
        emit(entry)
    return out


def _run(postfix: list[int], texts: list[str], expression: str) -> tuple[Decimal, bool] | None:
    """The stack machine over ``postfix``, in the exact evaluator's context and order, or
    None if an operation fails other than by Overflow or Underflow."""
    # The evaluator's context, set as the thread's (functions read it from there) and put
    # back after: decimal.localcontext() costs a manager object and a second copy per call.
    context = CONTEXT.copy()  # the template's flags are clear: only its copies are used
    create = context.create_decimal
    values: list[Decimal] = []
    push, take = values.append, values.pop
    saved = getcontext()
    setcontext(context)
    entry = postfix[0]
    huge = False
    by_zero = False
    try:
        for entry in postfix:
            kind = entry & _MASK
            if kind == _NUMBER:
                push(create(texts[entry >> 4]))
            elif kind == _ADD:
                right = take()
                values[-1] += right
            elif kind == _MUL:
                right = take()
                values[-1] *= right
            elif kind == _SUB:
                right = take()
                values[-1] -= right
            elif kind == _POW and values[-2] > _ZERO:
                # A positive base is none of binary()'s special cases (0^x, (-8)^(1/3)).
                right = take()
                if right >= _HUGE_EXPONENT and values[-1] >= _TWO:
                    # Decimal would trap Overflow here; the trap's exception and handler
                    # cost more than the power.
                    huge = True
                    break
                values[-1] **= right
            elif kind == _DIV and values[-1]:
                right = take()  # not zero: none of binary()'s special cases
                values[-1] /= right
            elif kind == _CONSTANT:
                push(+CONSTANTS[texts[entry >> 4]])  # unary plus rounds it to the context
            elif kind == _CALL:
                count = entry >> 13
                if count == 1:
                    values[-1] = _APPLY[texts[entry >> 4 & _INDEX]](values[-1:])
                else:
                    args = values[-count:]
                    del values[-count:]
                    push(_APPLY[texts[entry >> 4 & _INDEX]](args))
            elif kind == _NEG:
                values[-1] = -values[-1]
            elif kind == _POS:
                values[-1] = +values[-1]
            else:
                right = take()
                if not right and kind != _POW:
                    # binary() refuses a zero divisor before anything else; raising here would
                    # cost a second exception and handler.
                    by_zero = True
                    break
                values[-1] = binary(_LABEL[kind], -1, values[-1], right)
    except (Overflow, Underflow) as signal:
        raise _out_of_range(entry, type(signal).__name__, texts, expression) from None
    except CalculationError as refused:
        raise _at_operator(refused, entry, texts, expression) from None
    except (ArithmeticError, OutsideDomain):
        return None  # the exact path knows which failure this is, and where
    finally:
        setcontext(saved)
    if huge:
        raise _out_of_range(entry, "Overflow", texts, expression)
    if by_zero:
        raise CalculationError.of(Reason.DIVISION_BY_ZERO, {
            "offset": _offset(expression, texts, entry >> 4 & _INDEX),
            "operation": _LABEL[entry & _MASK],
        })
    (value,) = values
    return value, not context.flags[Inexact]


def _out_of_range(entry: int, signal: str, texts: list[str], expression: str) -> CalculationError:
    """The exact evaluator's result_out_of_range for the operation ``entry``."""
    kind = entry & _MASK
    index = entry >> 4 & _INDEX
    return CalculationError.of(Reason.RESULT_OUT_OF_RANGE, {
        "offset": _offset(expression, texts, index),
        "operation": texts[index][:-1] if kind == _CALL else _LABEL[kind],
        "signal": signal,
    })


def _at_operator(refused: CalculationError, entry: int, texts: list[str],
                 expression: str) -> CalculationError:
    """``binary``'s refusal (a zero divisor, 0 to a negative power, a negative base to a
    fractional one) as the exact evaluator raises it: the same call of ``binary``, given the
    operator's offset, where the hot path gave -1."""
    offset = _offset(expression, texts, entry >> 4 & _INDEX)
    return CalculationError.of(refused.reason, {**refused.detail, "offset": offset})


def _offset(expression: str, texts: list[str], index: int) -> int:
    """Where the ``index``-th text starts: found only for a refusal, which reports it."""
    if " " not in expression:  # then no whitespace at all: the texts are the input
        return sum(map(len, texts[:index]))
    # Only spaces lie between texts, and a text starts with none: each text starts where
    # ``find`` first meets it after the end of the one before, without a second regex scan.
    end = 0
    for text in texts[:index + 1]:
        end = expression.find(text, end) + len(text)
    return end - len(texts[index])
