"""The bounds that make a hostile expression a failure rather than an outage.

The fourth bound, result magnitude (1e10000), is not here: it is the decimal context's Emax
and Emin (``toolhost_math.evaluator``), so no call site can forget to check it.
"""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "MAX_TOKENS"]

#: Characters (code points). Also the input schema's maxLength; checked again by the tokenizer.
MAX_LENGTH = 1024
#: Tokens, not counting the end of input.
MAX_TOKENS = 512
#: Grammar recursion: each call argument, parenthesized group and unary operator adds one.
MAX_DEPTH = 32
