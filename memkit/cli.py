"""The ``memkit`` command: ``demo``, ``stats``, ``search``, ``runs``, ``show``, ``namespaces``, ``graph``,
``export``, ``import``, ``mcp`` (``memkit --help`` lists them; each has its own ``--help``).

Exit codes: 0 done, 1 nothing matched (no run, no such run: like ``grep``), 2 bad arguments
or a store error (the message says which argument and what was expected).
"""

from __future__ import annotations

import sys

from memkit._serve._cli import main

__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
