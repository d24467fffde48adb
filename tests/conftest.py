"""Test-session set-up shared by every test module.

NOTE: CUDA kernels are tested under numba's CUDA simulator on machines without
a GPU. The variable must be set before anything imports ``numba.cuda``; a
machine with a GPU can run the real thing with ``NUMBA_ENABLE_CUDASIM=0``.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
