"""The CPU loops numba compiles from the formulas: blocks, numpy ufuncs, ``prange``
loops, the reduction, IEEE flags and the subnormal mode."""
