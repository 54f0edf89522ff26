"""toolhost-math: the ``math.calculate`` tool.

Exact decimal arithmetic over a closed grammar: a hand-written tokenizer, a recursive-descent
parser that enforces its depth bound while descending, and an evaluator that runs every
operation inside one ``decimal.localcontext``. Importing this package builds nothing; the host
reaches the tool through ``toolhost_math.plugin``.
"""

__all__: list[str] = []
