"""``python -m cbrtgrad``: the same command line as ``cbrtgrad``."""

import sys

from .cli import main

sys.exit(main())
