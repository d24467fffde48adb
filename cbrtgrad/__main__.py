"""``python -m cbrtgrad``: the same command line as ``cbrtgrad``."""

import sys

from .cli.main import main

sys.exit(main())
