"""cbrtgrad's kernels: the formulas and the loops numba compiles from them.

Nothing here imports numba until a kernel is built: what the api reads at
import time (below) is plain Python.
"""

#: Elements per block of ``cpu_ufuncs.fused_blocks`` (the y just written must
#: still be in cache when the gradient reads it back); the api and the ``cpu``
#: backend send fused calls of at most this size straight to the two ufuncs.
SERIAL_BLOCK = 1 << 16
