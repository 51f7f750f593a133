"""``python -m memkit``: the ``memkit`` command (see :mod:`memkit.cli`)."""

import sys

from memkit.cli import main

sys.exit(main())
