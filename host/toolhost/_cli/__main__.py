"""``python -m toolhost._cli``: the ``toolhost`` command."""

from toolhost._cli.main import main

raise SystemExit(main())
