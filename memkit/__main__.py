import sys

from memkit.cli import main

sys.exit(main())
