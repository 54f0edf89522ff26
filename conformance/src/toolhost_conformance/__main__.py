"""``python -m toolhost_conformance DIST ...``: the same as the console script."""

from __future__ import annotations

import sys

from toolhost_conformance.cli import main

if __name__ == "__main__":
    sys.exit(main())
